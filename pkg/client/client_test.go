package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

func TestFullJitter(t *testing.T) {
	t.Parallel()
	base, ceiling := 100*time.Millisecond, time.Second
	cases := []struct {
		attempt int
		random  float64
		want    time.Duration
	}{
		{0, 0.5, 50 * time.Millisecond},
		{1, 0.5, 100 * time.Millisecond},
		{3, 0.5, 400 * time.Millisecond},
		{4, 0.5, 500 * time.Millisecond}, // 1.6s capped at 1s
		{200, 0.999, 999 * time.Millisecond},
		{2, 0, 0},
	}
	for _, tc := range cases {
		if got := FullJitter(tc.attempt, base, ceiling, tc.random); got != tc.want {
			t.Errorf("FullJitter(%d, r=%v) = %v, want %v", tc.attempt, tc.random, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		want time.Duration
		ok   bool
	}{
		"":                              {0, false},
		"3":                             {3 * time.Second, true},
		"0":                             {0, true},
		"-1":                            {0, false},
		"soon":                          {0, false},
		"Sun, 29 Nov 2026 12:00:07 GMT": {7 * time.Second, true},
		"Sun, 29 Nov 2026 11:59:00 GMT": {0, true},
	}
	for h, tc := range cases {
		got, ok := retryAfter(h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", h, got, ok, tc.want, tc.ok)
		}
	}
}

// script is a test API answering each request with the next scripted
// response, and recording the keys it saw.
type script struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	keys    []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	n := len(s.keys) - 1
	s.mu.Unlock()
	if n >= len(s.answers) {
		n = len(s.answers) - 1
	}
	s.answers[n](w)
}

func status(code int, headers map[string]string, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

const created = `{"uploadId":"u1","status":"pending","storageKey":"uploads/u1","filename":"a.txt","contentType":"text/plain","bytes":1,"sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","upload":{"method":"PUT","url":"http://s3.invalid/u1","headers":{},"expiresAt":"x"}}`

// testClient has a fixed random source (0.5) and a sleeper that records
// the waits instead of waiting.
func testClient(t *testing.T, url string, optFns ...func(*Options)) (*Client, *[]time.Duration) {
	t.Helper()
	var waits []time.Duration
	c, err := New(url, append([]func(*Options){func(o *Options) {
		o.BaseDelay, o.MaxDelay, o.MaxRetryAfter = 100*time.Millisecond, 2*time.Second, 5*time.Second
		o.random = func() float64 { return 0.5 }
		o.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return ctx.Err() }
		o.now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, &waits
}

var req = api.CreateRequest{Filename: "a.txt", ContentType: "text/plain", Size: 1, SHA256: strings.Repeat("a", 64)}

// 503, then 429 with Retry-After: 1, then 201: three requests, one key,
// waits of exactly the backoff and then the server's Retry-After.
func TestCreateRetriesWithOneKey(t *testing.T) {
	t.Parallel()
	s := &script{answers: []func(http.ResponseWriter){
		status(503, nil, `{"error":"service_unavailable","message":"busy"}`),
		status(429, map[string]string{"Retry-After": "1"}, `{"error":"slow_down","message":"x"}`),
		status(201, map[string]string{"Idempotent-Replay": "true"}, created),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, waits := testClient(t, srv.URL)
	out, err := c.Create(context.Background(), "key-0123456789abcdef", req)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Replayed || out.Upload.UploadID != "u1" {
		t.Errorf("Create = %+v", out)
	}
	if len(s.keys) != 3 || s.keys[0] != "key-0123456789abcdef" || s.keys[1] != s.keys[0] || s.keys[2] != s.keys[0] {
		t.Errorf("server saw keys %q, want the same key three times", s.keys)
	}
	if want := []time.Duration{50 * time.Millisecond, time.Second}; !equal(*waits, want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFinalAnswersAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		code   string
	}{
		{400, `{"error":"invalid_request","message":"sha256 must be 64 hex characters."}`, "invalid_request"},
		{401, `{"error":"unauthenticated","message":"x"}`, "unauthenticated"},
		{409, `{"error":"some_other_conflict","message":"x"}`, "some_other_conflict"},
		{413, `{"error":"file_too_large","message":"x"}`, "file_too_large"},
		{422, `{"error":"idempotency_key_reuse","message":"x"}`, "idempotency_key_reuse"},
	} {
		s := &script{answers: []func(http.ResponseWriter){status(tc.status, nil, tc.body)}}
		srv := httptest.NewServer(s)
		c, waits := testClient(t, srv.URL)
		_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
		srv.Close()
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != tc.status || e.Code != tc.code || e.Attempts != 1 || e.Exhausted || e.Message == "" {
			t.Errorf("%d: err = %#v", tc.status, err)
		}
		if len(s.keys) != 1 || len(*waits) != 0 {
			t.Errorf("%d: %d requests, %d waits; want 1 and 0", tc.status, len(s.keys), len(*waits))
		}
	}
}

// A 201 that describes another request (a mixed-up proxy or server) is an
// error, not retried, so no byte goes to another upload's URL.
func TestAnswerForAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	for field, other := range map[string]string{
		"filename":    strings.Replace(created, `"a.txt"`, `"b.txt"`, 1),
		"contentType": strings.Replace(created, `"text/plain"`, `"text/html"`, 1),
		"size":        strings.Replace(created, `"bytes":1`, `"bytes":2`, 1),
		"sha256":      strings.Replace(created, `"aaaaaaaa`, `"baaaaaaa`, 1),
	} {
		s := &script{answers: []func(http.ResponseWriter){status(201, nil, other)}}
		srv := httptest.NewServer(s)
		c, _ := testClient(t, srv.URL)
		_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
		srv.Close()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeAnswerMismatch || !strings.Contains(e.Message, field) || len(s.keys) != 1 {
			t.Errorf("%s differs: err = %v after %d requests; want %s naming it, not retried", field, err, len(s.keys), CodeAnswerMismatch)
		}
	}
	// The sha256 is compared without regard to case (the server lower-cases it).
	s := &script{answers: []func(http.ResponseWriter){status(201, nil, created)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := testClient(t, srv.URL)
	upper := req
	upper.SHA256 = strings.ToUpper(req.SHA256)
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", upper); err != nil {
		t.Errorf("upper-case sha256: %v", err)
	}
}

func TestRetryableAnswers(t *testing.T) {
	t.Parallel()
	for _, code := range []int{408, 425, 429, 500, 502, 503, 504} {
		s := &script{answers: []func(http.ResponseWriter){status(code, nil, ``), status(201, nil, created)}}
		srv := httptest.NewServer(s)
		c, _ := testClient(t, srv.URL)
		if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil || len(s.keys) != 2 {
			t.Errorf("%d: %v after %d requests, want success after 2", code, err, len(s.keys))
		}
		srv.Close()
	}
	// 409 only when the claim is in progress, after its Retry-After (an
	// HTTP date here), capped at MaxRetryAfter.
	s := &script{answers: []func(http.ResponseWriter){
		status(409, map[string]string{"Retry-After": "Sun, 29 Nov 2026 12:00:02 GMT"}, `{"error":"idempotency_in_progress","message":"x"}`),
		status(503, map[string]string{"Retry-After": "3600"}, ``),
		status(201, nil, created),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, waits := testClient(t, srv.URL)
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{2 * time.Second, 5 * time.Second}; !equal(*waits, want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 { // the request arrived; the answer is lost
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.WriteHeader(201)
		_, _ = w.Write([]byte(created))
	}))
	defer srv.Close()
	c, waits := testClient(t, srv.URL)
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(*waits) != 1 {
		t.Errorf("%d calls, waits %v", calls, *waits)
	}
}

// An answer whose body is cut while it is read (the connection closed or
// reset mid-body, wherever that falls) is no answer: the request is sent
// again, as after any network failure. A chunked body cut after its last
// chunk, before the final CRLF, fails with net/http's "unexpected EOF
// reading trailer", which is neither io.EOF nor a net.Error.
func TestAnswersCutWhileReadAreRetried(t *testing.T) {
	t.Parallel()
	head := "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
	chunk := fmt.Sprintf("%x\r\n%s\r\n", len(created), created)
	for _, tc := range []struct {
		name, answer string
		reset        bool
	}{
		{"chunked, cut before the trailer", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk + "0\r\n", false},
		{"chunked, reset before the trailer", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk + "0\r\n", true},
		{"chunked, cut mid-chunk", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk[:20], false},
		{"Content-Length, cut short", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(created)) + created[:20], false},
		{"Content-Length, reset", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(created)) + created[:20], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) > 1 {
					w.WriteHeader(201)
					_, _ = w.Write([]byte(created))
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				conn, buf, _ := w.(http.Hijacker).Hijack()
				_, _ = buf.WriteString(tc.answer)
				_ = buf.Flush()
				if tc.reset {
					_ = conn.(*net.TCPConn).SetLinger(0)
				}
				conn.Close()
			}))
			defer srv.Close()
			c, waits := testClient(t, srv.URL)
			if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
				t.Fatalf("create: %v; want it sent again and answered", err)
			}
			if n := calls.Load(); n != 2 || len(*waits) != 1 {
				t.Errorf("%d attempts, waits %v; want 2 attempts, one wait", n, *waits)
			}
		})
	}
}

func TestAttemptsRunOut(t *testing.T) {
	t.Parallel()
	s := &script{answers: []func(http.ResponseWriter){status(503, nil, `{"error":"service_unavailable","message":"busy"}`)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, waits := testClient(t, srv.URL, func(o *Options) { o.MaxAttempts = 4 })
	_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
	var e *Error
	if !errors.As(err, &e) || !e.Exhausted || e.Attempts != 4 || e.StatusCode != 503 {
		t.Fatalf("err = %#v", err)
	}
	if want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}; !equal(*waits, want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
}

func TestCancellationAndDeadlineStopTheLoop(t *testing.T) {
	t.Parallel()
	s := &script{answers: []func(http.ResponseWriter){status(503, nil, ``)}}
	srv := httptest.NewServer(s)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	c, _ := testClient(t, srv.URL, func(o *Options) {
		o.MaxAttempts = 100
		o.sleep = func(ctx context.Context, d time.Duration) error { cancel(); return sleepCtx(ctx, d) }
	})
	_, err := c.Create(ctx, "key-0123456789abcdef", req)
	if !errors.Is(err, context.Canceled) || len(s.keys) != 1 {
		t.Errorf("cancelled: %v after %d requests", err, len(s.keys))
	}

	// A real deadline with real (short) waits.
	real, _ := New(srv.URL, func(o *Options) {
		o.MaxAttempts, o.BaseDelay, o.MaxDelay = 1000, 5*time.Millisecond, 10*time.Millisecond
	})
	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = real.Create(ctx, "key-0123456789abcdef", req)
	var e *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || !e.Exhausted {
		t.Errorf("deadline: %v", err)
	}
}

func TestNewKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		k := NewKey()
		if _, err := api.ParseIdempotencyKey(k); err != nil || len(k) != 36 || k[14] != '4' || seen[k] {
			t.Fatalf("NewKey() = %q (%v, dup %v)", k, err, seen[k])
		}
		seen[k] = true
	}
}
