package client

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

type retryCall struct {
	op      string
	attempt int
	wait    time.Duration
	reason  string
}

// OnRetry hears of every retry before its wait: the request, the attempt,
// the wait and why, in words.
func TestOnRetry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1: // no answer
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		case 2:
			status(503, nil, `{"error":"service_unavailable","message":"busy"}`)(w)
		case 3:
			status(504, nil, `{"message":"Endpoint request timed out"}`)(w)
		case 4:
			status(502, map[string]string{"Retry-After": "1"}, `<html>bad gateway</html>`)(w)
		default:
			status(201, nil, created)(w)
		}
	}))
	defer srv.Close()
	var got []retryCall
	c, waits := testClient(t, srv.URL, func(o *Options) {
		o.OnRetry = func(op string, attempt int, wait time.Duration, reason string) {
			got = append(got, retryCall{op, attempt, wait, reason})
		}
	})
	if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
		t.Fatal(err)
	}
	want := []retryCall{
		{"create", 1, 50 * time.Millisecond, "no answer from the API (connection closed)"},
		{"create", 2, 100 * time.Millisecond, "the API answered 503 service_unavailable"},
		{"create", 3, 200 * time.Millisecond, "API Gateway answered 504 Gateway Timeout"},
		{"create", 4, time.Second, "no answer from the API (something else answered 502 Bad Gateway)"},
	}
	if !slices.Equal(got, want) || len(*waits) != 4 {
		t.Errorf("OnRetry calls %+v, want %+v (waits %v)", got, want, *waits)
	}
	// S3's answers are S3's.
	if r := retryReason(toStorage, &Error{StatusCode: 503, Code: "SlowDown"}); r != "S3 answered 503 SlowDown" {
		t.Errorf("reason %q", r)
	}
	if r := retryReason(toStorage, &Error{Err: errors.New("reset")}); r != "no answer from S3 (reset)" {
		t.Errorf("reason %q", r)
	}
}

// A resumed upload in parts says so before sending (how many parts and
// bytes S3 holds), progress starts from the bytes held, and the client
// says when it completes; one PUT says so too.
func TestOnResumeAndOnCompleting(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c := mpClient(t, f)
	data := randomBytes(t, 10*testPart+5) // 11 parts
	var events []string
	var firstSent int64 = -1
	in := UploadInput{Key: NewKey(), Filename: "resumed.bin", PartSize: testPart, Parallel: 1,
		OnResume: func(held, parts int, heldBytes, total int64) {
			events = append(events, "resume")
			if held != 3 || parts != 11 || heldBytes != 3*testPart || total != int64(len(data)) {
				t.Errorf("OnResume(%d, %d, %d, %d); want 3 of 11 parts, %d of %d bytes", held, parts, heldBytes, total, 3*testPart, len(data))
			}
		},
		Progress: func(sent, total int64) {
			if firstSent < 0 {
				firstSent = sent
			}
		},
		OnCompleting: func() { events = append(events, "completing") },
	}
	f.refuse[4] = 400
	if _, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in); err == nil {
		t.Fatal("first run: no error")
	}
	if len(events) != 0 {
		t.Errorf("first run: events %v; want none", events)
	}
	f.mu.Lock()
	delete(f.refuse, 4)
	f.mu.Unlock()
	firstSent = -1
	if _, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(events, []string{"resume", "completing"}) || firstSent != 3*testPart {
		t.Errorf("events %v, first progress %d; want resume then completing, progress from %d", events, firstSent, 3*testPart)
	}

	events = nil
	small := randomBytes(t, 100)
	one := UploadInput{Filename: "one.bin", PartSize: -1, OnCompleting: in.OnCompleting,
		OnResume: func(int, int, int64, int64) { t.Error("OnResume on a new upload") }}
	if _, err := c.UploadReader(context.Background(), bytes.NewReader(small), int64(len(small)), one); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(events, []string{"completing"}) {
		t.Errorf("one PUT: events %v; want completing", events)
	}
}
