package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// policy is pkg/api/testdata/retry-policy.json: the one retry policy of
// every onceupload client. The TypeScript client's tests read the same file.
type policy struct {
	Defaults struct {
		BaseDelayMs, MaxDelayMs, MaxRetryAfterMs, RetryBudgetMs int64
		MaxAttempts                                             int
	}
	Retryable []struct {
		Status int
		Code   string
		From   string // "S3": the code is in S3's XML error body
		Retry  bool
	}
	// Outcomes are answers that are neither success nor failure.
	Outcomes []struct {
		Request string // "PUT upload.url": a single PUT
		Status  int
		From    string
		Retry   bool
		Outcome string // "stored": the object is there; confirm with the status route
	}
	// Unauthorized are answers repeated once with a fresh token.
	Unauthorized []struct {
		Request      string
		Status       int
		RefreshToken bool
		Repeat       int
		WaitMs       int64
	}
	Backoff []struct {
		Retry  int
		Random float64
		WaitMs int64
	}
	RetryAfter []struct {
		Header string
		Now    string
		WaitMs *int64
	}
}

func loadPolicy(t *testing.T) policy {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "api", "testdata", "retry-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Retryable) == 0 || len(p.Outcomes) == 0 || len(p.Backoff) == 0 || len(p.RetryAfter) == 0 {
		t.Fatalf("the policy file has an empty table: %+v", p)
	}
	return p
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func TestDefaultsAreThePolicy(t *testing.T) {
	t.Parallel()
	p := loadPolicy(t)
	c, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	d := p.Defaults
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"BaseDelay", c.opts.BaseDelay, ms(d.BaseDelayMs)},
		{"MaxDelay", c.opts.MaxDelay, ms(d.MaxDelayMs)},
		{"MaxRetryAfter", c.opts.MaxRetryAfter, ms(d.MaxRetryAfterMs)},
		{"RetryBudget", c.opts.RetryBudget, ms(d.RetryBudgetMs)},
		{"MaxAttempts", c.opts.MaxAttempts, d.MaxAttempts},
		{"Backoff is FullJitter", fmt.Sprintf("%p", c.opts.Backoff), fmt.Sprintf("%p", Backoff(FullJitter))},
		{"CheckRetry is DefaultCheckRetry", fmt.Sprintf("%p", c.opts.CheckRetry), fmt.Sprintf("%p", CheckRetry(DefaultCheckRetry))},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestCheckRetryFollowsThePolicy(t *testing.T) {
	t.Parallel()
	for _, row := range loadPolicy(t).Retryable {
		name := fmt.Sprintf("%d %s", row.Status, row.Code)
		t.Run(name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			var err error
			if row.Status == 0 {
				// What net/http returns for a refused connection.
				err = &url.Error{Op: "Put", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}
			} else {
				resp = &http.Response{StatusCode: row.Status, Header: http.Header{}}
				body = errorBody(t, row.From, row.Code)
			}
			if got := DefaultCheckRetry(resp, body, err); got != row.Retry {
				t.Errorf("DefaultCheckRetry = %v, want %v", got, row.Retry)
			}
		})
	}
}

// errorBody is an error answer's body with code: the API's JSON, or S3's
// XML when from is "S3"; none without a code.
func errorBody(t *testing.T, from, code string) []byte {
	t.Helper()
	switch {
	case code == "":
		return nil
	case from == "S3":
		return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>x</Message><RequestId>r</RequestId></Error>`, code)
	case from == "":
		return fmt.Appendf(nil, `{"error":%q,"message":"x"}`, code)
	}
	t.Fatalf("a row from %q: the test knows the API's errors and S3's", from)
	return nil
}

// Each outcome row, acted out on the fake API and S3: a single PUT that
// sends If-None-Match: * (as its URL signs) is stored, but its answer is
// lost; the retry gets the row's status, which ends the PUT without an
// error, unretried; the status route still says pending twice (the server
// has not recorded the object yet), then completed, and Upload returns
// that. A PUT without If-None-Match answered so is an error, not retried.
func TestOutcomesFollowThePolicy(t *testing.T) {
	t.Parallel()
	for _, row := range loadPolicy(t).Outcomes {
		t.Run(fmt.Sprintf("%s %d", row.Request, row.Status), func(t *testing.T) {
			t.Parallel()
			if row.Request != "PUT upload.url" || row.Outcome != "stored" || row.From != "S3" {
				t.Fatalf("the test knows the outcome \"stored\" of S3's answer to a single PUT, not %+v", row)
			}
			resp := &http.Response{StatusCode: row.Status, Header: http.Header{}}
			if got := DefaultCheckRetry(resp, errorBody(t, row.From, "PreconditionFailed"), nil); got != row.Retry {
				t.Errorf("DefaultCheckRetry = %v, want %v", got, row.Retry)
			}

			f := newFakeAPI(t)
			f.loseWholeAnswer, f.lateRecord = 1, 2
			data := randomBytes(t, 1000)
			res, err := mpClient(t, f).UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), UploadInput{Filename: "a.bin", PartSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			answers, statuses := f.wholeAnswers, f.statuses
			f.mu.Unlock()
			if res.Upload.Status != api.StatusCompleted || !bytes.Equal(f.object(res.Key), data) {
				t.Fatalf("upload %+v; want completed with the bytes", res.Upload)
			}
			if len(answers) != 1 || answers[0] != row.Status || statuses != 3 {
				t.Errorf("PUTs answered %v (the first answer lost), %d status requests; want [%d] and 3 (pending, pending, completed)", answers, statuses, row.Status)
			}

			// Put on its own: the outcome, typed.
			again := newFakeAPI(t)
			c := mpClient(t, again)
			created, err := c.Create(context.Background(), NewKey(), api.CreateRequest{Filename: "a.bin", ContentType: "application/octet-stream", Size: int64(len(data)), SHA256: hexSum(data)})
			if err != nil {
				t.Fatal(err)
			}
			u := created.Upload
			for i, want := range []PutOutcome{PutStored, PutAlreadyStored} {
				if got, err := c.Put(context.Background(), &u, bytes.NewReader(data), int64(len(data)), PutOptions{}); got != want || err != nil {
					t.Errorf("PUT %d: %v, %v; want %v", i+1, got, err, want)
				}
			}
			// Only a PUT that sent If-None-Match reads the answer so.
			delete(u.Upload.Headers, "If-None-Match")
			noIf := roundTrip(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: row.Status, Header: http.Header{}, Request: r,
					Body: io.NopCloser(bytes.NewReader(errorBody(t, row.From, "PreconditionFailed")))}, nil
			})
			plain, _ := New(again.srv.URL, noWait, func(o *Options) { o.HTTPClient = &http.Client{Transport: noIf} })
			_, err = plain.Put(context.Background(), &u, bytes.NewReader(data), int64(len(data)), PutOptions{})
			var e *Error
			if !errors.As(err, &e) || e.StatusCode != row.Status || e.Attempts != 1 {
				t.Errorf("without If-None-Match: %v; want a %d error after one attempt", err, row.Status)
			}
		})
	}
}

func TestBackoffFollowsThePolicy(t *testing.T) {
	t.Parallel()
	p := loadPolicy(t)
	for _, row := range p.Backoff {
		got := FullJitter(row.Retry, ms(p.Defaults.BaseDelayMs), ms(p.Defaults.MaxDelayMs), row.Random)
		if want := ms(row.WaitMs); got != want {
			t.Errorf("FullJitter(retry %d, random %v) = %v, want %v", row.Retry, row.Random, got, want)
		}
	}
}

// The wait a Retry-After header makes, through the client's default cap.
func TestRetryAfterFollowsThePolicy(t *testing.T) {
	t.Parallel()
	for _, row := range loadPolicy(t).RetryAfter {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if row.Now != "" {
			var err error
			if now, err = time.Parse(time.RFC3339, row.Now); err != nil {
				t.Fatal(err)
			}
		}
		c, _ := New("http://127.0.0.1:1", func(o *Options) {
			o.now = func() time.Time { return now }
			o.random = func() float64 { return 0.5 } // backoff for retry 0: 125ms
		})
		resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {row.Header}}}
		got := c.retryWait(0, resp)
		want := DefaultBaseDelay / 2 // no usable header: the backoff
		if row.WaitMs != nil {
			want = ms(*row.WaitMs)
		}
		if got != want {
			t.Errorf("Retry-After %q: wait %v, want %v", row.Header, got, want)
		}
		if _, ok := retryAfter(row.Header, now); ok != (row.WaitMs != nil) {
			t.Errorf("Retry-After %q: usable = %v, want %v", row.Header, ok, row.WaitMs != nil)
		}
	}
}

// fakeClock is a clock that the sleeper advances.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }
func (f *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	f.t = f.t.Add(d)
	return ctx.Err()
}

// With no cap on attempts, the budget ends the retries: the last wait is
// the one that still ends within it, and the error says retries ran out.
func TestRetryBudgetEndsTheRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter string
		budget     time.Duration
		attempts   int
		waited     time.Duration
	}{
		// Full jitter at 0.5 with 250ms..20s: 125, 250, 500, 1s, 2s, 4s,
		// 8s, then 10s each. 5 minutes hold 7 waits (15.875s) and 28 of
		// 10s (280s): 295.875s; the next 10s would end past 300s.
		{"backoff", "", 5 * time.Minute, 36, 295875 * time.Millisecond},
		// Retry-After: 120 is capped at 60s: four waits fit in 5 minutes,
		// and a fifth would end exactly at the budget, which still fits.
		{"retry-after", "120", 5 * time.Minute, 6, 5 * time.Minute},
		{"small budget", "", time.Second, 4, 875 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			headers := map[string]string{}
			if tc.retryAfter != "" {
				headers["Retry-After"] = tc.retryAfter
			}
			s := &script{answers: []func(http.ResponseWriter){status(503, headers, `{"error":"service_unavailable","message":"busy"}`)}}
			srv := startScript(t, s)
			clock := &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
			start := clock.t
			c, err := New(srv, func(o *Options) {
				o.RetryBudget = tc.budget
				o.random = func() float64 { return 0.5 }
				o.now, o.sleep = clock.now, clock.sleep
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Create(context.Background(), "key-0123456789abcdef", req)
			var e *Error
			if !errors.As(err, &e) || !e.Exhausted || e.StatusCode != 503 || e.Attempts != tc.attempts {
				t.Fatalf("err = %#v, want exhausted after %d attempts", err, tc.attempts)
			}
			if waited := clock.t.Sub(start); waited != tc.waited || waited > tc.budget {
				t.Errorf("waited %v, want %v (budget %v)", waited, tc.waited, tc.budget)
			}
		})
	}
}

func startScript(t *testing.T, s *script) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The budget runs from the end of the first attempt: an attempt that took
// ten minutes (a large PUT) and then failed is still retried.
func TestRetryBudgetStartsWhenTheFirstAttemptEnds(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	calls := 0
	transport := roundTrip(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			clock.t = clock.t.Add(10 * time.Minute) // a long upload, then a reset
			return nil, &url.Error{Op: "Put", URL: r.URL.String(), Err: &net.OpError{Op: "write", Net: "tcp", Err: errors.New("connection reset by peer")}}
		}
		return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	c, _ := New("http://127.0.0.1:1", func(o *Options) {
		o.HTTPClient = &http.Client{Transport: transport}
		o.random = func() float64 { return 0.5 }
		o.now, o.sleep = clock.now, clock.sleep
	})
	_, _, err := c.do(context.Background(), toStorage, "put", func() (*http.Request, error) { return http.NewRequest(http.MethodPut, "http://127.0.0.1:1/x", nil) })
	if err != nil || calls != 2 {
		t.Fatalf("err %v after %d attempts; want success on the retry", err, calls)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Each "unauthorized" row: an API request answered so is repeated, at
// once, with a fresh token, as many times as the row says (once), whether
// API Gateway's authorizer or the API answered; a 401 to the repeat is
// final. Without a token source, and for S3's answers, there is no repeat.
func TestUnauthorizedFollowsThePolicy(t *testing.T) {
	t.Parallel()
	rows := loadPolicy(t).Unauthorized
	if len(rows) == 0 {
		t.Fatal("no unauthorized rows")
	}
	for _, row := range rows {
		if !row.RefreshToken || row.Repeat != 1 || row.WaitMs != 0 || row.Request != "any API request (not S3's presigned URLs)" {
			t.Fatalf("the test knows one repeat at once with a fresh token of any API request, not %+v", row)
		}
		for _, body := range []string{`{"message":"Unauthorized"}`, `{"error":"unauthenticated","message":"The token has expired."}`} {
			for _, still := range []bool{false, true} { // the fresh token is refused too
				var mu sync.Mutex
				var seen []string
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					seen = append(seen, r.Header.Get("Authorization"))
					mu.Unlock()
					if r.Header.Get("Authorization") != "Bearer fresh" || still {
						w.WriteHeader(row.Status)
						_, _ = io.WriteString(w, body)
						return
					}
					w.WriteHeader(201)
					_, _ = io.WriteString(w, created)
				}))
				var asked []bool
				c, waits := testClient(t, srv.URL, func(o *Options) {
					o.Token = func(ctx context.Context) (string, error) {
						asked = append(asked, FreshToken(ctx))
						if FreshToken(ctx) {
							return "fresh", nil
						}
						return "old", nil
					}
				})
				_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
				srv.Close()
				wantSeen := []string{"Bearer old", "Bearer fresh"}
				var e *Error
				switch {
				case still && (!errors.As(err, &e) || e.StatusCode != row.Status || e.Attempts != 1+row.Repeat):
					t.Errorf("%s, refused again: %v; want a final %d after %d attempts", body, err, row.Status, 1+row.Repeat)
				case !still && err != nil:
					t.Errorf("%s: %v; want the repeat to succeed", body, err)
				}
				if fmt.Sprint(seen) != fmt.Sprint(wantSeen) || fmt.Sprint(asked) != "[false true]" || len(*waits) != 0 {
					t.Errorf("%s (refused again %v): tokens sent %v, asked fresh %v, waits %v; want %v, [false true], no wait", body, still, seen, asked, *waits, wantSeen)
				}
			}
		}
		// The repeat is not one of MaxAttempts: with 1, a 401 still gets
		// its repeat; with 2, the repeat's 503 still gets its retry.
		for _, maxAttempts := range []int{1, 2} {
			var n int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n++
				switch {
				case n == 1:
					w.WriteHeader(row.Status)
					_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
				case n == 2 && maxAttempts == 2:
					w.WriteHeader(503)
					_, _ = io.WriteString(w, `{"error":"service_unavailable","message":"busy"}`)
				default:
					w.WriteHeader(201)
					_, _ = io.WriteString(w, created)
				}
			}))
			k := 0
			c, _ := testClient(t, srv.URL, func(o *Options) {
				o.MaxAttempts = maxAttempts
				o.Token = func(context.Context) (string, error) { k++; return fmt.Sprint("t", k), nil }
			})
			_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
			srv.Close()
			if err != nil || n != maxAttempts+1 {
				t.Errorf("MaxAttempts %d: %v after %d requests; want success after %d", maxAttempts, err, n, maxAttempts+1)
			}
		}
		// A token source that gives the same token again (a fixed one):
		// no repeat, the 401 is final at once.
		for _, token := range []func(context.Context) (string, error){nil, func(context.Context) (string, error) { return "fixed", nil }} {
			var n int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				n++
				w.WriteHeader(row.Status)
				_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
			}))
			c, _ := testClient(t, srv.URL, func(o *Options) { o.Token = token })
			_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
			srv.Close()
			var e *Error
			if n != 1 || !errors.As(err, &e) || e.StatusCode != row.Status || !e.Gateway || e.Attempts != 1 {
				t.Errorf("token %v: %d requests, %v; want 1 and a final %d", token != nil, n, err, row.Status)
			}
		}
		// No token source: nothing to refresh, the 401 is final at once.
		var n int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n++
			w.WriteHeader(row.Status)
			_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
		}))
		c, _ := testClient(t, srv.URL)
		_, err := c.Create(context.Background(), "key-0123456789abcdef", req)
		srv.Close()
		if n != 1 || err == nil {
			t.Errorf("without a token: %d requests, %v; want 1 and an error", n, err)
		}
		// S3's 401 to a PUT is S3's: no token to refresh there.
		n = 0
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			n++
			w.WriteHeader(row.Status)
		}))
		c, _ = testClient(t, "http://api.invalid", func(o *Options) { o.Token = func(context.Context) (string, error) { return "t", nil } })
		_, _, err = c.do(context.Background(), toStorage, "put", func() (*http.Request, error) { return http.NewRequest(http.MethodPut, srv.URL, nil) })
		srv.Close()
		if n != 1 || err == nil {
			t.Errorf("S3 PUT: %d requests, %v; want 1 and an error", n, err)
		}
	}
}
