package client

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// attempts counts the requests that reach the transport: one per attempt.
type attempts struct {
	n    atomic.Int32
	next http.RoundTripper
}

func (a *attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	a.n.Add(1)
	return a.next.RoundTrip(r)
}

// faultClient is a test client (no real waits, at most 3 attempts, so that
// a failure that is retried shows as 3) whose transport dials through a
// resolver that finds no name, trusts roots (nil: the system's) and checks
// certificates for serverName (if not ""). It counts the attempts and
// records the reasons OnRetry is given.
func faultClient(t *testing.T, base string, roots *x509.CertPool, serverName string) (*Client, *attempts, func() []string) {
	t.Helper()
	tr := NewTransport()
	tr.DialContext = (&net.Dialer{Resolver: testenv.NXDOMAIN(t)}).DialContext
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: serverName}
	count := &attempts{next: tr}
	var mu sync.Mutex
	var reasons []string
	c, _ := testClient(t, base, func(o *Options) {
		o.HTTPClient = &http.Client{Transport: count}
		o.MaxAttempts = 3
		o.OnRetry = func(_ string, _ int, _ time.Duration, reason string) {
			mu.Lock()
			reasons = append(reasons, reason)
			mu.Unlock()
		}
	})
	return c, count, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), reasons...) }
}

// quietTLS is a TLS server on 127.0.0.1 with cert (nil: httptest's own),
// its handshake errors (the point of the tests) not logged.
func quietTLS(t *testing.T, cert *tls.Certificate, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// expiredCert is a self-signed certificate for 127.0.0.1 that expired an
// hour ago, and a pool that trusts it.
func expiredCert(t *testing.T) (*tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// tlsAlerts is a server on 127.0.0.1 that answers whatever it is sent with
// a TLS alert, as some TLS servers answer plain HTTP.
func tlsAlerts(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Read(make([]byte, 1024))
			_, _ = conn.Write([]byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46}) // fatal alert: protocol version
			_ = conn.Close()
		}
	}()
	return l.Addr().String()
}

func closedPort(t *testing.T) string {
	t.Helper()
	port, err := services.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

func hostOf(rawURL string) string {
	u, _ := url.Parse(rawURL)
	return u.Host
}

// Before the API has answered, a failure that waiting cannot fix ends the
// request after its one attempt, with no retry, typed (errors.Is) and said
// with its host and cause: the base URL is most likely wrong.
func TestFaultsBeforeAnAnswerEndAtOnce(t *testing.T) {
	t.Parallel()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { status(201, nil, created)(w) }))
	t.Cleanup(plain.Close)
	goTLS := quietTLS(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { status(201, nil, created)(w) }))
	trusted := x509.NewCertPool()
	trusted.AddCert(goTLS.Certificate())
	expired, expiredRoots := expiredCert(t)
	old := quietTLS(t, expired, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { status(201, nil, created)(w) }))
	refused := closedPort(t)
	alerts := tlsAlerts(t)
	for _, tc := range []struct {
		name       string
		base       string
		roots      *x509.CertPool
		serverName string
		want       error
		says       string
	}{
		{"no such host", "http://nosuchhost.invalid:3000", nil, "", ErrNoSuchHost, "no such host nosuchhost.invalid (DNS)"},
		{"connection refused", "http://" + refused, nil, "", ErrConnectionRefused, "nothing answers at " + refused + " (connection refused)"},
		{"https to plain HTTP", "https://" + hostOf(plain.URL), nil, "", ErrServerSpeaksHTTP,
			hostOf(plain.URL) + " speaks plain HTTP, not HTTPS (http: server gave HTTP response to HTTPS client)"},
		{"plain HTTP to Go's TLS server", "http://" + hostOf(goTLS.URL), nil, "", ErrServerSpeaksHTTPS,
			hostOf(goTLS.URL) + " speaks HTTPS, not plain HTTP (it answered 400: Client sent an HTTP request to an HTTPS server.)"},
		{"plain HTTP to a TLS server's alert", "http://" + alerts, nil, "", ErrServerSpeaksHTTPS, alerts + " speaks HTTPS, not plain HTTP (malformed HTTP response"},
		{"untrusted certificate", goTLS.URL, nil, "", ErrCertificate,
			"the certificate of " + hostOf(goTLS.URL) + " failed verification (x509: certificate signed by unknown authority)"},
		{"another host's certificate", goTLS.URL, trusted, "api.example.org", ErrCertificate, "not api.example.org)"},
		{"expired certificate", old.URL, expiredRoots, "", ErrCertificate, "x509: certificate has expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, count, reasons := faultClient(t, tc.base, tc.roots, tc.serverName)
			_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tc.want) || e.Fault != tc.want || e.Exhausted || e.Attempts != 1 {
				t.Fatalf("err = %v (%#v); want %v after one attempt", err, err, tc.want)
			}
			if n := count.n.Load(); n != 1 || len(reasons()) != 0 {
				t.Errorf("%d attempts, retries %q; want one attempt and no retry", n, reasons())
			}
			if !strings.Contains(err.Error(), "create: "+tc.says) && !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err says %q; want %q", err.Error(), tc.says)
			}
			if errors.Is(err, ErrNotOnceupload) {
				t.Errorf("err %v is taken for a foreign API; want the fault only", err)
			}
		})
	}
}

// Once the API has answered, a name DNS does not find and a refused
// connection are retried (a laptop moving from Wi-Fi to mobile data loses
// both for a moment), for the API and for S3; a certificate that fails
// verification still ends the request at once, for both. An answer that
// is not the API's (a foreign server at the base URL) is no answer of
// the API's: a refused connection after it still ends at once.
func TestFaultsAfterAnAnswer(t *testing.T) {
	t.Parallel()
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { status(201, nil, created)(w) }))
	t.Cleanup(apiSrv.Close)
	untrusted := quietTLS(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	refused := closedPort(t)
	c, count, reasons := faultClient(t, apiSrv.URL, nil, "")
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		to       target
		op, url  string
		want     error
		attempts int
		reason   string
	}{
		{toAPI, "status", "http://nosuchhost.invalid:3000/uploads/u1", ErrNoSuchHost, 3, "no answer from the API (no such host)"},
		{toStorage, "put", "http://nosuchhost.invalid:9000/b/u1", ErrNoSuchHost, 3, "no answer from S3 (no such host)"},
		{toAPI, "status", "http://" + refused + "/uploads/u1", ErrConnectionRefused, 3, "no answer from the API (connection refused)"},
		{toStorage, "put part 2", "http://" + refused + "/b/u1", ErrConnectionRefused, 3, "no answer from S3 (connection refused)"},
		{toAPI, "status", untrusted.URL + "/uploads/u1", ErrCertificate, 1, ""},
		{toStorage, "put", untrusted.URL + "/b/u1", ErrCertificate, 1, ""},
	} {
		count.n.Store(0)
		before := len(reasons())
		_, _, err := c.do(context.Background(), tc.to, tc.op, func() (*http.Request, error) { return http.NewRequest(http.MethodGet, tc.url, nil) })
		var e *Error
		got := reasons()[before:]
		if !errors.As(err, &e) || !errors.Is(err, tc.want) || e.Attempts != tc.attempts || count.n.Load() != int32(tc.attempts) || e.Exhausted != (tc.attempts > 1) {
			t.Errorf("%s %s: err %v after %d attempts; want %v after %d", tc.op, tc.url, err, count.n.Load(), tc.want, tc.attempts)
		}
		if len(got) != tc.attempts-1 || len(got) > 0 && got[0] != tc.reason {
			t.Errorf("%s %s: retried for %q; want %d retries for %q", tc.op, tc.url, got, tc.attempts-1, tc.reason)
		}
	}

	// A foreign answer first: the API has not answered yet.
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(404)
		_, _ = io.WriteString(w, "<html>not here</html>")
	}))
	t.Cleanup(foreign.Close)
	c, count, _ = faultClient(t, foreign.URL, nil, "")
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); !errors.Is(err, ErrNotOnceupload) {
		t.Fatalf("foreign: %v; want ErrNotOnceupload", err)
	}
	count.n.Store(0)
	_, _, err := c.do(context.Background(), toAPI, "status", func() (*http.Request, error) {
		return http.NewRequest(http.MethodGet, "http://"+refused+"/uploads/u1", nil)
	})
	if !errors.Is(err, ErrConnectionRefused) || count.n.Load() != 1 {
		t.Errorf("refused after a foreign answer: %v after %d attempts; want ErrConnectionRefused after one", err, count.n.Load())
	}
}

// A presigned URL's query (its signature and session token) appears in no
// error, retry reason or log line, whatever failed: the host and the
// innermost cause are said instead.
func TestPresignedURLsAreNeverPrinted(t *testing.T) {
	t.Parallel()
	const query = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Security-Token=session-token&X-Amz-Signature=0123abcd"
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.CopyN(io.Discard, r.Body, 10)
		conn, _, _ := w.(http.Hijacker).Hijack()
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a close
		}
		conn.Close()
	}))
	t.Cleanup(reset.Close)
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leave
		<-r.Context().Done()
	}))
	t.Cleanup(held.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(plain.Close)
	untrusted := quietTLS(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for _, tc := range []struct{ name, url string }{
		{"reset", reset.URL + "/b/u1" + query},
		{"refused", "http://" + closedPort(t) + "/b/u1" + query},
		{"no such host", "http://bucket.nosuchhost.invalid/b/u1" + query},
		{"untrusted certificate", untrusted.URL + "/b/u1" + query},
		{"https to plain HTTP", "https://" + hostOf(plain.URL) + "/b/u1" + query},
		{"deadline", held.URL + "/b/u1" + query},
		{"unparsable", reset.URL + "/b/u1" + query + "\x7f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c, _, reasons := faultClient(t, "http://127.0.0.1:1", nil, "")
			c.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			c.answered.Store(true) // S3 is asked once the API has answered
			ctx := context.Background()
			if tc.name == "deadline" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			_, _, err := c.do(ctx, toStorage, "put", func() (*http.Request, error) {
				return http.NewRequest(http.MethodPut, tc.url, strings.NewReader(strings.Repeat("x", 1<<16)))
			})
			if err == nil {
				t.Fatal("no error")
			}
			printed := []string{err.Error(), fmt.Sprintf("%v", errors.Unwrap(err)), fmt.Sprintf("%+v", err), logs.String()}
			printed = append(printed, reasons()...)
			for _, p := range printed {
				if l := strings.ToLower(p); strings.Contains(l, "x-amz-") || strings.Contains(l, "session-token") || strings.Contains(l, "0123abcd") {
					t.Errorf("printed %q: it shows the presigned URL's query", p)
				}
			}
			if tc.name != "unparsable" && tc.name != "deadline" && !strings.Contains(err.Error(), hostOf(tc.url)) && !strings.Contains(err.Error(), "nosuchhost.invalid") {
				t.Errorf("err %q does not name the host %s", err, hostOf(tc.url))
			}
		})
	}
}

// A failure without an answer is said by its innermost cause: what the
// retry lines show.
func TestBriefNamesTheInnermostCause(t *testing.T) {
	t.Parallel()
	wrap := func(op string, err error) error {
		return &url.Error{Op: "Put", URL: "https://b.s3.example/k?X-Amz-Signature=s", Err: &net.OpError{Op: op, Net: "tcp", Err: err}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrap("read", os.ErrDeadlineExceeded), "i/o timeout"},
		{wrap("write", &os.SyscallError{Syscall: "write", Err: syscall.ECONNRESET}), "connection reset by peer"},
		{wrap("dial", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "connection refused"},
		{wrap("dial", &net.DNSError{Err: "no such host", Name: "b.s3.example", IsNotFound: true}), "no such host"},
		{wrap("dial", &net.DNSError{Err: "server misbehaving", Name: "b.s3.example", IsTemporary: true}), "server misbehaving"},
		{&url.Error{Op: "Put", URL: "https://b.s3.example/k", Err: io.EOF}, "connection closed"},
		{&url.Error{Op: "Put", URL: "https://b.s3.example/k", Err: errors.New("net/http: timeout awaiting response headers")}, "timeout awaiting response headers"},
	} {
		if got := brief(tc.err); got != tc.want {
			t.Errorf("brief(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got := retryReason(toAPI, &Error{Err: wrap("read", os.ErrDeadlineExceeded)}); got != "no answer from the API (i/o timeout)" {
		t.Errorf("retryReason = %q", got)
	}
	if got := (&Error{Op: "put part 3", Host: "b.s3.example", Err: wrap("write", syscall.ECONNRESET), Attempts: 4, Exhausted: true}).Error(); got != "put part 3: b.s3.example: connection reset by peer (gave up after 4 attempts)" {
		t.Errorf("Error() = %q", got)
	}
}
