package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// This file sorts out the transport failures that waiting cannot fix (a
// host name that does not exist, the wrong scheme for the port, a
// certificate that fails verification) from those a retry may cure, and
// says a failure briefly: its innermost cause and the host, never the URL
// (a presigned URL carries its signature and session token).

// Transport failures that waiting cannot fix, each an *Error's Fault:
// errors.Is(err, ErrNoSuchHost) tests for it. Before the API has answered
// a Client once (any answer that is the API's or API Gateway's), each ends
// the request at once, whatever CheckRetry says: the base URL is most
// likely wrong; but only while no earlier attempt of the request may have
// reached the server (each failed at the dial: refused, or DNS), else it
// is retried as any network failure (Error.Reached). Once the API has answered, ErrCertificate
// still does, for the API and for S3 alike; the others are retried as any
// network failure (a laptop moving from Wi-Fi to mobile data loses its
// DNS or its route for a moment).
var (
	// ErrNoSuchHost: DNS says the host name does not exist (an
	// authoritative answer: *net.DNSError with IsNotFound; a resolver that
	// cannot be reached is a failure like any other).
	ErrNoSuchHost = errors.New("no such host")
	// ErrConnectionRefused: nothing listens at the host and port.
	ErrConnectionRefused = errors.New("connection refused")
	// ErrServerSpeaksHTTP: an https:// URL whose server speaks plain HTTP,
	// or at least not TLS (net/http's http.ErrSchemeMismatch, or a
	// tls.RecordHeaderError).
	ErrServerSpeaksHTTP = errors.New("the server speaks plain HTTP, not HTTPS")
	// ErrServerSpeaksHTTPS: an http:// URL whose server speaks TLS: it
	// answered 400 saying so (Go's, nginx's and Apache's servers do) or
	// with TLS bytes.
	ErrServerSpeaksHTTPS = errors.New("the server speaks HTTPS, not plain HTTP")
	// ErrCertificate: the server's certificate failed verification: signed
	// by an authority this system does not trust, issued for another host
	// name, expired or otherwise invalid (tls.CertificateVerificationError,
	// x509.UnknownAuthorityError, x509.HostnameError,
	// x509.CertificateInvalidError). Never retried.
	ErrCertificate = errors.New("the server's certificate failed verification")
)

// transportFault classifies an attempt at a URL of scheme that ended in
// err, or in resp with body: one of the faults above, or nil.
func transportFault(scheme string, resp *http.Response, body []byte, err error) error {
	if err == nil {
		if resp.StatusCode == http.StatusBadRequest && strings.EqualFold(scheme, "http") && saysHTTPS(body) {
			return ErrServerSpeaksHTTPS
		}
		return nil
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		dns      *net.DNSError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return ErrCertificate
	case errors.As(err, &dns) && dns.IsNotFound:
		return ErrNoSuchHost
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrConnectionRefused
	case errors.Is(err, http.ErrSchemeMismatch), errors.As(err, &record):
		return ErrServerSpeaksHTTP
	case strings.EqualFold(scheme, "http") && tlsBytes(err):
		return ErrServerSpeaksHTTPS
	}
	return nil
}

// endsAtOnce says whether fault ends the request after this attempt: a
// certificate always, the others until the API has answered, and only
// while no attempt of this request may have reached the server (reached):
// a create whose first attempt was sent and whose answer was lost, then
// refused (a proxy restarting), may have created its upload, so it is
// retried as any network failure, never ended as a wrong base URL.
func (c *Client) endsAtOnce(fault error, reached bool) bool {
	return fault == ErrCertificate || fault != nil && !reached && !c.answered.Load()
}

// dialFailure reports whether err ended an attempt before a byte of its
// request was sent: the dial failed (a refused connection, a timeout) or
// DNS did.
func dialFailure(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// saysHTTPS reports whether a 400's body is a server's word that it wants
// TLS: Go's "Client sent an HTTP request to an HTTPS server.", nginx's "The
// plain HTTP request was sent to HTTPS port", Apache's "You're speaking
// plain HTTP to an SSL-enabled server port".
func saysHTTPS(body []byte) bool {
	s := strings.ToLower(string(body[:min(len(body), 1024)]))
	return strings.Contains(s, "http request to an https") || strings.Contains(s, "plain http")
}

// tlsBytes reports whether an answer that is not HTTP is TLS: a record
// header (an alert, 0x15, or a handshake, 0x16, of TLS 1.x) where the
// status line should be.
func tlsBytes(err error) bool {
	s := err.Error()
	return strings.Contains(s, `malformed HTTP response "\x15\x03`) || strings.Contains(s, `malformed HTTP response "\x16\x03`)
}

// brief is an attempt's failure, for people: its innermost cause ("connection
// refused", "i/o timeout", "connection reset by peer", "no such host",
// "x509: certificate signed by unknown authority"), never the URL.
func brief(err error) string {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.Err != "" {
		return dns.Err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed"
	}
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	return strings.TrimPrefix(err.Error(), "net/http: ")
}

// redact drops the query (a presigned URL's signature and session token),
// the fragment and any user info from the URL of a *url.Error in err, so
// that nothing that prints err, a log line included, shows them.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		raw, _, _ = strings.Cut(raw, "?")
		raw, _, _ = strings.Cut(raw, "#")
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
