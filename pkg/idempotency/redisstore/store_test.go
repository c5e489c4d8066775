package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/redisstore"
	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

var server = testenv.SharedRedis()

func TestMain(m *testing.M) { testenv.Main(m, server) }

// newStore returns a store on the shared server with storetest's options,
// its keys under a prefix of t's own.
func newStore(t testing.TB, c *storetest.Clock) (*redisstore.Store, *redis.Client) {
	t.Helper()
	rc := testenv.RedisClient(t, server.Endpoint(t))
	return redisstore.New(rc, func(o *redisstore.Options) {
		o.TTL, o.Lease, o.Now, o.KeyPrefix = storetest.TTL, storetest.Lease, c.Now, t.Name()+":"
	}), rc
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) idempotency.Store {
		st, _ := newStore(t, c)
		return st
	})
}

// Records the store did not write: Put writes the hash as the package doc
// lays it out, leaving out the fields a record lacks.
func TestForeignRecords(t *testing.T) {
	storetest.RunForeignRecords(t, func(t *testing.T, c *storetest.Clock) (idempotency.Store, storetest.Put) {
		st, rc := newStore(t, c)
		return st, func(t *testing.T, rec idempotency.Record) {
			fields := []any{"tenant", rec.Tenant, "claim_id", rec.ClaimID, "fingerprint", rec.Fingerprint, "state", string(rec.State),
				"created_at", rec.CreatedAt.UnixMilli(), "updated_at", rec.UpdatedAt.UnixMilli(), "expires_at", rec.ExpiresAt.Unix()}
			if len(rec.Response.Body) > 0 {
				fields = append(fields, "response", string(rec.Response.Body))
			}
			if !rec.LeaseExpiresAt.IsZero() {
				fields = append(fields, "lease_expires_at", rec.LeaseExpiresAt.UnixMilli())
			}
			if err := rc.HSet(context.Background(), st.Key(rec.ID), fields...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func claim(id idempotency.ID, claimID string) idempotency.Record {
	return idempotency.Record{ID: id, Tenant: "payments", ClaimID: claimID, Fingerprint: "fp"}
}

// The key outlives its record by a little, so Redis drops it without a
// sweep and never before the record expires.
func TestKeyTTL(t *testing.T) {
	ctx := context.Background()
	st, rc := newStore(t, storetest.NewClock(time.Now()))
	id := idempotency.NewID("payments", "order-1")
	if _, err := st.Claim(ctx, claim(id, "c1")); err != nil {
		t.Fatal(err)
	}
	ttl, err := rc.PTTL(ctx, st.Key(id)).Result()
	if err != nil || ttl <= storetest.TTL || ttl > storetest.TTL+time.Minute {
		t.Fatalf("PTTL %s = %v, %v; want more than the record's %v by up to a minute", st.Key(id), ttl, err, storetest.TTL)
	}
	if got, err := rc.HGet(ctx, st.Key(id), "state").Result(); err != nil || got != "in_progress" {
		t.Errorf("HGET state = %q, %v; want the record as a hash", got, err)
	}
}

// A claim whose lease ran out is taken over, and the first claim, late,
// can neither complete nor release the new one.
func TestLeaseTakeover(t *testing.T) {
	ctx, c := context.Background(), storetest.NewClock(time.Now().Truncate(time.Second))
	st, _ := newStore(t, c)
	id := idempotency.NewID("payments", "order-1")
	if _, err := st.Claim(ctx, claim(id, "c1")); err != nil {
		t.Fatal(err)
	}
	c.Advance(storetest.Lease + time.Millisecond)
	res, err := st.Claim(ctx, claim(id, "c2"))
	if err != nil || res.Replayed || res.Record.ClaimID != "c2" {
		t.Fatalf("claim after the lease = %+v, %v; want c2's own claim", res, err)
	}
	if _, err := st.Complete(ctx, id, "c1", idempotency.Response{Body: []byte(`{"late":true}`)}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("complete by the stale claim c1: %v, want ErrNotFound", err)
	}
	if err := st.Release(ctx, id, "c1"); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, id)
	if err != nil || got.ClaimID != "c2" || got.State != idempotency.StateInProgress {
		t.Fatalf("after c1's complete and release: %+v, %v; want c2 in progress", got, err)
	}
	if _, err := st.Complete(ctx, id, "c2", idempotency.Response{Body: []byte(`{}`)}); err != nil {
		t.Fatalf("complete by c2: %v", err)
	}
}

// Of 50 concurrent claims of a key exactly one wins; the others find it in
// progress.
func TestConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t, storetest.NewClock(time.Now()))
	id := idempotency.NewID("payments", "order-1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, inProgress := 0, 0
	for i := range 50 {
		wg.Go(func() {
			res, err := st.Claim(ctx, claim(id, "c"+string(rune('A'+i))))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && !res.Replayed:
				won++
			case errors.Is(err, idempotency.ErrInProgress):
				inProgress++
			default:
				t.Errorf("claim: %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || inProgress != 49 {
		t.Errorf("%d claims won and %d found the key in progress, want 1 and 49", won, inProgress)
	}
}

// A server that cannot be reached is ErrUnavailable, which a caller may
// retry later.
func TestUnavailable(t *testing.T) {
	var url string
	t.Run("server", func(t *testing.T) { url = testenv.Redis(t) }) // stopped when the subtest ends
	if url == "" {
		t.Skip("no redis-server")
	}
	st := redisstore.New(testenv.RedisClient(t, url))
	_, err := st.Claim(context.Background(), claim(idempotency.NewID("payments", "order-1"), "c1"))
	if !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("claim on a stopped server: %v, want ErrUnavailable", err)
	}
}
