package idempotency_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// TestStores takes a key through its life on each store, as MakeIdempotent
// does and as a Store of one's own would be held to: the errors come as
// this package's types, carrying this package's records.
func TestStores(t *testing.T) {
	opts := func(c *clock) func(*idempotency.Options) {
		return func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = testTTL, testLease, c.Now }
	}
	stores := map[string]func(t *testing.T, c *clock) idempotency.Store{
		"memory": func(t *testing.T, c *clock) idempotency.Store { return idempotency.NewMemoryStore(opts(c)) },
		"dynoxide": func(t *testing.T, c *clock) idempotency.Store {
			client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
			return idempotency.NewDynamoStore(client, testenv.NewTable(t, client), opts(c))
		},
		// dynalite drops the holder a refused claim should bring back: the
		// store reads it instead.
		"dynalite, single-table schema": func(t *testing.T, c *clock) idempotency.Store {
			client := testenv.DynamoClient(dynalite.Endpoint(t), nil)
			return idempotency.NewDynamoStore(client, testenv.NewTableWithKey(t, client, "PK", "SK"), opts(c), func(o *idempotency.Options) {
				o.Schema = idempotency.Schema{PartitionKey: "PK", SortKey: "SK", KeyPrefix: "IDEMPOTENCY#", State: "status", ExpiresAt: "expiration"}
			})
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			ctx, c := context.Background(), newClock()
			st := newStore(t, c)
			id := idempotency.NewID("payments", "order-1")
			claim := idempotency.Record{ID: id, Tenant: "payments", ClaimID: "c1", Fingerprint: "fp", Lease: 5 * time.Second}
			first, err := st.Claim(ctx, claim)
			if err != nil || first.Replayed || first.Record.State != idempotency.StateInProgress || !first.Record.LeaseExpiresAt.Equal(c.Now().Add(5*time.Second)) {
				t.Fatalf("claim = %+v, %v; want in progress for its own lease", first, err)
			}
			c.Advance(2 * time.Second)
			again := claim
			again.ClaimID = "c2"
			_, err = st.Claim(ctx, again)
			var ip *idempotency.InProgressError
			if !errors.As(err, &ip) || ip.RetryAfter != 3*time.Second || !errors.Is(err, idempotency.ErrInProgress) {
				t.Fatalf("claim while in progress: %v, want an InProgressError retrying after 3s", err)
			}
			if _, err := st.Complete(ctx, id, "c2", idempotency.Response{Body: []byte(`{}`)}); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("complete by another claim: %v, want ErrNotFound", err)
			}
			done, err := st.Complete(ctx, id, "c1", idempotency.Response{Body: []byte(`{"charge":"ch_1"}`)})
			if err != nil || done.State != idempotency.StateCompleted || !done.LeaseExpiresAt.IsZero() {
				t.Fatalf("complete = %+v, %v", done, err)
			}
			var conflict *idempotency.ConflictError
			if _, err := st.Complete(ctx, id, "c1", idempotency.Response{Body: []byte(`{}`)}); !errors.Is(err, idempotency.ErrAlreadyCompleted) ||
				!errors.As(err, &conflict) || string(conflict.Existing.Response.Body) != `{"charge":"ch_1"}` {
				t.Fatalf("complete again: %v, want ErrAlreadyCompleted with the record", err)
			}
			replay, err := st.Claim(ctx, again)
			if err != nil || !replay.Replayed || replay.Record.ClaimID != "c1" || string(replay.Record.Response.Body) != `{"charge":"ch_1"}` {
				t.Fatalf("replay = %+v, %v", replay, err)
			}
			other := again
			other.Fingerprint = "another request"
			if _, err := st.Claim(ctx, other); !errors.Is(err, idempotency.ErrKeyReused) || !errors.As(err, &conflict) || conflict.Existing.ClaimID != "c1" {
				t.Fatalf("another request under the key: %v, want ErrKeyReused naming c1", err)
			}
			if got, err := st.Get(ctx, id); err != nil || !reflect.DeepEqual(got, done) {
				t.Fatalf("Get = %+v, %v; want %+v", got, err, done)
			}
			if _, err := st.Claim(ctx, idempotency.Record{ID: id, ClaimID: "c3", State: "pending"}); err == nil {
				t.Fatal("a claim in another state than in progress was taken")
			}

			// A release frees an in-progress claim, and leaves a completed one.
			id2 := idempotency.NewID("payments", "order-2")
			if _, err := st.Claim(ctx, idempotency.Record{ID: id2, Tenant: "payments", ClaimID: "c1", Fingerprint: "fp"}); err != nil {
				t.Fatal(err)
			}
			for _, held := range []idempotency.ID{id2, id} {
				if err := st.Release(ctx, held, "c1"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Get(ctx, id2); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("after release: %v, want ErrNotFound", err)
			}
			if _, err := st.Get(ctx, id); err != nil {
				t.Fatalf("release removed a completed record: %v", err)
			}

			// Expiry is the store's, never the table's TTL sweep.
			c.Advance(testTTL)
			if _, err := st.Get(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("after expiry: %v, want ErrNotFound", err)
			}
			if res, err := st.Claim(ctx, other); err != nil || res.Replayed || res.Record.ClaimID != "c2" {
				t.Fatalf("claim after expiry = %+v, %v; want a fresh claim", res, err)
			}
		})
	}
}

func TestDefaultSchema(t *testing.T) {
	want := idempotency.Schema{
		PartitionKey: "pk", ExpiresAt: "expires_at", LeaseExpiresAt: "lease_expires_at",
		State: "state", ResponseBody: "response_body", Fingerprint: "fingerprint",
	}
	if got := idempotency.DefaultSchema(); got != want {
		t.Errorf("DefaultSchema() = %+v, want %+v", got, want)
	}
	if err := (idempotency.Schema{State: "fingerprint"}).Validate(); err == nil {
		t.Error("a schema whose state is its fingerprint was accepted")
	}
}
