package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// noWait retries at once, so a test's time is its timeouts'.
func noWait(o *Options) {
	o.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
}

// A server that accepts connections and never answers: each attempt times
// out waiting for the answer, and the timeout is retried, as a network
// that silently drops packets must be.
func TestAnswerTimeoutsAreRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var held sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			held.Add(1)
			go func() { defer held.Done(); <-done; conn.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); close(done); held.Wait() })

	tr := newTransport(time.Minute)
	tr.ResponseHeaderTimeout = 100 * time.Millisecond
	c, err := New("http://"+ln.Addr().String(), func(o *Options) {
		o.HTTPClient, o.MaxAttempts = &http.Client{Transport: tr}, 3
		noWait(o)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background(), "u-1")
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || !e.Exhausted || e.StatusCode != 0 {
		t.Fatalf("err = %#v, want 3 attempts that all timed out", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the timeout (context.DeadlineExceeded) kept", err)
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections, want one per attempt (3)", n)
	}
}

// The caller's own deadline ends the request for good: it is never retried.
func TestCallersDeadlineIsNotRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(srv.Close)
	var attempts atomic.Int32
	c, err := New(srv.URL, func(o *Options) {
		o.CheckRetry = func(resp *http.Response, body []byte, err error) bool {
			attempts.Add(1)
			return DefaultCheckRetry(resp, body, err)
		}
		noWait(o)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Status(ctx, "u-1")
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %#v, want one attempt ended by the caller's deadline", err)
	}
	if n := attempts.Load(); n != 0 {
		t.Errorf("the retry policy was asked %d times about the caller's own deadline", n)
	}
}

// A PUT whose server stops reading the body half-way: the stalled write
// times out, and the retry sends the whole body again.
func TestStalledPutIsRetried(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 16<<20) // far more than the socket buffers hold
	var attempts atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			_, _ = io.CopyN(io.Discard, r.Body, 64<<10)
			select { // stop reading: the client's writes stall
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		got := make([]byte, len(body)+1) // one buffer: no copies as it grows
		n, _ := io.ReadFull(r.Body, got)
		if !bytes.Equal(got[:n], body) {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })

	// The stall limit is what the first attempt costs; a busy machine
	// (two cores, -race) must not stall the healthy retry for as long.
	c, err := New(srv.URL, func(o *Options) {
		o.HTTPClient, o.MaxAttempts = &http.Client{Transport: newTransport(time.Second)}, 3
		noWait(o)
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &api.Upload{Upload: &api.PutInstructions{Method: http.MethodPut, URL: srv.URL + "/bucket/key"}}
	if _, err := c.Put(context.Background(), u, bytes.NewReader(body), int64(len(body)), PutOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d attempts, want the stalled one and one retry (2)", n)
	}
}
