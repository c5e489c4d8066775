package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// order is an HTTP-style event: the key in a header, the payload a JSON
// body, and a field that differs on every delivery.
type order struct {
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	RequestID string            `json:"requestId"`
}

type receipt struct {
	OrderID string `json:"orderId"`
	Run     int64  `json:"run"` // which run of the handler produced it
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newOrder(key, body string) order {
	return order{Headers: map[string]string{"Idempotency-Key": key}, Body: body, RequestID: time.Now().String()}
}

// harness is a wrapped handler whose runs and store calls are counted;
// next decides what the n-th run does.
type harness struct {
	store   *memorystore.Store
	counted *countingStore // store, as the wrapper calls it
	clock   *clock
	runs    atomic.Int64
	next    func(ctx context.Context, n int64) (receipt, error)
	fn      func(context.Context, order) (receipt, error)
	opts    []func(*idempotency.HandlerOptions[order, receipt])
	call    func(context.Context, order) (receipt, error)
}

func newHarness(t *testing.T, optFns ...func(*idempotency.HandlerOptions[order, receipt])) *harness {
	t.Helper()
	h := &harness{clock: newClock()}
	h.store = memorystore.New(func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = testTTL, testLease, h.clock.Now })
	h.counted = &countingStore{Store: h.store}
	h.fn = func(ctx context.Context, o order) (receipt, error) {
		n := h.runs.Add(1)
		if h.next != nil {
			return h.next(ctx, n)
		}
		return receipt{OrderID: "o-1", Run: n}, nil
	}
	h.opts = append([]func(*idempotency.HandlerOptions[order, receipt]){func(o *idempotency.HandlerOptions[order, receipt]) {
		o.KeyPath, o.FingerprintPaths, o.Scope, o.Logger, o.Now = "headers.idempotency-key", []string{"body"}, "payments", quiet, h.clock.Now
	}}, optFns...)
	h.call = idempotency.MakeIdempotent(h.counted, h.fn, h.opts...)
	return h
}

func (h *harness) mustCall(t *testing.T, o order) receipt {
	t.Helper()
	r, err := h.call(context.Background(), o)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	return r
}

func TestMakeIdempotent(t *testing.T) {
	ctx := context.Background()
	body := `{"orderId":"o-1","amount":1000}`
	cases := map[string]func(t *testing.T){
		"a retry is answered from the record": func(t *testing.T) {
			h := newHarness(t)
			first := h.mustCall(t, newOrder("k-1", body))
			again := h.mustCall(t, newOrder("k-1", body))
			if first != (receipt{"o-1", 1}) || again != first || h.runs.Load() != 1 {
				t.Fatalf("first %+v, retry %+v after %d runs; want run 1 twice", first, again, h.runs.Load())
			}
		},
		"whitespace, member order and the header's case do not count": func(t *testing.T) {
			h := newHarness(t)
			h.mustCall(t, newOrder("k-1", body))
			retry := order{Headers: map[string]string{"IDEMPOTENCY-KEY": "k-1"}, Body: "{ \"amount\": 1000,\n \"orderId\": \"o-1\" }"}
			if got := h.mustCall(t, retry); got.Run != 1 || h.runs.Load() != 1 {
				t.Fatalf("retry = %+v after %d runs, want a replay of run 1", got, h.runs.Load())
			}
		},
		"another body under the same key is refused": func(t *testing.T) {
			h := newHarness(t)
			h.mustCall(t, newOrder("k-1", body))
			_, err := h.call(ctx, newOrder("k-1", `{"orderId":"o-1","amount":2000}`))
			var conflict *idempotency.ConflictError
			if !errors.Is(err, idempotency.ErrKeyReused) || !errors.As(err, &conflict) || h.runs.Load() != 1 {
				t.Fatalf("err = %v after %d runs, want ErrKeyReused and 1 run", err, h.runs.Load())
			}
		},
		"a string holding JSON in a body is not that JSON": func(t *testing.T) {
			h := newHarness(t)
			h.mustCall(t, newOrder("k-1", `{"orderId":"o-1","items":"[1]"}`))
			_, err := h.call(ctx, newOrder("k-1", `{"orderId":"o-1","items":[1]}`))
			if !errors.Is(err, idempotency.ErrKeyReused) || h.runs.Load() != 1 {
				t.Fatalf("err = %v after %d runs, want ErrKeyReused and 1 run", err, h.runs.Load())
			}
			if got := h.mustCall(t, newOrder("k-1", `{ "items": "[1]", "orderId": "o-1" }`)); got.Run != 1 {
				t.Fatalf("the first body respelled = %+v, want a replay of run 1", got)
			}
		},
		"a concurrent request is in progress for the invocation's remaining time": func(t *testing.T) {
			h := newHarness(t)
			entered, finish := make(chan struct{}), make(chan struct{})
			h.next = func(ctx context.Context, n int64) (receipt, error) {
				close(entered)
				<-finish
				return receipt{OrderID: "o-1", Run: n}, nil
			}
			dctx, cancel := context.WithDeadline(ctx, h.clock.Now().Add(7*time.Second))
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := h.call(dctx, newOrder("k-1", body)); done <- err }()
			<-entered
			h.clock.Advance(2 * time.Second)
			_, err := h.call(ctx, newOrder("k-1", body))
			var ip *idempotency.InProgressError
			if !errors.As(err, &ip) || !errors.Is(err, idempotency.ErrInProgress) || ip.RetryAfter != 5*time.Second {
				t.Fatalf("err = %v, want InProgressError retry after 5s (7s lease, 2s later)", err)
			}
			close(finish)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 1 {
				t.Fatalf("after the first finished: %+v, want a replay of run 1", got)
			}
		},
		"without a deadline the lease is the store's": func(t *testing.T) {
			h := newHarness(t)
			entered, finish := make(chan struct{}), make(chan struct{})
			h.next = func(context.Context, int64) (receipt, error) { close(entered); <-finish; return receipt{}, nil }
			done := make(chan error, 1)
			go func() { _, err := h.call(ctx, newOrder("k-1", body)); done <- err }()
			<-entered
			_, err := h.call(ctx, newOrder("k-1", body))
			var ip *idempotency.InProgressError
			if !errors.As(err, &ip) || ip.RetryAfter != testLease {
				t.Fatalf("err = %v, want retry after the store's lease %v", err, testLease)
			}
			close(finish)
			<-done
		},
		"a failing handler releases the key, and leaves nothing in a local cache": func(t *testing.T) {
			for _, opts := range [][]func(*idempotency.HandlerOptions[order, receipt]){nil, {cached(0)}} {
				h := newHarness(t, opts...)
				boom := errors.New("card declined")
				h.next = func(_ context.Context, n int64) (receipt, error) {
					if n == 1 {
						return receipt{}, boom
					}
					return receipt{OrderID: "o-1", Run: n}, nil
				}
				if _, err := h.call(ctx, newOrder("k-1", body)); !errors.Is(err, boom) {
					t.Fatalf("err = %v, want the handler's", err)
				}
				if h.store.Len() != 0 {
					t.Fatalf("%d records after a failure, want 0", h.store.Len())
				}
				h.wantCalls(t, "failure", map[string]int{"Claim": 1, "Release": 1})
				if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 2 {
					t.Fatalf("retry = %+v, want run 2", got)
				}
				h.wantCalls(t, "retry", fresh)
			}
		},
		"a panicking handler releases the key and panics on": func(t *testing.T) {
			h := newHarness(t)
			h.next = func(_ context.Context, n int64) (receipt, error) {
				if n == 1 {
					panic("bug")
				}
				return receipt{Run: n}, nil
			}
			func() {
				defer func() {
					if r := recover(); r != "bug" {
						t.Errorf("recovered %v, want the handler's panic", r)
					}
				}()
				_, _ = h.call(ctx, newOrder("k-1", body))
			}()
			if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 2 {
				t.Fatalf("retry = %+v, want run 2", got)
			}
		},
		"an expired record is absent": func(t *testing.T) {
			h := newHarness(t)
			h.mustCall(t, newOrder("k-1", body))
			h.clock.Advance(testTTL + time.Second)
			if got := h.mustCall(t, newOrder("k-1", `{"different":true}`)); got.Run != 2 {
				t.Fatalf("after expiry = %+v, want run 2", got)
			}
		},
		"a request without a key is refused": func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.call(ctx, order{Body: body}); !errors.Is(err, idempotency.ErrMissingKey) || h.runs.Load() != 0 {
				t.Fatalf("err = %v after %d runs, want ErrMissingKey and no run", err, h.runs.Load())
			}
			if _, err := h.call(ctx, newOrder("", body)); !errors.Is(err, idempotency.ErrMissingKey) {
				t.Fatalf("empty key: %v, want ErrMissingKey", err)
			}
		},
		"OptionalKey runs a request without a key, unrecorded": func(t *testing.T) {
			h := newHarness(t, func(o *idempotency.HandlerOptions[order, receipt]) { o.OptionalKey = true })
			h.mustCall(t, order{Body: body})
			h.mustCall(t, order{Body: body})
			if h.runs.Load() != 2 || h.store.Len() != 0 {
				t.Fatalf("%d runs, %d records; want 2 and 0", h.runs.Load(), h.store.Len())
			}
		},
		"Key and Fingerprint functions replace the paths": func(t *testing.T) {
			h := newHarness(t, func(o *idempotency.HandlerOptions[order, receipt]) {
				o.Key = func(_ context.Context, req order) (string, error) { return req.Headers["X-Order"], nil }
				o.Fingerprint = func(_ context.Context, req order) (string, error) { return req.Headers["X-Amount"], nil }
			})
			req := func(amount string) order {
				return order{Headers: map[string]string{"X-Order": "o-9", "X-Amount": amount}, Body: amount}
			}
			h.mustCall(t, req("10"))
			h.mustCall(t, req("10"))
			if _, err := h.call(ctx, req("11")); !errors.Is(err, idempotency.ErrKeyReused) || h.runs.Load() != 1 {
				t.Fatalf("err = %v after %d runs, want ErrKeyReused after 1", err, h.runs.Load())
			}
		},
		"scopes keep the same key apart": func(t *testing.T) {
			h := newHarness(t)
			other := idempotency.MakeIdempotent(h.store, func(context.Context, order) (receipt, error) { return receipt{Run: 99}, nil },
				func(o *idempotency.HandlerOptions[order, receipt]) {
					o.KeyPath, o.FingerprintPaths, o.Scope, o.Logger = "headers.idempotency-key", []string{"body"}, "refunds", quiet
				})
			h.mustCall(t, newOrder("k-1", body))
			if got, err := other(ctx, newOrder("k-1", body)); err != nil || got.Run != 99 {
				t.Fatalf("other scope = %+v, %v; want its own run", got, err)
			}
		},
		"OnReplay sees a replayed response": func(t *testing.T) {
			h := newHarness(t, func(o *idempotency.HandlerOptions[order, receipt]) {
				o.OnReplay = func(_ context.Context, r receipt, rec idempotency.Record) receipt {
					r.OrderID += " (replayed)"
					return r
				}
			})
			first := h.mustCall(t, newOrder("k-1", body))
			again := h.mustCall(t, newOrder("k-1", body))
			if first.OrderID != "o-1" || again.OrderID != "o-1 (replayed)" {
				t.Fatalf("first %q, replay %q", first.OrderID, again.OrderID)
			}
		},
	}
	for name, tc := range cases {
		t.Run(name, tc)
	}
}

// failingStore fails Claim, Complete or Release on top of a memorystore.Store.
type failingStore struct {
	*memorystore.Store
	claim, complete, release error
}

func (f failingStore) Claim(ctx context.Context, rec idempotency.Record) (idempotency.ClaimResult, error) {
	if f.claim != nil {
		return idempotency.ClaimResult{}, f.claim
	}
	return f.Store.Claim(ctx, rec)
}

func (f failingStore) Complete(ctx context.Context, id idempotency.ID, claim string, resp idempotency.Response) (idempotency.Record, error) {
	if f.complete != nil {
		return idempotency.Record{}, f.complete
	}
	return f.Store.Complete(ctx, id, claim, resp)
}

func (f failingStore) Release(ctx context.Context, id idempotency.ID, claim string) error {
	if f.release != nil {
		return f.release
	}
	return f.Store.Release(ctx, id, claim)
}

// flakyCompleteStore counts Complete's attempts on top of a memorystore.Store.
// The first failures attempts fail with err (default: ErrUnavailable)
// without writing; then the next lostAnswers attempts write, but their
// answer is lost: the caller gets ErrUnavailable.
type flakyCompleteStore struct {
	*memorystore.Store
	failures, lostAnswers int64
	err                   error
	attempts              atomic.Int64
}

func (f *flakyCompleteStore) Complete(ctx context.Context, id idempotency.ID, claim string, resp idempotency.Response) (idempotency.Record, error) {
	n := f.attempts.Add(1)
	switch {
	case n <= f.failures && f.err != nil:
		return idempotency.Record{}, f.err
	case n <= f.failures:
		return idempotency.Record{}, fmt.Errorf("complete %s: %w: throttled", id, idempotency.ErrUnavailable)
	case n <= f.failures+f.lostAnswers:
		if _, err := f.Store.Complete(ctx, id, claim, resp); err != nil {
			return idempotency.Record{}, err
		}
		return idempotency.Record{}, fmt.Errorf("complete %s: %w: connection reset", id, idempotency.ErrUnavailable)
	}
	return f.Store.Complete(ctx, id, claim, resp)
}

func TestMakeIdempotentStoreFailures(t *testing.T) {
	ctx := context.Background()
	unavailable := errors.New("throttled")
	opts := func(o *idempotency.HandlerOptions[order, receipt]) {
		o.KeyPath, o.FingerprintPaths, o.Logger = "headers.idempotency-key", []string{"body"}, quiet
	}
	t.Run("a response that cannot be recorded is returned with the error", func(t *testing.T) {
		store := failingStore{Store: memorystore.New(), complete: unavailable}
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { return receipt{OrderID: "o-1"}, nil }, opts)
		got, err := call(ctx, newOrder("k-1", "{}"))
		if !errors.Is(err, unavailable) || got.OrderID != "o-1" {
			t.Fatalf("got %+v, %v; want the response and the store's error", got, err)
		}
	})
	t.Run("a store unavailable to record is asked again until it records", func(t *testing.T) {
		store := &flakyCompleteStore{Store: memorystore.New(), failures: 3}
		var runs atomic.Int64
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) {
			return receipt{OrderID: "o-1", Run: runs.Add(1)}, nil
		}, opts)
		if _, err := call(ctx, newOrder("k-1", "{}")); err != nil {
			t.Fatalf("err = %v, want the response recorded on the fourth attempt", err)
		}
		if got := store.attempts.Load(); got != 4 {
			t.Errorf("%d attempts to record, want 4 (three unavailable, then recorded)", got)
		}
		if got, err := call(ctx, newOrder("k-1", "{}")); err != nil || got.Run != 1 {
			t.Fatalf("retry: %+v, %v; want run 1's recorded response", got, err)
		}
	})
	t.Run("a write whose answer was lost is recorded, not a duplicate", func(t *testing.T) {
		store := &flakyCompleteStore{Store: memorystore.New(), lostAnswers: 1}
		var runs atomic.Int64
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) {
			return receipt{OrderID: "o-1", Run: runs.Add(1)}, nil
		}, opts)
		if got, err := call(ctx, newOrder("k-1", "{}")); err != nil || got.Run != 1 {
			t.Fatalf("got %+v, %v; want run 1's response and no error", got, err)
		}
		if got, err := call(ctx, newOrder("k-1", "{}")); err != nil || got.Run != 1 || runs.Load() != 1 {
			t.Fatalf("retry: %+v, %v after %d runs; want run 1's recorded response", got, err, runs.Load())
		}
	})
	t.Run("a handler that used up its deadline gets one attempt to record", func(t *testing.T) {
		store := &flakyCompleteStore{Store: memorystore.New(), failures: 1 << 20}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		call := idempotency.MakeIdempotent(store, func(ctx context.Context, _ order) (receipt, error) {
			<-ctx.Done()
			return receipt{OrderID: "o-1"}, nil
		}, opts)
		got, err := call(dctx, newOrder("k-1", "{}"))
		if !errors.Is(err, idempotency.ErrUnavailable) || got.OrderID != "o-1" {
			t.Fatalf("got %+v, %v; want the response with the store's error", got, err)
		}
		if n := store.attempts.Load(); n != 1 {
			t.Errorf("%d attempts to record past the deadline, want 1", n)
		}
	})
	t.Run("a store that stays unavailable is asked until the deadline", func(t *testing.T) {
		store := &flakyCompleteStore{Store: memorystore.New(), failures: 1 << 20}
		dctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
		defer cancel()
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { return receipt{OrderID: "o-1"}, nil }, opts)
		got, err := call(dctx, newOrder("k-1", "{}"))
		if !errors.Is(err, idempotency.ErrUnavailable) || got.OrderID != "o-1" {
			t.Fatalf("got %+v, %v; want the response with the store's error", got, err)
		}
		if n := store.attempts.Load(); n < 2 {
			t.Errorf("%d attempts to record in 400 ms, want at least 2 (the first wait is at most 50 ms)", n)
		}
	})
	t.Run("an error a retry cannot cure is not retried", func(t *testing.T) {
		store := &flakyCompleteStore{Store: memorystore.New(), failures: 1 << 20, err: unavailable}
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { return receipt{OrderID: "o-1"}, nil }, opts)
		if _, err := call(ctx, newOrder("k-1", "{}")); !errors.Is(err, unavailable) {
			t.Fatalf("err = %v, want the store's", err)
		}
		if n := store.attempts.Load(); n != 1 {
			t.Errorf("%d attempts to record, want 1", n)
		}
	})
	t.Run("a failed release is reported with the handler's error", func(t *testing.T) {
		store := failingStore{Store: memorystore.New(), release: unavailable}
		boom := errors.New("boom")
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { return receipt{}, boom }, opts)
		if _, err := call(ctx, newOrder("k-1", "{}")); !errors.Is(err, boom) || !errors.Is(err, unavailable) {
			t.Fatalf("err = %v, want both the handler's and the release's", err)
		}
	})
	t.Run("a claim that fails runs nothing", func(t *testing.T) {
		store := failingStore{Store: memorystore.New(), claim: unavailable}
		ran := false
		call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { ran = true; return receipt{}, nil }, opts)
		if _, err := call(ctx, newOrder("k-1", "{}")); !errors.Is(err, unavailable) || ran {
			t.Fatalf("err = %v, ran = %v; want the store's error and no run", err, ran)
		}
	})
}

// Under the default fingerprint (the whole request), a string that holds
// JSON counts as that JSON's canonical text, still a string: white space
// and member order inside it do not count, but {"x":"[1]"} is never taken
// for {"x":[1]}, nor a lone surrogate escape for another.
func TestDefaultFingerprintEmbeddedJSON(t *testing.T) {
	ctx := context.Background()
	runs := 0
	call := idempotency.MakeIdempotent(memorystore.New(), func(context.Context, map[string]any) (int, error) { runs++; return runs, nil },
		func(o *idempotency.HandlerOptions[map[string]any, int]) { o.KeyPath, o.Logger = "key", quiet })
	if got, err := call(ctx, map[string]any{"key": "k-1", "x": "[1]"}); err != nil || got != 1 {
		t.Fatalf("first = %d, %v", got, err)
	}
	if got, err := call(ctx, map[string]any{"key": "k-1", "x": " [ 1 ]\n"}); err != nil || got != 1 {
		t.Fatalf("the same JSON respelled = %d, %v; want a replay of run 1", got, err)
	}
	for _, x := range []any{[]any{1}, `"[1]"`, "[2]", "\u00a0[1]"} {
		if _, err := call(ctx, map[string]any{"key": "k-1", "x": x}); !errors.Is(err, idempotency.ErrKeyReused) {
			t.Errorf("x = %#v: err = %v, want ErrKeyReused", x, err)
		}
	}
	if got, err := call(ctx, map[string]any{"key": "k-2", "x": `{"a":"\ud800"}`}); err != nil || got != 2 {
		t.Fatalf("first under k-2 = %d, %v", got, err)
	}
	if _, err := call(ctx, map[string]any{"key": "k-2", "x": `{"a":"\udfff"}`}); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("another lone surrogate escape: err = %v, want ErrKeyReused", err)
	}
	if runs != 2 {
		t.Fatalf("%d runs, want 2", runs)
	}
}

type clock = testenv.Clock

// newClock starts on a whole second, as records store expiry in seconds.
func newClock() *clock { return testenv.NewClock(time.Now().Truncate(time.Second)) }

const (
	testTTL   = time.Hour
	testLease = 10 * time.Second
)
