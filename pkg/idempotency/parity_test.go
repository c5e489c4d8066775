package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/redisstore"
	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

// The behaviours below are ones Powertools' own tests assert and this
// package did not meet; each runs on every store.

// everyStore makes each of the module's stores, on clock c.
var everyStore = map[string]func(t *testing.T, c *storetest.Clock) idempotency.Store{
	"memory": func(t *testing.T, c *storetest.Clock) idempotency.Store {
		return memorystore.New(func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = storetest.TTL, storetest.Lease, c.Now })
	},
	"dynoxide": func(t *testing.T, c *storetest.Clock) idempotency.Store {
		client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
		return dynamostore.New(client, testenv.NewTable(t, client), func(o *idempotency.Options) {
			o.TTL, o.Lease, o.Now = storetest.TTL, storetest.Lease, c.Now
		})
	},
	"redis": func(t *testing.T, c *storetest.Clock) idempotency.Store {
		return redisstore.New(testenv.RedisClient(t, redis.Endpoint(t)), func(o *redisstore.Options) {
			o.TTL, o.Lease, o.Now, o.KeyPrefix = storetest.TTL, storetest.Lease, c.Now, t.Name()+":"
		})
	},
}

func onEveryStore(t *testing.T, run func(t *testing.T, c *storetest.Clock, st idempotency.Store)) {
	for name, newStore := range everyStore {
		t.Run(name, func(t *testing.T) {
			c := storetest.NewClock(time.Now().Truncate(time.Second))
			run(t, c, newStore(t, c))
		})
	}
}

type keyed map[string]any

// An empty value names no request: under KeyPath it is a missing key, so
// unrelated requests that carry one never share a record (with the
// default fingerprint they would be refused as a reuse; fingerprinted by
// the key alone, the second would get the first's answer).
func TestEmptyValueIsNoKey(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c *storetest.Clock, st idempotency.Store) {
		ctx := context.Background()
		for _, empty := range []string{`[]`, `{}`, `[null, null]`, `{"a": null}`, `null`, `""`, `"{}"`, `"[]"`} {
			for _, fingerprint := range [][]string{nil, {"idemKey"}} {
				var runs atomic.Int64
				handle := func(_ context.Context, req keyed) (string, error) {
					runs.Add(1)
					return fmt.Sprint("order ", req["order"]), nil
				}
				name := fmt.Sprintf("key %s, fingerprint %q", empty, fingerprint)
				strict := idempotency.MakeIdempotent(st, handle, func(o *idempotency.HandlerOptions[keyed, string]) {
					o.KeyPath, o.FingerprintPaths, o.Scope, o.Logger, o.Now = "idemKey", fingerprint, t.Name(), quiet, c.Now
				})
				optional := idempotency.MakeIdempotent(st, handle, func(o *idempotency.HandlerOptions[keyed, string]) {
					o.KeyPath, o.FingerprintPaths, o.Scope, o.Logger, o.Now, o.OptionalKey = "idemKey", fingerprint, t.Name(), quiet, c.Now, true
				})
				for _, order := range []string{"A", "B"} {
					var v any
					if err := json.Unmarshal([]byte(empty), &v); err != nil {
						t.Fatal(err)
					}
					req := keyed{"idemKey": v, "order": order}
					if _, err := strict(ctx, req); !errors.Is(err, idempotency.ErrMissingKey) {
						t.Errorf("%s, order %s: %v; want ErrMissingKey", name, order, err)
					}
					if got, err := optional(ctx, req); err != nil || got != "order "+order {
						t.Errorf("%s, order %s, OptionalKey: %q, %v; want the handler's own answer", name, order, got, err)
					}
				}
				if runs.Load() != 2 {
					t.Errorf("%s: the handler ran %d times for two requests under OptionalKey, want 2", name, runs.Load())
				}
			}
		}
		// What the rule must not catch: values that name something.
		for i, key := range []string{`[null, 1]`, `{"a": 0}`, `0`, `false`, `" "`, `[[]]`} {
			var v any
			if err := json.Unmarshal([]byte(key), &v); err != nil {
				t.Fatal(err)
			}
			runs := 0
			call := idempotency.MakeIdempotent(st, func(context.Context, keyed) (int, error) { runs++; return runs, nil }, func(o *idempotency.HandlerOptions[keyed, int]) {
				o.KeyPath, o.Scope, o.Logger, o.Now = "idemKey", fmt.Sprintf("%s-%d", t.Name(), i), quiet, c.Now
			})
			first, err1 := call(ctx, keyed{"idemKey": v})
			again, err2 := call(ctx, keyed{"idemKey": v})
			if err1 != nil || err2 != nil || first != 1 || again != 1 {
				t.Errorf("key %s: %d, %v then %d, %v; want one run, replayed", key, first, err1, again, err2)
			}
		}
	})
}

// A nil request names nothing either, whichever way its key is looked
// for: the whole request (KeyPath ""), or a path into it. Powertools
// hashes a null payload like any other, so every null event would share
// one record; here it is a missing key: ErrMissingKey, or under
// OptionalKey a run without idempotency, every time.
func TestNilRequestHasNoKey(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c *storetest.Clock, st idempotency.Store) {
		ctx := context.Background()
		for _, path := range []string{"", "headers.idempotency-key"} {
			runs := 0
			handle := func(context.Context, *order) (int, error) { runs++; return runs, nil }
			opts := func(o *idempotency.HandlerOptions[*order, int]) {
				o.KeyPath, o.Scope, o.Logger, o.Now = path, t.Name(), quiet, c.Now
			}
			if _, err := idempotency.MakeIdempotent(st, handle, opts)(ctx, nil); !errors.Is(err, idempotency.ErrMissingKey) {
				t.Errorf("KeyPath %q, a nil request: %v; want ErrMissingKey", path, err)
			}
			optional := idempotency.MakeIdempotent(st, handle, opts, func(o *idempotency.HandlerOptions[*order, int]) { o.OptionalKey = true })
			first, err1 := optional(ctx, nil)
			second, err2 := optional(ctx, nil)
			if err1 != nil || err2 != nil || first != 1 || second != 2 {
				t.Errorf("KeyPath %q, nil requests under OptionalKey: runs %d, %v and %d, %v; want each run, nothing recorded", path, first, err1, second, err2)
			}
		}
	})
}

// BlockTimedOut: an invocation cut off at its deadline (the context's, as
// Lambda sets it) leaves its claim in progress; once its lease runs out, a
// retry is refused with a TimedOutError naming the key, instead of running
// the work a second time, until ReleaseTimedOut frees the key. The default
// takes the key over and runs again.
func TestTimeoutPolicy(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c *storetest.Clock, st idempotency.Store) {
		for _, policy := range []idempotency.TimeoutPolicy{idempotency.BlockTimedOut, idempotency.TakeOverTimedOut} {
			var runs atomic.Int64
			cutOff := make(chan struct{})
			charge := func(ctx context.Context, o order) (receipt, error) {
				if runs.Add(1) == 1 {
					<-cutOff // the first run never ends while the test looks
				}
				return receipt{OrderID: o.Body, Run: runs.Load()}, nil
			}
			scope := fmt.Sprintf("%s-%d", t.Name(), policy)
			pay := idempotency.MakeIdempotent(st, charge, func(o *idempotency.HandlerOptions[order, receipt]) {
				o.KeyPath, o.FingerprintPaths, o.Scope, o.Logger, o.Now, o.AfterTimeout = "headers.idempotency-key", []string{"body"}, scope, quiet, c.Now, policy
			})
			invocation := func() (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), c.Now().Add(3*time.Second))
			}
			ctx, cancel := invocation()
			firstDone := make(chan error, 1)
			go func() {
				_, err := pay(ctx, newOrder("k-1", "o-1"))
				firstDone <- err
			}()
			for runs.Load() == 0 {
				select {
				case err := <-firstDone:
					t.Fatalf("the first run ended before its handler ran: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			c.Advance(4 * time.Second) // past the first invocation's deadline
			retryCtx, retryCancel := invocation()
			got, err := pay(retryCtx, newOrder("k-1", "o-1"))
			var timedOut *idempotency.TimedOutError
			switch policy {
			case idempotency.BlockTimedOut:
				if !errors.As(err, &timedOut) || !errors.Is(err, idempotency.ErrTimedOut) || timedOut.Key != "k-1" || runs.Load() != 1 {
					t.Fatalf("BlockTimedOut, a retry after the first run timed out: %+v, %v (runs %d); want a TimedOutError naming k-1, no second run", got, err, runs.Load())
				}
				if err := idempotency.ReleaseTimedOut(retryCtx, st, timedOut.Existing.ID, c.Now()); err != nil {
					t.Fatal(err)
				}
				if got, err := pay(retryCtx, newOrder("k-1", "o-1")); err != nil || got.Run != 2 {
					t.Fatalf("after ReleaseTimedOut: %+v, %v; want the second run", got, err)
				}
			case idempotency.TakeOverTimedOut:
				if err != nil || got.Run != 2 {
					t.Fatalf("TakeOverTimedOut, a retry after the first run timed out: %+v, %v; want it to run again", got, err)
				}
			}
			retryCancel()
			close(cutOff)
			if err := <-firstDone; !errors.Is(err, idempotency.ErrNotFound) {
				t.Errorf("the timed-out run, ending late: %v; want its record refused (ErrNotFound: the key is another claim's)", err)
			}
			cancel()
		}
	})
}

// Under BlockTimedOut, a handler that gives up when its context's deadline
// passes counts as timed out: its work may have happened, so its claim is
// kept, not released for a retry to run it again.
func TestBlockTimedOutKeepsAHandlerCutOffByItsDeadline(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c *storetest.Clock, st idempotency.Store) {
		for _, policy := range []idempotency.TimeoutPolicy{idempotency.BlockTimedOut, idempotency.TakeOverTimedOut} {
			runs := 0
			charge := func(ctx context.Context, o order) (receipt, error) {
				runs++
				if runs == 1 {
					<-ctx.Done()
					return receipt{}, fmt.Errorf("charge: %w", ctx.Err())
				}
				return receipt{OrderID: o.Body, Run: int64(runs)}, nil
			}
			pay := idempotency.MakeIdempotent(st, charge, func(o *idempotency.HandlerOptions[order, receipt]) {
				o.KeyPath, o.FingerprintPaths, o.Logger, o.Now, o.AfterTimeout = "headers.idempotency-key", []string{"body"}, quiet, c.Now, policy
				o.Scope = fmt.Sprintf("%s-%d", t.Name(), policy)
			})
			// A real deadline, since the handler waits for it; the lease
			// is the deadline as the store's clock reads it.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			if _, err := pay(ctx, newOrder("k-1", "o-1")); !errors.Is(err, context.DeadlineExceeded) || runs != 1 {
				t.Fatalf("a run cut off by its deadline: %v (runs %d); want the handler's DeadlineExceeded", err, runs)
			}
			cancel()
			c.Advance(time.Since(c.Now()) + time.Second) // past the lease
			got, err := pay(context.Background(), newOrder("k-1", "o-1"))
			switch {
			case policy == idempotency.BlockTimedOut && !errors.Is(err, idempotency.ErrTimedOut):
				t.Errorf("BlockTimedOut, the retry: %+v, %v; want ErrTimedOut", got, err)
			case policy == idempotency.TakeOverTimedOut && (err != nil || got.Run != 2):
				t.Errorf("TakeOverTimedOut, the retry: %+v, %v; want the second run (the failed run released its claim)", got, err)
			}
		}
	})
}
