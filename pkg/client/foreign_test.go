package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An answer that is not the API's (a wrong path, S3, a web server) is
// ErrNotOnceupload, saying what answered; API Gateway's own answers and the
// API's error bodies are not.
func TestForeignAnswers(t *testing.T) {
	t.Parallel()
	const s3412 = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`
	for _, tc := range []struct {
		name     string
		answer   func(http.ResponseWriter)
		foreign  bool
		gateway  bool
		message  string
		attempts int
		inAnswer []string
	}{
		{"nginx 404", status(404, map[string]string{"Server": "nginx/1.27", "Content-Type": "text/html"}, "<html><head><title>404 Not Found</title></head></html>"), true, false, "", 1, []string{"404 Not Found", "nginx/1.27", "<html>"}},
		{"S3 412", status(412, map[string]string{"Server": "AmazonS3", "Content-Type": "application/xml"}, s3412), true, false, "", 1, []string{"412", "AmazonS3", "PreconditionFailed"}},
		{"plain 404", status(404, nil, "404 page not found\n"), true, false, "", 1, []string{"404", "404 page not found"}},
		{"HTTP API unknown route", status(404, map[string]string{"Content-Type": "application/json"}, `{"message":"Not Found"}`), true, false, "", 1, []string{`Not Found`}},
		{"200 web page", status(200, map[string]string{"Content-Type": "text/html"}, "<!doctype html><p>welcome</p>"), true, false, "", 1, []string{"200", "welcome"}},
		{"JSON without a code", status(400, nil, `{"error":"Bad Request"}`), true, false, "", 1, nil},
		{"authorizer 401", status(401, map[string]string{"Content-Type": "application/json"}, `{"message":"Unauthorized"}`), false, true, "Unauthorized", 1, nil},
		{"gateway 429", status(429, nil, `{"message":"Too Many Requests"}`), false, true, "Too Many Requests", 4, nil},
		{"gateway 503", status(503, nil, `{"message":"Service Unavailable"}`), false, true, "Service Unavailable", 4, nil},
		{"gateway 504", status(504, nil, `{"message": "Endpoint request timed out"}`), false, true, "Endpoint request timed out", 4, nil},
		{"API 401", status(401, nil, `{"error":"unauthenticated","message":"no principal"}`), false, false, "no principal", 1, nil},
		{"API 404", status(404, nil, `{"error":"not_found","message":"no such upload"}`), false, false, "no such upload", 1, nil},
		{"newer API code", status(409, nil, `{"error":"some_new_conflict","message":"x"}`), false, false, "x", 1, nil},
	} {
		s := &script{answers: []func(http.ResponseWriter){tc.answer}}
		srv := httptest.NewServer(s)
		c, _ := testClient(t, srv.URL, func(o *Options) { o.MaxAttempts = 4 })
		_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
		srv.Close()
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
		if errors.Is(err, ErrNotOnceupload) != tc.foreign || e.NotOnceupload != tc.foreign || e.Gateway != tc.gateway || e.Attempts != tc.attempts {
			t.Errorf("%s: err = %v (%#v); want foreign %v, gateway %v, %d attempts", tc.name, err, e, tc.foreign, tc.gateway, tc.attempts)
		}
		if !tc.foreign && e.Message != tc.message {
			t.Errorf("%s: message %q, want %q", tc.name, e.Message, tc.message)
		}
		for _, want := range tc.inAnswer {
			if !strings.Contains(e.Answer, want) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: answer %q / error %q lacks %q", tc.name, e.Answer, err, want)
			}
		}
		if tc.foreign && (!strings.Contains(err.Error(), "not a onceupload API") || strings.Contains(e.Answer, "\n")) {
			t.Errorf("%s: error %q; want one line saying it is not a onceupload API", tc.name, err)
		}
	}
}

// The first bytes of a long body, on one line and cut at a rune boundary.
func TestFirstBytes(t *testing.T) {
	t.Parallel()
	if got := firstBytes([]byte("a\n\n  b"), 80); got != "a b" {
		t.Errorf("got %q", got)
	}
	got := firstBytes([]byte(strings.Repeat("é", 100)), 81)
	if got != strings.Repeat("é", 40)+"…" {
		t.Errorf("got %q", got)
	}
}

// S3's answers to a PUT are S3's: never taken for a foreign API.
func TestS3AnswersAreNotForeign(t *testing.T) {
	t.Parallel()
	e := &Error{}
	c, _ := testClient(t, "http://127.0.0.1:1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(403)
		_, _ = w.Write([]byte(`<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
	}))
	defer srv.Close()
	_, _, err := c.do(context.Background(), toStorage, "put", func() (*http.Request, error) { return http.NewRequest(http.MethodPut, srv.URL, nil) })
	if !errors.As(err, &e) || e.NotOnceupload || e.Code != "AccessDenied" {
		t.Errorf("err = %#v", err)
	}
}

// foreignPages are answers of something between the client and the API:
// a captive portal's 511, its redirect to a 200 page, a proxy's 403 and
// 407 pages.
var foreignPages = []func(http.ResponseWriter){
	status(511, map[string]string{"Content-Type": "text/html"}, "<html><body>Sign in to the Wi-Fi</body></html>"),
	status(302, map[string]string{"Location": "/portal"}, ""),
	status(200, map[string]string{"Content-Type": "text/html"}, "<html><body>Welcome to the hotel Wi-Fi</body></html>"),
	status(403, map[string]string{"Content-Type": "text/html", "Server": "squid"}, "<html><body>Access denied</body></html>"),
	status(407, map[string]string{"Content-Type": "text/html", "Proxy-Authenticate": "Basic"}, "<html><body>Proxy authentication required</body></html>"),
}

// Once the API has answered the client, a foreign answer is no answer (a
// captive portal, a proxy, for a while): it is retried, never taken for a
// wrong base URL, and the API's answer after it is the request's.
func TestForeignAnswersAfterTheAPIAnsweredAreRetried(t *testing.T) {
	t.Parallel()
	pending := `{"uploadId":"u1","status":"pending","storageKey":"uploads/u1","filename":"a.txt","contentType":"text/plain","bytes":1,"sha256":"` + strings.Repeat("a", 64) + `"}`
	answers := append([]func(http.ResponseWriter){status(201, nil, created)}, foreignPages...)
	s := &script{answers: append(answers, status(200, nil, pending))}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, waits := testClient(t, srv.URL, func(o *Options) { o.MaxAttempts = 10 })
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
		t.Fatal(err)
	}
	u, err := c.Status(context.Background(), "u1")
	if err != nil {
		t.Fatalf("status through a captive portal and a proxy: %v; want the API's answer after them", err)
	}
	if u.UploadID != "u1" || len(*waits) != 4 {
		t.Errorf("upload %q after %d retries; want u1 after 4 (511, 302→200, 403, 407)", u.UploadID, len(*waits))
	}
}

// Foreign answers after the API answered, until the attempts run out:
// given up retrying (Exhausted), not "not a onceupload API".
func TestForeignAnswersAfterTheAPIAnsweredExhaust(t *testing.T) {
	t.Parallel()
	for i, page := range foreignPages {
		if i == 1 {
			continue // the 302 alone, again and again, is a redirect loop: its 200 page is foreignPages[2]
		}
		s := &script{answers: []func(http.ResponseWriter){status(201, nil, created), page}}
		srv := httptest.NewServer(s)
		c, _ := testClient(t, srv.URL, func(o *Options) { o.MaxAttempts = 3 })
		if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
			t.Fatal(err)
		}
		_, err := c.Create(context.Background(), "key-0123456789abcdeg", req)
		srv.Close()
		var e *Error
		if !errors.As(err, &e) || !e.NotOnceupload || !e.Exhausted || e.Attempts != 3 || strings.Contains(err.Error(), "not a onceupload API") {
			t.Errorf("err = %v (%#v); want the foreign answers retried until the 3 attempts ran out, not taken for a wrong base URL", err, e)
		}
	}
}
