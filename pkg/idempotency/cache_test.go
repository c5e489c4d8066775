package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// countingStore counts the calls that reach a MemoryStore, by method.
type countingStore struct {
	*memorystore.Store
	mu  sync.Mutex
	ops map[string]int
}

func (c *countingStore) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[op]++
}

// take returns the calls counted since the last take.
func (c *countingStore) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = nil
	if ops == nil {
		ops = map[string]int{}
	}
	return ops
}

func (c *countingStore) Claim(ctx context.Context, rec idempotency.Record) (idempotency.ClaimResult, error) {
	c.count("Claim")
	return c.Store.Claim(ctx, rec)
}

func (c *countingStore) Get(ctx context.Context, id idempotency.ID) (idempotency.Record, error) {
	c.count("Get")
	return c.Store.Get(ctx, id)
}

func (c *countingStore) Complete(ctx context.Context, id idempotency.ID, claim string, resp idempotency.Response) (idempotency.Record, error) {
	c.count("Complete")
	return c.Store.Complete(ctx, id, claim, resp)
}

func (c *countingStore) Release(ctx context.Context, id idempotency.ID, claim string) error {
	c.count("Release")
	return c.Store.Release(ctx, id, claim)
}

// wantCalls fails unless the store got exactly want since the last take.
func (h *harness) wantCalls(t *testing.T, step string, want map[string]int) {
	t.Helper()
	if got := h.counted.take(); !maps.Equal(got, want) {
		t.Errorf("%s: store calls %v, want %v", step, got, want)
	}
}

var (
	fresh     = map[string]int{"Claim": 1, "Complete": 1}
	fromStore = map[string]int{"Claim": 1}
	noCall    = map[string]int{}
)

func cached(max int) func(*idempotency.HandlerOptions[order, receipt]) {
	return func(o *idempotency.HandlerOptions[order, receipt]) { o.UseLocalCache, o.LocalCacheMaxItems = true, max }
}

func TestLocalCache(t *testing.T) {
	ctx := context.Background()
	body := `{"orderId":"o-1","amount":1000}`
	cases := map[string]func(t *testing.T){
		"a replay from the cache makes no store call": func(t *testing.T) {
			h := newHarness(t, cached(0))
			first := h.mustCall(t, newOrder("k-1", body))
			h.wantCalls(t, "first", fresh)
			for i := range 3 {
				if got := h.mustCall(t, newOrder("k-1", "{ \"amount\": 1000, \"orderId\": \"o-1\" }")); got != first {
					t.Fatalf("retry %d = %+v, want %+v", i, got, first)
				}
			}
			h.wantCalls(t, "retries", noCall)
			if h.runs.Load() != 1 {
				t.Fatalf("%d runs, want 1", h.runs.Load())
			}
		},
		"a replay from the store is cached": func(t *testing.T) {
			h := newHarness(t, cached(0))
			other := idempotency.MakeIdempotent(h.counted, h.fn, h.opts...) // another instance: its own cache
			h.mustCall(t, newOrder("k-1", body))
			h.counted.take()
			for _, step := range []struct {
				name string
				want map[string]int
			}{{"first retry", fromStore}, {"second retry", noCall}} {
				if got, err := other(ctx, newOrder("k-1", body)); err != nil || got.Run != 1 {
					t.Fatalf("%s = %+v, %v; want a replay of run 1", step.name, got, err)
				}
				h.wantCalls(t, step.name, step.want)
			}
		},
		"an expired record is not served": func(t *testing.T) {
			h := newHarness(t, cached(0))
			h.mustCall(t, newOrder("k-1", body))
			h.clock.Advance(testTTL - time.Second)
			h.mustCall(t, newOrder("k-1", body))
			h.wantCalls(t, "fresh, then a retry before expiry", fresh)
			h.clock.Advance(2 * time.Second)
			if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 2 {
				t.Fatalf("after expiry = %+v, want run 2", got)
			}
			h.wantCalls(t, "after expiry", fresh)
		},
		"the least recently used record is evicted first": func(t *testing.T) {
			h := newHarness(t, cached(2))
			for _, k := range []string{"k-1", "k-2", "k-1", "k-3"} { // k-1 used after k-2: k-2 goes
				h.mustCall(t, newOrder(k, body))
			}
			h.counted.take()
			for _, step := range []struct {
				key  string
				want map[string]int
			}{
				{"k-1", noCall}, {"k-3", noCall},
				{"k-2", fromStore}, // cached again, evicting k-1, the least recently used
				{"k-3", noCall}, {"k-1", fromStore},
			} {
				h.mustCall(t, newOrder(step.key, body))
				h.wantCalls(t, step.key, step.want)
			}
			if h.runs.Load() != 3 {
				t.Fatalf("%d runs, want 3", h.runs.Load())
			}
		},
		"another request under a cached key gets the store's ConflictError": func(t *testing.T) {
			h := newHarness(t, cached(0))
			uncached := idempotency.MakeIdempotent(h.counted, h.fn, append(h.opts, func(o *idempotency.HandlerOptions[order, receipt]) { o.UseLocalCache = false })...)
			h.mustCall(t, newOrder("k-1", body))
			h.counted.take()
			other := newOrder("k-1", `{"orderId":"o-1","amount":2000}`)
			_, fromCache := h.call(ctx, other)
			h.wantCalls(t, "from the cache", noCall)
			_, want := uncached(ctx, other)
			h.wantCalls(t, "from the store", fromStore)
			var got, wantConflict *idempotency.ConflictError
			if !errors.Is(fromCache, idempotency.ErrKeyReused) || !errors.As(fromCache, &got) || !errors.As(want, &wantConflict) {
				t.Fatalf("from the cache: %v; from the store: %v; want ConflictErrors wrapping ErrKeyReused", fromCache, want)
			}
			if fromCache.Error() != want.Error() || !reflect.DeepEqual(got.Existing, wantConflict.Existing) {
				t.Errorf("from the cache: %q with %+v\nfrom the store: %q with %+v", fromCache, got.Existing, want, wantConflict.Existing)
			}
			if h.runs.Load() != 1 {
				t.Fatalf("%d runs, want 1", h.runs.Load())
			}
		},
		"an in-progress record is never cached": func(t *testing.T) {
			h := newHarness(t, cached(0))
			entered, finish := make(chan struct{}), make(chan struct{})
			h.next = func(_ context.Context, n int64) (receipt, error) {
				close(entered)
				<-finish
				return receipt{OrderID: "o-1", Run: n}, nil
			}
			done := make(chan error, 1)
			go func() { _, err := h.call(ctx, newOrder("k-1", body)); done <- err }()
			<-entered
			h.counted.take()
			for i := range 2 {
				if _, err := h.call(ctx, newOrder("k-1", body)); !errors.Is(err, idempotency.ErrInProgress) {
					t.Fatalf("call %d while in progress: %v, want ErrInProgress", i, err)
				}
				h.wantCalls(t, fmt.Sprintf("call %d while in progress", i), fromStore)
			}
			close(finish)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			h.counted.take()
			if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 1 {
				t.Fatalf("after completion = %+v, want a replay of run 1", got)
			}
			h.wantCalls(t, "after completion", noCall)
		},
		"OnReplay gets a body of its own": func(t *testing.T) {
			h := newHarness(t, cached(0), func(o *idempotency.HandlerOptions[order, receipt]) {
				o.OnReplay = func(_ context.Context, r receipt, rec idempotency.Record) receipt {
					clear(rec.Response.Body) // a careless hook
					return r
				}
			})
			h.mustCall(t, newOrder("k-1", body))
			for i := range 2 {
				if got, err := h.call(ctx, newOrder("k-1", body)); err != nil || got.Run != 1 {
					t.Fatalf("replay %d = %+v, %v; want run 1", i, got, err)
				}
			}
		},
	}
	for name, tc := range cases {
		t.Run(name, tc)
	}
}

// A response the store did not record is not cached: the claim stays in
// progress in the store, and a retry hears so from it.
func TestLocalCacheUnrecorded(t *testing.T) {
	ctx := context.Background()
	store := failingStore{Store: memorystore.New(), complete: errors.New("throttled")}
	call := idempotency.MakeIdempotent(store, func(context.Context, order) (receipt, error) { return receipt{OrderID: "o-1"}, nil },
		func(o *idempotency.HandlerOptions[order, receipt]) {
			o.KeyPath, o.FingerprintPaths, o.Logger, o.UseLocalCache = "headers.idempotency-key", []string{"body"}, quiet, true
		})
	if _, err := call(ctx, newOrder("k-1", "{}")); err == nil {
		t.Fatal("a response that was not recorded: no error")
	}
	if _, err := call(ctx, newOrder("k-1", "{}")); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("retry: %v, want the store's ErrInProgress", err)
	}
}

// Concurrent requests over more keys than the cache holds, run with -race:
// every key runs once, and every answer under a key is that run's.
func TestLocalCacheConcurrent(t *testing.T) {
	h := newHarness(t, cached(4))
	const keys, workers, calls = 16, 8, 200
	var mu sync.Mutex
	runOf := map[string]int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				key := fmt.Sprintf("k-%d", (w*7+i)%keys)
				got, err := h.call(context.Background(), newOrder(key, `{"amount":1}`))
				if errors.Is(err, idempotency.ErrInProgress) {
					continue // two workers met on a fresh key
				}
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				mu.Lock()
				if run, seen := runOf[key]; seen && run != got.Run {
					t.Errorf("%s answered with run %d and run %d", key, run, got.Run)
				}
				runOf[key] = got.Run
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if h.runs.Load() != keys {
		t.Fatalf("%d runs for %d keys, want one each", h.runs.Load(), keys)
	}
}
