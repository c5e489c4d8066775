// Package storetest holds an [idempotency.Store] to the cases the
// package's own stores pass: run it on a store of your own, as
// pkg/idempotency runs it on memorystore.Store and dynamostore.Store and
// pkg/idempotency/redisstore on Redis.
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) idempotency.Store {
//			return mystore.New(client, mystore.Options{TTL: storetest.TTL, Lease: storetest.Lease, Now: clock.Now})
//		})
//	}
package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// The options a store under test is made with: records live TTL after
// their claim, and a claim that asks for no lease of its own holds its key
// for Lease.
const (
	TTL   = time.Hour
	Lease = 10 * time.Second
)

// Clock is the store's clock in a run, which the cases advance: a store
// under test reads its time from Now and from nothing else. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run takes a key through its life on a store that newStore makes, with
// TTL, Lease and clock.Now as its options, as MakeIdempotent does: a
// claim, a claim while it is in progress, completion (by another claim,
// by its own, and again), a replay, another request under the key, Get,
// release of an in-progress and of a completed claim, and a claim after
// expiry. The errors must come as pkg/idempotency's types, carrying its
// records. The clock starts at the current second.
func Run(t *testing.T, newStore func(t *testing.T, clock *Clock) idempotency.Store) {
	t.Helper()
	ctx, c := context.Background(), NewClock(time.Now().Truncate(time.Second))
	st := newStore(t, c)
	id := idempotency.NewID("payments", "order-1")
	claim := idempotency.Record{ID: id, Tenant: "payments", ClaimID: "c1", Fingerprint: "fp", Lease: 5 * time.Second}
	first, err := st.Claim(ctx, claim)
	if err != nil || first.Replayed || first.Record.State != idempotency.StateInProgress || !first.Record.LeaseExpiresAt.Equal(c.Now().Add(5*time.Second)) {
		t.Fatalf("claim = %+v, %v; want in progress for its own lease", first, err)
	}
	if want := c.Now().Add(TTL); !first.Record.ExpiresAt.Equal(want) {
		t.Fatalf("claim expires at %v, want %v: is the store made with storetest.TTL and clock.Now?", first.Record.ExpiresAt, want)
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
	second, err := st.Claim(ctx, idempotency.Record{ID: id2, Tenant: "payments", ClaimID: "c1", Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Now().Add(Lease); !second.Record.LeaseExpiresAt.Equal(want) {
		t.Fatalf("a claim without a lease of its own holds until %v, want %v: is the store made with storetest.Lease?", second.Record.LeaseExpiresAt, want)
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
	c.Advance(TTL)
	if _, err := st.Get(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("after expiry: %v, want ErrNotFound", err)
	}
	if res, err := st.Claim(ctx, other); err != nil || res.Replayed || res.Record.ClaimID != "c2" {
		t.Fatalf("claim after expiry = %+v, %v; want a fresh claim", res, err)
	}

	runTimeouts(t, st, c)
}

// runTimeouts holds st to the two timeout policies: a claim whose lease ran
// out is taken over by default, and refused with a *TimedOutError to a
// claim with Record.NoTakeover, which ReleaseTimedOut can end.
func runTimeouts(t *testing.T, st idempotency.Store, c *Clock) {
	t.Helper()
	ctx := context.Background()
	id := idempotency.NewID("payments", "order-3")
	first, err := st.Claim(ctx, idempotency.Record{ID: id, Tenant: "payments", ClaimID: "t1", Fingerprint: "fp", Lease: 5 * time.Second, NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	retry := idempotency.Record{ID: id, Tenant: "payments", ClaimID: "t2", Fingerprint: "fp", NoTakeover: true}
	if _, err := st.Claim(ctx, retry); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("a claim without takeover while the lease runs: %v, want ErrInProgress", err)
	}
	c.Advance(6 * time.Second) // the first claim timed out
	var timedOut *idempotency.TimedOutError
	for _, fp := range []string{"fp", "another request"} {
		retry.Fingerprint = fp
		_, err := st.Claim(ctx, retry)
		if fp == "another request" {
			if !errors.Is(err, idempotency.ErrKeyReused) {
				t.Fatalf("another request under a timed-out key: %v, want ErrKeyReused", err)
			}
			continue
		}
		if !errors.As(err, &timedOut) || !errors.Is(err, idempotency.ErrTimedOut) || timedOut.Existing.ClaimID != "t1" ||
			!timedOut.Existing.CreatedAt.Equal(first.Record.CreatedAt) || !timedOut.Existing.LeaseExpiresAt.Equal(first.Record.LeaseExpiresAt) {
			t.Fatalf("a claim without takeover after the lease ran out: %v, want a TimedOutError naming t1, its claim and its lease", err)
		}
	}
	if got, err := st.Get(ctx, id); err != nil || got.ClaimID != "t1" || got.State != idempotency.StateInProgress {
		t.Fatalf("after a refused claim: %+v, %v; want t1 in progress, untouched", got, err)
	}
	if err := idempotency.ReleaseTimedOut(ctx, st, id, c.Now()); err != nil {
		t.Fatal(err)
	}
	retry.Fingerprint = "fp"
	if res, err := st.Claim(ctx, retry); err != nil || res.Replayed || res.Record.ClaimID != "t2" {
		t.Fatalf("a claim after ReleaseTimedOut = %+v, %v; want a fresh claim", res, err)
	}
	if err := idempotency.ReleaseTimedOut(ctx, st, id, c.Now()); err == nil {
		t.Fatal("ReleaseTimedOut released a claim still in its lease")
	}
	// The default: a timed-out claim is taken over.
	c.Advance(Lease + time.Second)
	retry.ClaimID, retry.NoTakeover = "t3", false
	if res, err := st.Claim(ctx, retry); err != nil || res.Replayed || res.Record.ClaimID != "t3" {
		t.Fatalf("a claim after the lease ran out = %+v, %v; want it to take the key over", res, err)
	}
}

// Put writes rec into the store under test as it is, every field as given
// and none stamped, the way another writer would leave a record: an older
// or newer version of the store's code, or a hand edit.
type Put func(t *testing.T, rec idempotency.Record)

// RunForeignRecords holds a store to the rules for records it did not
// write itself, which newStore plants with put (made with the same options
// as for Run):
//
//   - a record in a state package idempotency does not know is an error
//     naming the record and its state (ErrUnknownState): never replayed,
//     never taken over, whatever the claim's fingerprint;
//   - an in-progress record without a lease is held until it expires, and
//     the claim's InProgressError says to retry after that, not after a
//     second.
func RunForeignRecords(t *testing.T, newStore func(t *testing.T, clock *Clock) (idempotency.Store, Put)) {
	t.Helper()
	ctx, c := context.Background(), NewClock(time.Now().Truncate(time.Second))
	st, put := newStore(t, c)
	id := idempotency.NewID("payments", "foreign-1")
	foreign := idempotency.Record{
		ID: id, Tenant: "payments", ClaimID: "f1", Fingerprint: "fp", State: "paused",
		Response:  idempotency.Response{Body: []byte(`{"charge":"ch_1"}`)},
		CreatedAt: c.Now(), UpdatedAt: c.Now(), ExpiresAt: c.Now().Add(TTL),
	}
	put(t, foreign)
	for _, fp := range []string{"fp", "another request"} {
		res, err := st.Claim(ctx, idempotency.Record{ID: id, Tenant: "payments", ClaimID: "c1", Fingerprint: fp})
		var unknown *idempotency.UnknownStateError
		if !errors.As(err, &unknown) || !errors.Is(err, idempotency.ErrUnknownState) || unknown.Existing.ClaimID != "f1" || unknown.Existing.State != "paused" {
			t.Fatalf("a claim (fingerprint %q) of a key held in state %q = %+v, %v; want an UnknownStateError naming f1", fp, foreign.State, res, err)
		}
	}
	if got, err := st.Get(ctx, id); err != nil || got.ClaimID != "f1" || got.State != "paused" {
		t.Fatalf("after the refused claims: %+v, %v; want the record untouched", got, err)
	}

	id = idempotency.NewID("payments", "foreign-2")
	noLease := idempotency.Record{
		ID: id, Tenant: "payments", ClaimID: "f2", Fingerprint: "fp", State: idempotency.StateInProgress,
		CreatedAt: c.Now(), UpdatedAt: c.Now(), ExpiresAt: c.Now().Add(TTL),
	}
	put(t, noLease)
	c.Advance(time.Minute)
	var ip *idempotency.InProgressError
	_, err := st.Claim(ctx, idempotency.Record{ID: id, Tenant: "payments", ClaimID: "c2", Fingerprint: "fp"})
	if want := TTL - time.Minute; !errors.As(err, &ip) || ip.RetryAfter != want {
		t.Fatalf("a claim of a key in progress without a lease: %v; want an InProgressError retrying after %v, when the record expires", err, want)
	}
	c.Advance(TTL)
	if res, err := st.Claim(ctx, idempotency.Record{ID: id, Tenant: "payments", ClaimID: "c3", Fingerprint: "fp"}); err != nil || res.Replayed || res.Record.ClaimID != "c3" {
		t.Fatalf("a claim after the record without a lease expired = %+v, %v; want a fresh claim", res, err)
	}
}
