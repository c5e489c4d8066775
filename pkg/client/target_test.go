package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Where a request goes, not what its operation is called, decides whether
// it carries the API's token: an API operation named like a PUT gets it,
// and a request to a presigned URL never does, whatever its name.
func TestTheTargetDecidesTheToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		to       target
		op       string
		wantAuth string
	}{
		{toAPI, "create", "Bearer t"},
		{toAPI, "put metadata", "Bearer t"},
		{toStorage, "put part 1", ""},
		{toStorage, "create", ""},
		{toStorage, "status", ""},
	} {
		var got []string // RoundTrip runs in Do's goroutine: no lock
		c, _ := testClient(t, "http://127.0.0.1:1", func(o *Options) {
			o.Token = func(context.Context) (string, error) { return "t", nil }
			o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				got = append(got, r.Header.Get("Authorization"))
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
			})}
		})
		_, _, err := c.do(context.Background(), tc.to, tc.op, func() (*http.Request, error) {
			return http.NewRequest(http.MethodPut, "http://127.0.0.1:1/x", nil)
		})
		if err != nil || len(got) != 1 || got[0] != tc.wantAuth {
			t.Errorf("to %s, %q: Authorization %q, err %v; want one request with %q", tc.to.who(), tc.op, got, err, tc.wantAuth)
		}
	}
}

// S3's answers are S3's whatever the operation is called: a 401 is not
// the API refusing its token (no fresh one is asked for, nothing is
// repeated), an XML error is not a foreign API, a retry line names S3,
// and a success is not the API answering, which would let the faults that
// waiting cannot fix be retried.
func TestStorageAnswersAreNeverTheAPIs(t *testing.T) {
	t.Parallel()
	var n, status atomic.Int32
	status.Store(http.StatusUnauthorized)
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		code := int(status.Load())
		w.WriteHeader(code)
		if code >= 300 {
			_, _ = w.Write([]byte(`<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		}
	}))
	t.Cleanup(s3.Close)
	put := func() (*http.Request, error) { return http.NewRequest(http.MethodPut, s3.URL+"/b/u1", nil) }

	c, count, reasons := faultClient(t, "http://"+closedPort(t), nil, "")
	c.opts.Token = func(context.Context) (string, error) { return "t", nil }
	_, _, err := c.do(context.Background(), toStorage, "status", put)
	var e *Error
	if !errors.As(err, &e) || n.Load() != 1 || e.NotOnceupload || e.Code != "AccessDenied" || !e.Storage {
		t.Errorf("S3's 401: %d requests, err %#v; want one, with S3's code AccessDenied, not foreign, Storage set", n.Load(), err)
	}

	status.Store(http.StatusServiceUnavailable)
	before := len(reasons())
	_, _, _ = c.do(context.Background(), toStorage, "create", put)
	if got := reasons()[before:]; len(got) == 0 || got[0] != "S3 answered 503 AccessDenied" {
		t.Errorf("S3's 503: retried for %q; want %q", got, "S3 answered 503 AccessDenied")
	}

	status.Store(http.StatusOK)
	if _, _, err := c.do(context.Background(), toStorage, "create", put); err != nil {
		t.Fatal(err)
	}
	count.n.Store(0)
	_, _, err = c.do(context.Background(), toAPI, "status", func() (*http.Request, error) {
		return http.NewRequest(http.MethodGet, c.base.String()+"/uploads/u1", nil)
	})
	if !errors.Is(err, ErrConnectionRefused) || count.n.Load() != 1 {
		t.Errorf("refused after S3's 200: %v after %d attempts; want ErrConnectionRefused after one (the API has not answered)", err, count.n.Load())
	}
}

// An *Error says where its request went, so that a caller (the CLI's
// advice) never guesses it from the operation's name.
func TestErrorSaysWhereItWent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		to   target
		op   string
		want bool
	}{{toAPI, "put metadata", false}, {toStorage, "status", true}} {
		c, _ := testClient(t, "http://127.0.0.1:1", func(o *Options) {
			o.MaxAttempts = 1
			o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"error":"invalid_request","message":"no"}`)), Request: r}, nil
			})}
		})
		_, _, err := c.do(context.Background(), tc.to, tc.op, func() (*http.Request, error) {
			return http.NewRequest(http.MethodPut, "http://127.0.0.1:1/x", nil)
		})
		var e *Error
		if !errors.As(err, &e) || e.Storage != tc.want {
			t.Errorf("to %s, %q: err %#v; want an *Error with Storage %v", tc.to.who(), tc.op, err, tc.want)
		}
	}
}
