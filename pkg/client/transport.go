package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// This file sends requests: one attempt after another under the retry
// policy (retry.go), and the errors of requests that failed for good.

// NewTransport returns the transport of a Client's default HTTPClient, to
// change (a proxy, say) and pass back in Options.HTTPClient: it gives up
// waiting for response headers after 60 seconds, and keeps enough idle
// connections for the parts in flight.
func NewTransport() *http.Transport { return newTransport(DefaultStallTimeout) }

// DefaultStallTimeout is how long a request body may make no progress (the
// network took no bytes) before the attempt fails and is retried: a network
// that silently drops packets, as on a move from Wi-Fi to mobile data,
// otherwise leaves an upload waiting for ever.
const DefaultStallTimeout = 60 * time.Second

func newTransport(stall time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 16
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: conn, stall: stall}, nil
	}
	return t
}

// stallConn fails a write that makes no progress for stall: the transport
// bounds the wait for an answer (ResponseHeaderTimeout) but not the sending
// of a body.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Write(b []byte) (int, error) {
	if err := c.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Error is a request that failed for good. Test with errors.As.
type Error struct {
	Op         string // "create", "status", "put", "sign", "put part N", "list parts", "complete", "abort", "resume", "verify"
	StatusCode int    // 0 when no response arrived
	Code       string // the API's error code, or S3's
	Message    string
	Attempts   int
	// Exhausted is true when the last failure could have been retried but
	// the attempts, the retry budget or the deadline ran out.
	Exhausted bool
	// Err is the transport or context error, if any. A *url.Error in it
	// has its URL cut to scheme, host and path: a presigned URL's query
	// holds its signature and session token.
	Err error
	// Host is the host (and port, if the URL gave one) the request went
	// to, when it went anywhere.
	Host string
	// Storage is true when the request went to storage (a presigned URL:
	// S3), false when it went to the API. Op only names the request.
	Storage bool
	// Fault, when not nil, is the failure that waiting cannot fix that
	// ended the last attempt: ErrNoSuchHost, ErrConnectionRefused,
	// ErrServerSpeaksHTTP, ErrServerSpeaksHTTPS or ErrCertificate.
	// errors.Is(err, ErrNoSuchHost) tests it. With Exhausted false, it
	// ended the request at once; Exhausted, it was retried (the API had
	// answered before, or an earlier attempt may have reached it: Reached)
	// until the retries ran out.
	Fault error
	// NotOnceupload is true when the answer to an API request was not the
	// API's (no error body with one of its codes, nor one of API Gateway's
	// own answers; a 2xx whose body is not JSON): the base URL points at
	// something else. Answer says what answered. errors.Is(err,
	// ErrNotOnceupload) tests it. Once the API has answered the Client, a
	// foreign answer is taken for no answer (a captive portal, a proxy in
	// between) and retried: it then comes with Exhausted.
	NotOnceupload bool
	// Gateway is true when API Gateway answered itself, before the API's
	// code ran (its authorizer's 401 {"message":"Unauthorized"}, a 429,
	// 503 or 504 with {"message": …}); Message is its message.
	Gateway bool
	// Answer describes a foreign answer: status, Server header, media type
	// and the first bytes of the body.
	Answer string
	// Reached is true when an attempt of this request may have reached the
	// server and been acted on: it got past the dial (a byte of it may
	// have been sent) and did not end in a fault or a foreign answer. With
	// Reached false, no server acted on the request (every attempt was
	// refused, failed in DNS, or met something else than the API): a
	// create's key was never seen and may be dropped.
	Reached bool
}

// Is makes errors.Is(err, ErrNotOnceupload) true for a foreign answer, and
// errors.Is(err, ErrNoSuchHost) (and the other faults) for its Fault.
func (e *Error) Is(target error) bool {
	return target == ErrNotOnceupload && e.NotOnceupload || e.Fault != nil && target == e.Fault
}

// Error says what failed in one line. A failure without an answer names
// the host and the innermost cause ("create: 127.0.0.1:3000: connection
// refused"), never the URL.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.Op)
	if e.Fault != nil {
		fmt.Fprintf(&b, ": %s", e.FaultSentence())
		if e.Exhausted {
			fmt.Fprintf(&b, " (gave up after %d attempts)", e.Attempts)
		}
		return b.String()
	}
	if e.NotOnceupload {
		if e.Exhausted {
			// Retried: something in front of the API answered for it.
			fmt.Fprintf(&b, ": no answer from the API: something else answered %s (gave up after %d attempts)", e.Answer, e.Attempts)
			return b.String()
		}
		fmt.Fprintf(&b, ": not a onceupload API: it answered %s", e.Answer)
		return b.String()
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": %d", e.StatusCode)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Gateway {
		fmt.Fprintf(&b, " from API Gateway")
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	switch {
	case e.Err != nil && e.Host != "" && e.StatusCode == 0:
		fmt.Fprintf(&b, ": %s: %s", e.Host, brief(e.Err))
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Exhausted {
		fmt.Fprintf(&b, " (gave up after %d attempts)", e.Attempts)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// FaultSentence says the Fault in words, with the host and the cause:
// "no such host api.example.invalid (DNS)", "127.0.0.1:3000 speaks plain
// HTTP, not HTTPS", "the certificate of 127.0.0.1:8443 failed
// verification (x509: certificate signed by unknown authority)". It is ""
// without a Fault.
func (e *Error) FaultSentence() string {
	host := cmp.Or(e.Host, "the server")
	switch e.Fault {
	case ErrNoSuchHost:
		var dns *net.DNSError
		if errors.As(e.Err, &dns) && dns.Name != "" {
			host = dns.Name
		}
		return "no such host " + host + " (DNS)"
	case ErrConnectionRefused:
		return "nothing answers at " + host + " (connection refused)"
	case ErrServerSpeaksHTTP:
		return host + " speaks plain HTTP, not HTTPS (" + brief(e.Err) + ")"
	case ErrServerSpeaksHTTPS:
		if e.Err != nil {
			return host + " speaks HTTPS, not plain HTTP (" + brief(e.Err) + ")"
		}
		return fmt.Sprintf("%s speaks HTTPS, not plain HTTP (it answered %d: %s)", host, e.StatusCode, e.Message)
	case ErrCertificate:
		return "the certificate of " + host + " failed verification (" + brief(e.Err) + ")"
	case nil:
		return ""
	}
	return host + ": " + e.Fault.Error()
}

// target is where a request goes. It alone decides whether the request
// carries the API's bearer token, whether a failed answer is judged as the
// API's (foreign or API Gateway's) and counts as the API having answered
// (faults.go), and who a retry line names; an operation's name is for
// messages only, so renaming one can never send the token to S3.
type target int

const (
	// toAPI is the onceupload API at the base URL.
	toAPI target = iota + 1 // the zero target is no API: no token goes with it
	// toStorage is a presigned URL: S3, or what stands in for it.
	toStorage
)

// api reports whether t is the API (and not, say, the zero target).
func (t target) api() bool { return t == toAPI }

// who names t in a retry line.
func (t target) who() string {
	if t.api() {
		return "the API"
	}
	return "S3"
}

// do sends the request to to built by build, a new one per attempt so
// that its body starts over, and retries per the policy. It returns the
// successful response's body.
func (c *Client) do(ctx context.Context, to target, op string, build func() (*http.Request, error)) (*http.Response, []byte, error) {
	return c.doUntil(ctx, to, op, nil, build)
}

// doUntil is do for a request that some answers besides a 2xx end (a
// single PUT's 412: its object is stored already): when answered (if not
// nil) says so of a response, it is returned, with its body, as a success,
// never retried whatever CheckRetry says.
func (c *Client) doUntil(ctx context.Context, to target, op string, answered func(*http.Response) bool, build func() (*http.Request, error)) (*http.Response, []byte, error) {
	var firstEnded time.Time
	// A 401 from the API gets one repeat, at once, with a fresh token.
	refreshed, repeats := false, 0 // repeats: with a fresh token, outside MaxAttempts
	var refused *Error             // the 401 that asked for a fresh token
	var lastAuth string
	reached := false // an attempt so far may have reached the server
	for attempt := 1; ; attempt++ {
		req, err := build()
		if err == nil && to.api() {
			tctx := ctx
			if refused != nil {
				tctx = WithFreshToken(ctx)
			}
			err = c.authorize(tctx, req)
		}
		if err != nil {
			return nil, nil, &Error{Op: op, Attempts: attempt, Err: redact(err), Storage: !to.api()}
		}
		if refused != nil {
			if req.Header.Get("Authorization") == lastAuth {
				return nil, nil, refused // no fresh token to be had (a fixed one)
			}
			if c.opts.OnRetry != nil {
				c.opts.OnRetry(op, attempt-1, 0, "the API refused the token (401); with a fresh one")
			}
			refused = nil
		}
		lastAuth = req.Header.Get("Authorization")
		resp, err := c.opts.HTTPClient.Do(req.WithContext(ctx))
		var body []byte
		if err == nil {
			// Enough for the largest answer: a list of 10,000 parts.
			body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			if err != nil {
				// An answer cut while it is read is no answer: a transport
				// failure, as net/http wraps those, whatever the cause's
				// type (a chunked body cut before its final CRLF is "http:
				// unexpected EOF reading trailer", no io.EOF or net.Error).
				err = &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
			}
		}
		if attempt == 1 {
			firstEnded = c.opts.now()
		}
		if err == nil && (resp.StatusCode < 300 || answered != nil && answered(resp)) && !(to.api() && foreign2xx(body)) {
			if to.api() {
				c.answered.Store(true)
			}
			return resp, body, nil
		}
		err = redact(err)
		fail := &Error{Op: op, Attempts: attempt, Err: err, Host: req.URL.Host, Storage: !to.api(),
			Fault: transportFault(req.URL.Scheme, resp, body, err)}
		if err == nil && fail.Fault != nil {
			// A server, but not speaking the URL's scheme: not the API,
			// nor an answer of its.
			fail.StatusCode, fail.Message = resp.StatusCode, firstBytes(body, 80)
		} else if err == nil {
			fail.StatusCode = resp.StatusCode
			fail.Code, fail.Message = describe(body)
			if to.api() {
				var msg string
				fail.Gateway, msg, fail.NotOnceupload = classify(resp, body)
				if fail.Gateway {
					fail.Message = msg
				}
				if fail.NotOnceupload {
					fail.Code, fail.Message, fail.Answer = "", "", describeAnswer(resp, body)
				} else {
					c.answered.Store(true)
				}
			}
		}
		// This attempt reached the server unless it failed at the dial (a
		// refused connection, DNS), at a fault, or met a foreign answer.
		reached = reached || !(fail.Fault != nil || fail.NotOnceupload || dialFailure(err))
		fail.Reached = reached
		if ctx.Err() != nil {
			fail.Err, fail.Exhausted, fail.Fault = ctx.Err(), true, nil
			return nil, nil, fail
		}
		if c.endsAtOnce(fail.Fault, reached) {
			return nil, nil, fail // waiting cannot fix it
		}
		// Once the API has answered this client, a foreign answer (a
		// captive portal's 511 or its page after a redirect, a proxy's
		// 403 or 407 page) is no answer: something stands between, for a
		// while; it is retried until the budget runs out, whatever
		// CheckRetry says, never taken for a wrong base URL.
		noAnswer := fail.NotOnceupload && c.answered.Load()
		if err == nil && resp.StatusCode == http.StatusUnauthorized && to.api() && !fail.NotOnceupload && c.opts.Token != nil && !refreshed {
			// The token expired or was revoked: a fresh one may pass.
			refreshed, refused, repeats = true, fail, 1
			c.opts.Logger.InfoContext(ctx, "asking for a fresh token", "op", op, "attempt", attempt)
			continue
		}
		if !noAnswer && !c.opts.CheckRetry(resp, body, err) {
			return nil, nil, fail
		}
		if c.opts.MaxAttempts > 0 && attempt-repeats >= c.opts.MaxAttempts {
			fail.Exhausted = true
			return nil, nil, fail
		}
		wait := c.retryWait(attempt-1, resp)
		if c.opts.RetryBudget > 0 && c.opts.now().Add(wait).Sub(firstEnded) > c.opts.RetryBudget {
			fail.Exhausted = true
			return nil, nil, fail
		}
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(op, attempt, wait, retryReason(to, fail))
		}
		c.opts.Logger.InfoContext(ctx, "retrying", "op", op, "attempt", attempt, "status", fail.StatusCode, "code", fail.Code, "error", err, "wait", wait)
		if err := c.opts.sleep(ctx, wait); err != nil {
			fail.Err, fail.Exhausted = err, true
			return nil, nil, fail
		}
	}
}

// foreign2xx reports whether a 2xx's body cannot be the API's: not empty
// and not JSON (a captive portal's or a proxy's HTML page, reached after a
// redirect). Every answer of the API is JSON.
func foreign2xx(body []byte) bool {
	return len(bytes.TrimSpace(body)) > 0 && !json.Valid(body)
}

// urlErrorOp is a *url.Error's Op for method, as net/http spells it: "Put".
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// call sends an API request about one upload and decodes the answer.
func (c *Client) call(ctx context.Context, op, method, suffix, uploadID string, payload []byte, out any) error {
	resp, body, err := c.do(ctx, toAPI, op, func() (*http.Request, error) {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		r, err := http.NewRequest(method, c.base.String()+"/uploads/"+url.PathEscape(uploadID)+suffix, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, nil
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return unreadable(op, resp, body, err)
	}
	return nil
}

// FreshToken reports whether Options.Token is asked for a fresh token:
// the API refused the last one (401), and the request is repeated once
// with the token Token now returns. A Token that caches its token (one
// that runs a command, say) must then get a new one; one that reads the
// current token each time needs no change.
func FreshToken(ctx context.Context) bool {
	fresh, _ := ctx.Value(freshTokenKey{}).(bool)
	return fresh
}

// WithFreshToken returns ctx asking for a fresh token, as the client asks
// Options.Token after a 401: for tests of a Token.
func WithFreshToken(ctx context.Context) context.Context {
	return context.WithValue(ctx, freshTokenKey{}, true)
}

type freshTokenKey struct{}

// authorize sets the bearer token of an API request, if the client has a
// Token.
func (c *Client) authorize(ctx context.Context, r *http.Request) error {
	if c.opts.Token == nil {
		return nil
	}
	token, err := c.opts.Token(ctx)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	return nil
}

// describe reads an error body: the API's JSON, or S3's XML.
func describe(body []byte) (code, message string) {
	var e api.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error, e.Message
	}
	var s3err struct{ Code, Message string }
	if xml.Unmarshal(body, &s3err) == nil {
		return s3err.Code, s3err.Message
	}
	return "", ""
}

func errorCode(body []byte) string {
	code, _ := describe(body)
	return code
}
