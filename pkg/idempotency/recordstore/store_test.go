package recordstore_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

type clock = testenv.Clock

// newClock starts on a whole second, as records store expiry in seconds.
func newClock() *clock { return testenv.NewClock(time.Now().Truncate(time.Second)) }

const (
	testTTL   = time.Hour
	testLease = 10 * time.Second
)

type storeFactory func(t *testing.T, c *clock) recordstore.Store

// factories are the stores every conformance case runs against: the real
// one on a real local DynamoDB, and the in-memory one that must match it.
func factories() map[string]storeFactory {
	opts := func(c *clock) func(*idempotency.Options) {
		return func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = testTTL, testLease, c.Now }
	}
	return map[string]storeFactory{
		"memory": func(t *testing.T, c *clock) recordstore.Store {
			return memorystore.New(opts(c))
		},
		"dynoxide": func(t *testing.T, c *clock) recordstore.Store {
			client := testenv.DynamoClient(sharedDynoxide(t), nil)
			return dynamostore.New(client, testenv.NewTable(t, client), opts(c))
		},
		"dynalite": func(t *testing.T, c *clock) recordstore.Store {
			client := testenv.DynamoClient(sharedDynalite(t), nil)
			return dynamostore.New(client, testenv.NewTable(t, client), opts(c))
		},
		"dynoxide, single-table schema": func(t *testing.T, c *clock) recordstore.Store {
			client := testenv.DynamoClient(sharedDynoxide(t), nil)
			return dynamostore.New(client, testenv.NewTableWithKey(t, client, "PK", "SK", singleTableIndex), opts(c), singleTable)
		},
		"dynalite, single-table schema": func(t *testing.T, c *clock) recordstore.Store {
			client := testenv.DynamoClient(sharedDynalite(t), nil)
			return dynamostore.New(client, testenv.NewTableWithKey(t, client, "PK", "SK", singleTableIndex), opts(c), singleTable)
		},
	}
}

// singleTable lays records out as a single-table design would, with
// Powertools' attribute names, "status" among them (a reserved word), and
// a design's generic index for groups.
func singleTable(o *idempotency.Options) {
	o.Schema = idempotency.Schema{
		PartitionKey: "PK", SortKey: "SK", StaticPartitionValue: "ORDERS", KeyPrefix: "IDEMPOTENCY#",
		ExpiresAt: "expiration", LeaseExpiresAt: "in_progress_expiration", State: "status",
		ResponseBody: "result", Fingerprint: "validation", Group: "GSI1PK", GroupIndex: "GSI1",
	}
}

// singleTableIndex is singleTable's group index.
var singleTableIndex = testenv.Index{Name: "GSI1", PartitionKey: "GSI1PK", SortKey: "expiration"}

// inGroup is rec as a member of group.
func inGroup(rec recordstore.Record, group string) recordstore.Record {
	rec.Group = group
	return rec
}

// wantCount checks what CountGroup says of group, leaving out except.
func wantCount(t *testing.T, st recordstore.Store, group string, except idempotency.ID, want int) {
	t.Helper()
	got, err := st.(recordstore.GroupCounter).CountGroup(context.Background(), group, except)
	if err != nil || got != want {
		t.Fatalf("CountGroup(%q, except %q) = %d, %v; want %d", group, except, got, err, want)
	}
}

// mustData encodes v as a record's Data.
func mustData(v any) recordstore.Data {
	d, err := recordstore.NewData(v)
	if err != nil {
		panic(err)
	}
	return d
}

// fieldsOf decodes d as a map (numbers come back as float64).
func fieldsOf(d recordstore.Data) map[string]any {
	m := map[string]any{}
	if err := d.Decode(&m); err != nil {
		panic(err)
	}
	return m
}

// isS reports whether d holds the string want in its field name.
func isS(d recordstore.Data, name, want string) bool {
	v, ok := fieldsOf(d)[name].(string)
	return ok && v == want
}

func pending(id idempotency.ID, claim, fp, body string) recordstore.Record {
	return recordstore.Record{Record: idempotency.Record{ID: id, Tenant: "tenant-a", ClaimID: claim, Fingerprint: fp, State: recordstore.StatePending, Response: idempotency.Response{Body: []byte(body)}}, Data: mustData(map[string]any{"size": "42", "object": "uploads/x"})}
}

func inProgress(id idempotency.ID, claim, fp string) recordstore.Record {
	return recordstore.Record{Record: idempotency.Record{ID: id, Tenant: "tenant-a", ClaimID: claim, Fingerprint: fp, State: idempotency.StateInProgress}}
}

func mustClaim(t *testing.T, st recordstore.Store, rec recordstore.Record) recordstore.ClaimResult {
	t.Helper()
	res, err := st.ClaimRecord(context.Background(), rec)
	if err != nil {
		t.Fatalf("Claim(%s): %v", rec.ClaimID, err)
	}
	return res
}

func TestStoreConformance(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, st recordstore.Store, c *clock){
		"claim then replay": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-claim-replay")
			first := mustClaim(t, st, pending(id, "c1", "fp", `{"n":1}`))
			if first.Replayed {
				t.Fatal("first claim replayed")
			}
			if want := c.Now().Add(testTTL); !first.Record.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", first.Record.ExpiresAt, want)
			}
			c.Advance(time.Minute)
			again := mustClaim(t, st, pending(id, "c2", "fp", `{"n":2}`))
			if !again.Replayed || again.Record.ClaimID != "c1" || string(again.Record.Response.Body) != `{"n":1}` {
				t.Fatalf("replay = %+v, want claim c1 with the first body", again)
			}
			if !again.Record.ExpiresAt.Equal(first.Record.ExpiresAt) {
				t.Errorf("a replay moved the expiry: %v -> %v", first.Record.ExpiresAt, again.Record.ExpiresAt)
			}
			got, err := st.GetRecord(ctx, id)
			if err != nil || got.ClaimID != "c1" || !isS(got.Data, "size", "42") || got.Tenant != "tenant-a" {
				t.Fatalf("Get = %+v, %v", got, err)
			}
		},
		"another fingerprint is a reuse": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-reuse")
			mustClaim(t, st, pending(id, "c1", "fp-1", `{}`))
			_, err := st.ClaimRecord(ctx, pending(id, "c2", "fp-2", `{}`))
			var conflict *recordstore.ConflictError
			if !errors.Is(err, idempotency.ErrKeyReused) || !errors.As(err, &conflict) || conflict.Existing.ClaimID != "c1" {
				t.Fatalf("err = %v, want ErrKeyReused naming c1", err)
			}
		},
		"expired record is absent and claimable": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-expiry")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			c.Advance(testTTL)
			if _, err := st.GetRecord(ctx, id); err != nil {
				t.Fatalf("Get at exactly the expiry second: %v, want the record", err)
			}
			c.Advance(time.Second)
			if _, err := st.GetRecord(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("Get after expiry: %v, want ErrNotFound", err)
			}
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted}); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("Update after expiry: %v, want ErrNotFound", err)
			}
			// Another fingerprint may claim it: the old claim no longer exists.
			res := mustClaim(t, st, pending(id, "c2", "fp-other", `{}`))
			if res.Replayed || res.Record.ClaimID != "c2" {
				t.Fatalf("claim after expiry = %+v, want a fresh claim c2", res)
			}
		},
		"revive completes the claim's own expired record, never a newer claim": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-revive")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			c.Advance(testTTL + time.Second)
			done, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted, RestartExpiry: true, Revive: true})
			if err != nil || done.State != idempotency.StateCompleted || done.Expired(c.Now()) {
				t.Fatalf("revive: %+v %v", done, err)
			}
			if got, err := st.GetRecord(ctx, id); err != nil || got.State != idempotency.StateCompleted {
				t.Fatalf("Get after revive: %+v %v", got, err)
			}
			c.Advance(testTTL + time.Second)
			mustClaim(t, st, pending(id, "c2", "fp", `{}`))
			c.Advance(testTTL + time.Second)
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted, RestartExpiry: true, Revive: true}); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("revive of an older claim over a newer one: %v, want ErrNotFound", err)
			}
		},
		"in progress blocks, then the lease can be taken over": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-lease")
			mustClaim(t, st, inProgress(id, "c1", "fp"))
			c.Advance(3 * time.Second)
			_, err := st.ClaimRecord(ctx, inProgress(id, "c2", "fp"))
			var ip *idempotency.InProgressError
			if !errors.As(err, &ip) || !errors.Is(err, idempotency.ErrInProgress) || ip.RetryAfter != 7*time.Second {
				t.Fatalf("err = %v, want InProgressError retry after 7s", err)
			}
			if _, err := st.ClaimRecord(ctx, inProgress(id, "c2", "fp-other")); !errors.Is(err, idempotency.ErrKeyReused) {
				t.Fatalf("other fingerprint during lease: %v, want ErrKeyReused", err)
			}
			c.Advance(testLease)
			res := mustClaim(t, st, inProgress(id, "c3", "fp"))
			if res.Replayed || res.Record.ClaimID != "c3" {
				t.Fatalf("takeover = %+v, want fresh claim c3", res)
			}
			// The first claimant's late work finds its claim gone.
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: recordstore.StatePending}); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("late update of a taken-over claim: %v, want ErrNotFound", err)
			}
		},
		"a claim's own lease replaces the store's": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-own-lease")
			rec := inProgress(id, "c1", "fp")
			rec.Lease = 3 * time.Second
			if got := mustClaim(t, st, rec).Record; !got.LeaseExpiresAt.Equal(c.Now().Add(3*time.Second)) || got.Lease != 0 {
				t.Fatalf("LeaseExpiresAt, Lease = %v, %v; want now+3s, 0 (not stored)", got.LeaseExpiresAt, got.Lease)
			}
			_, err := st.ClaimRecord(ctx, inProgress(id, "c2", "fp"))
			var ip *idempotency.InProgressError
			if !errors.As(err, &ip) || ip.RetryAfter != 3*time.Second {
				t.Fatalf("err = %v, want InProgressError retry after 3s", err)
			}
			c.Advance(3*time.Second + time.Millisecond)
			if res := mustClaim(t, st, inProgress(id, "c3", "fp")); res.Replayed || res.Record.ClaimID != "c3" {
				t.Fatalf("takeover after the claim's own lease = %+v, want fresh claim c3", res)
			}
		},
		"record a response after in-progress work": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-record")
			mustClaim(t, st, inProgress(id, "c1", "fp"))
			got, err := st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, Response: &idempotency.Response{Body: []byte(`{"ok":true}`)},
				Data: map[string]any{"upload": "u-1"},
			})
			if err != nil || got.State != recordstore.StatePending || !got.LeaseExpiresAt.IsZero() || !isS(got.Data, "upload", "u-1") {
				t.Fatalf("Update = %+v, %v", got, err)
			}
			res := mustClaim(t, st, inProgress(id, "c2", "fp"))
			if !res.Replayed || string(res.Record.Response.Body) != `{"ok":true}` {
				t.Fatalf("replay after record = %+v", res)
			}
		},
		"complete once; duplicates, mismatches and strangers are refused": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-complete")
			claimed := mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			c.Advance(time.Minute)
			u := recordstore.Update{
				State: idempotency.StateCompleted, Data: map[string]any{"etag": "abc"},
				Require: map[string]any{"size": "42"}, RestartExpiry: true,
			}
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted, Require: map[string]any{"size": "41"}}); !errors.Is(err, recordstore.ErrMismatch) {
				t.Fatalf("size mismatch: %v, want ErrMismatch", err)
			}
			if _, err := st.Update(ctx, id, "someone-else", u); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("other claim id: %v, want ErrNotFound", err)
			}
			got, err := st.Update(ctx, id, "c1", u)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != idempotency.StateCompleted || !isS(got.Data, "etag", "abc") || !isS(got.Data, "size", "42") {
				t.Fatalf("completed record = %+v", got)
			}
			if want := c.Now().Add(testTTL); !got.ExpiresAt.Equal(want) || !got.ExpiresAt.After(claimed.Record.ExpiresAt) {
				t.Errorf("ExpiresAt = %v, want restarted to %v", got.ExpiresAt, want)
			}
			var conflict *recordstore.ConflictError
			_, err = st.Update(ctx, id, "c1", u)
			if !errors.Is(err, idempotency.ErrAlreadyCompleted) || !errors.As(err, &conflict) || !isS(conflict.Existing.Data, "etag", "abc") {
				t.Fatalf("duplicate: %v, want ErrAlreadyCompleted with the record", err)
			}
		},
		"a caller's own state passes, aborted is final": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-abort")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			const aborting idempotency.State = "aborting" // internal/upload's state between pending and aborted
			got, err := st.Update(ctx, id, "c1", recordstore.Update{State: aborting, Data: map[string]any{"reason": "client"}})
			if err != nil || got.State != aborting || !isS(got.Data, "reason", "client") || !isS(got.Data, "size", "42") {
				t.Fatalf("to %s: %+v, %v", aborting, got, err)
			}
			// A caller's own state is held like pending: a retry replays it.
			if res := mustClaim(t, st, pending(id, "c2", "fp", `{}`)); !res.Replayed || res.Record.State != aborting {
				t.Fatalf("claim while %s = %+v, want a replay of it", aborting, res)
			}
			got, err = st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StateAborted, Response: &idempotency.Response{Body: []byte(`{"status":"aborted"}`)},
			})
			if err != nil || got.State != recordstore.StateAborted || string(got.Response.Body) != `{"status":"aborted"}` {
				t.Fatalf("to aborted: %+v, %v", got, err)
			}
			for _, next := range []idempotency.State{recordstore.StateAborted, idempotency.StateCompleted, recordstore.StatePending, aborting} {
				_, err := st.Update(ctx, id, "c1", recordstore.Update{State: next})
				var conflict *recordstore.ConflictError
				if !errors.Is(err, recordstore.ErrAborted) || errors.Is(err, idempotency.ErrAlreadyCompleted) ||
					!errors.As(err, &conflict) || conflict.Existing.State != recordstore.StateAborted || conflict.Existing.ClaimID != "c1" {
					t.Fatalf("aborted -> %s: %v, want ErrAborted with the record", next, err)
				}
			}
			if got, err := st.GetRecord(ctx, id); err != nil || got.State != recordstore.StateAborted || string(got.Response.Body) != `{"status":"aborted"}` {
				t.Fatalf("Get after refused updates = %+v, %v; want the aborted record unchanged", got, err)
			}
			if res := mustClaim(t, st, pending(id, "c3", "fp", `{}`)); !res.Replayed || res.Record.State != recordstore.StateAborted ||
				string(res.Record.Response.Body) != `{"status":"aborted"}` {
				t.Fatalf("claim of an aborted record = %+v, want a replay of its response", res)
			}
		},
		"in progress and no state are not targets": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-targets")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			for _, bad := range []idempotency.State{idempotency.StateInProgress, ""} {
				_, err := st.Update(ctx, id, "c1", recordstore.Update{State: bad, Data: map[string]any{"x": "y"}})
				if err == nil || errors.Is(err, idempotency.ErrNotFound) || errors.Is(err, recordstore.ErrMismatch) {
					t.Errorf("Update to %q: %v, want it refused as a target", bad, err)
				}
			}
			if got, err := st.GetRecord(ctx, id); err != nil || got.State != recordstore.StatePending || fieldsOf(got.Data)["x"] != nil {
				t.Fatalf("Get after refused updates = %+v, %v; want the record unchanged", got, err)
			}
		},
		"data keeps its types": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-typed-data")
			type meta struct {
				ContentType string `dynamodbav:"content_type"`
			}
			type fields struct {
				Object    string `dynamodbav:"object,omitempty"`
				Size      int64  `dynamodbav:"size,omitempty"`
				Multipart bool   `dynamodbav:"multipart,omitempty"`
				Parts     []int  `dynamodbav:"parts,omitempty"`
				Meta      *meta  `dynamodbav:"meta,omitempty"`
				ETag      string `dynamodbav:"etag,omitempty"`
			}
			rec := pending(id, "c1", "fp", `{}`)
			want := fields{Object: "uploads/x", Size: 1048576, Multipart: true, Parts: []int{1, 2}, Meta: &meta{"image/png"}}
			rec.Data = mustData(want)
			decoded := func(d recordstore.Data) fields {
				var f fields
				if err := d.Decode(&f); err != nil {
					t.Fatal(err)
				}
				return f
			}
			if got := decoded(mustClaim(t, st, rec).Record.Data); !reflect.DeepEqual(got, want) {
				t.Errorf("claimed Data = %+v, want %+v", got, want)
			}
			if got, err := st.GetRecord(ctx, id); err != nil || !reflect.DeepEqual(decoded(got.Data), want) {
				t.Fatalf("Get Data = %+v, %v; want %+v", decoded(got.Data), err, want)
			}
			// A number is not the string of its digits, nor a string the
			// number it spells.
			for _, v := range []any{"1048576", 1048577, false} {
				_, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted, Require: map[string]any{"size": v, "multipart": v}})
				if !errors.Is(err, recordstore.ErrMismatch) {
					t.Fatalf("Require of %#v: %v, want ErrMismatch", v, err)
				}
			}
			// The same value as another Go type is the same number.
			got, err := st.Update(ctx, id, "c1", recordstore.Update{
				State:   idempotency.StateCompleted,
				Require: map[string]any{"size": uint32(1048576), "multipart": true},
				Data:    fields{ETag: "abc", Parts: []int{1, 2, 3}},
			})
			if err != nil {
				t.Fatal(err)
			}
			want.ETag, want.Parts = "abc", []int{1, 2, 3}
			if got := decoded(got.Data); !reflect.DeepEqual(got, want) {
				t.Errorf("updated Data = %+v, want %+v", got, want)
			}
		},
		"release frees only an in-progress claim of the same id": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-release")
			mustClaim(t, st, inProgress(id, "c1", "fp"))
			if err := st.Release(ctx, id, "not-me"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.GetRecord(ctx, id); err != nil {
				t.Fatalf("released by a stranger: %v", err)
			}
			if err := st.Release(ctx, id, "c1"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.GetRecord(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("after release: %v, want ErrNotFound", err)
			}
			mustClaim(t, st, pending(id, "c2", "fp", `{}`))
			if err := st.Release(ctx, id, "c2"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.GetRecord(ctx, id); err != nil {
				t.Fatalf("release deleted a pending record: %v", err)
			}
		},
		"an update from a state another request left is refused": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-from-state")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: "aborting"}); err != nil {
				t.Fatal(err)
			}
			_, err := st.Update(ctx, id, "c1", recordstore.Update{State: recordstore.StatePending, From: recordstore.StatePending, RestartExpiry: true})
			if !errors.Is(err, recordstore.ErrMismatch) {
				t.Fatalf("renewal from pending of an aborting record: %v, want ErrMismatch", err)
			}
			got, err := st.GetRecord(ctx, id)
			if err != nil || got.State != "aborting" {
				t.Fatalf("after the refused renewal: %+v, %v; want it still aborting", got.State, err)
			}
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: recordstore.StateAborted, From: "aborting"}); err != nil {
				t.Fatalf("update from the state it is in: %v", err)
			}
		},
		"data fields are names, not paths": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-dotted-field")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			got, err := st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, Data: map[string]any{"content.type": "a/b"},
				Require: map[string]any{"size": "42"},
			})
			if err != nil || !isS(got.Data, "content.type", "a/b") {
				t.Fatalf("set a dotted field: %+v, %v", got.Data, err)
			}
			_, err = st.Update(ctx, id, "c1", recordstore.Update{
				State: idempotency.StateCompleted, Require: map[string]any{"content.type": "a/b"},
			})
			if err != nil {
				t.Fatalf("require a dotted field: %v", err)
			}
			_, err = st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, Data: map[string]any{"parts[0]": "x"},
			})
			if err == nil || errors.Is(err, idempotency.ErrAlreadyCompleted) {
				t.Fatalf("a bracketed field name: %v, want it refused before the store is asked", err)
			}
		},
		"removed data fields go in the write that sets the others": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-remove-data")
			rec := pending(id, "c1", "fp", `{}`)
			rec.Data = mustData(map[string]any{"size": "42", "url": "https://x.invalid/", "token": []byte{1, 2, 3}})
			mustClaim(t, st, rec)
			for _, bad := range []recordstore.Update{
				{State: idempotency.StateCompleted, Data: map[string]any{"url": "y"}, RemoveData: []string{"url"}},
				{State: idempotency.StateCompleted, RemoveData: []string{"parts[0]"}},
				{State: idempotency.StateCompleted, RemoveData: []string{""}},
			} {
				if _, err := st.Update(ctx, id, "c1", bad); err == nil || errors.Is(err, recordstore.ErrMismatch) {
					t.Fatalf("Update removing %q (setting %v): %v, want it refused before the store is asked", bad.RemoveData, bad.Data, err)
				}
			}
			// A name twice, and a name the record does not hold, are no error.
			got, err := st.Update(ctx, id, "c1", recordstore.Update{
				State: idempotency.StateCompleted, Data: map[string]any{"etag": "abc"}, Require: map[string]any{"size": "42"},
				RemoveData: []string{"url", "token", "url", "never-set"},
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"size": "42", "etag": "abc"}
			if fields := fieldsOf(got.Data); !reflect.DeepEqual(fields, want) {
				t.Errorf("updated Data = %v, want %v", fields, want)
			}
			if got, err := st.GetRecord(ctx, id); err != nil || !reflect.DeepEqual(fieldsOf(got.Data), want) {
				t.Errorf("Get Data = %v, %v; want %v", fieldsOf(got.Data), err, want)
			}
		},
		"a field required absent or equal is set once: the first value wins": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-absent-or-equal")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			setSum := func(v any) (recordstore.Record, error) {
				return st.Update(ctx, id, "c1", recordstore.Update{
					State: recordstore.StatePending, From: recordstore.StatePending,
					Data: map[string]any{"sum": v}, RequireAbsentOrEqual: map[string]any{"sum": v},
				})
			}
			got, err := setSum("first")
			if err != nil || !isS(got.Data, "sum", "first") || !isS(got.Data, "size", "42") {
				t.Fatalf("set an absent field: %+v, %v", got.Data, err)
			}
			if got, err := setSum("first"); err != nil || !isS(got.Data, "sum", "first") {
				t.Fatalf("set it again to the same value: %+v, %v", got.Data, err)
			}
			var conflict *recordstore.ConflictError
			_, err = setSum("second")
			if !errors.Is(err, recordstore.ErrMismatch) || !errors.As(err, &conflict) ||
				conflict.Existing.State != recordstore.StatePending || !isS(conflict.Existing.Data, "sum", "first") {
				t.Fatalf("another value: %v, want ErrMismatch with the record holding the first", err)
			}
			// Equal means of the same type too, as for Require.
			if _, err := setSum(1); !errors.Is(err, recordstore.ErrMismatch) {
				t.Fatalf("a number where a string is stored: %v, want ErrMismatch", err)
			}
			if got, err := st.GetRecord(ctx, id); err != nil || !isS(got.Data, "sum", "first") {
				t.Fatalf("after the refused updates: %+v, %v; want the first value kept", got.Data, err)
			}
			// With Require, both must hold; a dotted name is one field.
			_, err = st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, Require: map[string]any{"size": "41"},
				RequireAbsentOrEqual: map[string]any{"content.type": "a/b"},
			})
			if !errors.Is(err, recordstore.ErrMismatch) {
				t.Fatalf("Require failing beside an absent field: %v, want ErrMismatch", err)
			}
			got, err = st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, Require: map[string]any{"size": "42"},
				Data:                 map[string]any{"content.type": "a/b"},
				RequireAbsentOrEqual: map[string]any{"content.type": "a/b", "sum": "first"},
			})
			if err != nil || !isS(got.Data, "content.type", "a/b") || fieldsOf(got.Data)["content"] != nil {
				t.Fatalf("Require and RequireAbsentOrEqual holding: %+v, %v", got.Data, err)
			}
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{
				State: recordstore.StatePending, RequireAbsentOrEqual: map[string]any{"parts[0]": "x"},
			}); err == nil || errors.Is(err, recordstore.ErrMismatch) {
				t.Fatalf("a bracketed field name: %v, want it refused before the store is asked", err)
			}
			// A final record is refused as a duplicate, not as a mismatch.
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted}); err != nil {
				t.Fatal(err)
			}
			if _, err := setSum("first"); !errors.Is(err, idempotency.ErrAlreadyCompleted) {
				t.Fatalf("after completion: %v, want ErrAlreadyCompleted", err)
			}
		},
		"of concurrent updates requiring a field absent or equal, the first wins": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-absent-or-equal-race")
			mustClaim(t, st, pending(id, "c1", "fp", `{}`))
			const racers = 8
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Go(func() {
					v := strconv.Itoa(i)
					_, errs[i] = st.Update(ctx, id, "c1", recordstore.Update{
						State: recordstore.StatePending, From: recordstore.StatePending,
						Data: map[string]any{"sum": v}, RequireAbsentOrEqual: map[string]any{"sum": v},
					})
				})
			}
			wg.Wait()
			got, err := st.GetRecord(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			winners := 0
			for i, err := range errs {
				switch {
				case err == nil:
					winners++
					if !isS(got.Data, "sum", strconv.Itoa(i)) {
						t.Errorf("update %d succeeded, but the record holds %#v", i, fieldsOf(got.Data)["sum"])
					}
				case !errors.Is(err, recordstore.ErrMismatch):
					t.Errorf("update %d: %v, want success or ErrMismatch", i, err)
				}
			}
			if winners != 1 {
				t.Fatalf("%d of %d concurrent updates set the field, want exactly one", winners, racers)
			}
		},
		"a group counts its unfinished records; finishing or releasing one leaves it": func(t *testing.T, st recordstore.Store, c *clock) {
			ids := map[string]idempotency.ID{}
			for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
				ids[k] = idempotency.NewID("tenant-a", "key-group-"+k)
			}
			mustClaim(t, st, inGroup(inProgress(ids["a"], "ca", "fp"), "g"))
			mustClaim(t, st, inGroup(pending(ids["b"], "cb", "fp", `{}`), "g"))
			mustClaim(t, st, inGroup(pending(ids["c"], "cc", "fp", `{}`), "g"))
			mustClaim(t, st, inGroup(pending(ids["d"], "cd", "fp", `{}`), "h"))
			mustClaim(t, st, pending(ids["e"], "ce", "fp", `{}`)) // in no group
			wantCount(t, st, "g", "", 3)
			wantCount(t, st, "g", ids["a"], 2)
			wantCount(t, st, "g", ids["e"], 3)
			wantCount(t, st, "h", "", 1)
			wantCount(t, st, "nobody", "", 0)
			if got, err := st.GetRecord(ctx, ids["b"]); err != nil || got.Group != "g" {
				t.Fatalf("Get = group %q, %v; want g", got.Group, err)
			}
			// Recording a response, a caller's own state: still unfinished.
			if _, err := st.Update(ctx, ids["a"], "ca", recordstore.Update{State: recordstore.StatePending}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Update(ctx, ids["b"], "cb", recordstore.Update{State: "aborting"}); err != nil {
				t.Fatal(err)
			}
			wantCount(t, st, "g", "", 3)
			// A final state leaves the group, in the same write.
			aborted, err := st.Update(ctx, ids["b"], "cb", recordstore.Update{State: recordstore.StateAborted})
			if err != nil || aborted.Group != "" {
				t.Fatalf("aborted = group %q, %v; want none", aborted.Group, err)
			}
			wantCount(t, st, "g", "", 2)
			if _, err := st.Update(ctx, ids["c"], "cc", recordstore.Update{State: idempotency.StateCompleted, RestartExpiry: true}); err != nil {
				t.Fatal(err)
			}
			wantCount(t, st, "g", "", 1)
			if got, err := st.GetRecord(ctx, ids["c"]); err != nil || got.Group != "" || got.State != idempotency.StateCompleted {
				t.Fatalf("Get = %s in group %q, %v; want completed in none", got.State, got.Group, err)
			}
			// A released claim is gone, and so is its place.
			mustClaim(t, st, inGroup(inProgress(ids["f"], "cf", "fp"), "g"))
			wantCount(t, st, "g", "", 2)
			if err := st.Release(ctx, ids["f"], "cf"); err != nil {
				t.Fatal(err)
			}
			wantCount(t, st, "g", "", 1)
			// A replay does not join: the holder stays as it was.
			if res := mustClaim(t, st, inGroup(pending(ids["e"], "ce2", "fp", `{}`), "g")); !res.Replayed || res.Record.Group != "" {
				t.Fatalf("replay = %+v, want the holder, in no group", res)
			}
			wantCount(t, st, "g", "", 1)
		},
		"a group forgets an expired record, keeps a renewed one, and counts a lapsed lease": func(t *testing.T, st recordstore.Store, c *clock) {
			renewed, idle := idempotency.NewID("tenant-a", "key-group-renewed"), idempotency.NewID("tenant-a", "key-group-idle")
			lapsed := idempotency.NewID("tenant-a", "key-group-lapsed")
			mustClaim(t, st, inGroup(pending(renewed, "c1", "fp", `{}`), "g"))
			mustClaim(t, st, inGroup(pending(idle, "c2", "fp", `{}`), "g"))
			c.Advance(testTTL / 2)
			if _, err := st.Update(ctx, renewed, "c1", recordstore.Update{State: recordstore.StatePending, From: recordstore.StatePending, RestartExpiry: true}); err != nil {
				t.Fatal(err)
			}
			c.Advance(testTTL / 2) // the idle one's last second
			wantCount(t, st, "g", "", 2)
			c.Advance(time.Second)
			wantCount(t, st, "g", "", 1)
			// The idle one's key, claimed afresh, counts once, as the new claim.
			mustClaim(t, st, inGroup(pending(idle, "c3", "fp-other", `{}`), "g"))
			wantCount(t, st, "g", "", 2)
			// An in-progress claim whose lease ran out may have started its
			// work: it counts until it expires, and a takeover replaces it.
			mustClaim(t, st, inGroup(inProgress(lapsed, "c4", "fp"), "g"))
			c.Advance(testLease + time.Second)
			wantCount(t, st, "g", "", 3)
			if res := mustClaim(t, st, inGroup(inProgress(lapsed, "c5", "fp"), "g")); res.Replayed || res.Record.ClaimID != "c5" {
				t.Fatalf("takeover = %+v", res)
			}
			wantCount(t, st, "g", "", 3)
			c.Advance(testTTL + time.Second)
			wantCount(t, st, "g", "", 0)
		},
		"a revived record finishes out of its group": func(t *testing.T, st recordstore.Store, c *clock) {
			id := idempotency.NewID("tenant-a", "key-group-revived")
			mustClaim(t, st, inGroup(pending(id, "c1", "fp", `{}`), "g"))
			c.Advance(testTTL + time.Second)
			wantCount(t, st, "g", "", 0)
			if _, err := st.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted, RestartExpiry: true, Revive: true}); err != nil {
				t.Fatal(err)
			}
			wantCount(t, st, "g", "", 0)
		},
		"tenants never share a key": func(t *testing.T, st recordstore.Store, c *clock) {
			a, b := idempotency.NewID("tenant-a", "same-key"), idempotency.NewID("tenant-b", "same-key")
			if a == b {
				t.Fatal("two tenants got the same id")
			}
			mustClaim(t, st, pending(a, "c1", "fp", `{}`))
			if res := mustClaim(t, st, pending(b, "c2", "fp", `{}`)); res.Replayed {
				t.Fatal("tenant b replayed tenant a's record")
			}
		},
	}
	for storeName, factory := range factories() {
		t.Run(storeName, func(t *testing.T) {
			for name, tc := range cases {
				t.Run(name, func(t *testing.T) {
					c := newClock()
					tc(t, factory(t, c), c)
				})
			}
		})
	}
}

// A conflict from these stores is a recordstore.ConflictError, with the
// holder's own fields, and an idempotency.ConflictError, as code written
// against package idempotency reads it.
func TestConflictIsBothConflictErrors(t *testing.T) {
	st := memorystore.New()
	id := idempotency.NewID("tenant-a", "k")
	mustClaim(t, st, pending(id, "c1", "fp", `{}`))
	_, err := st.ClaimRecord(context.Background(), pending(id, "c2", "other", `{}`))
	var full *recordstore.ConflictError
	var public *idempotency.ConflictError
	if !errors.As(err, &full) || !errors.As(err, &public) || !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("claim under another fingerprint: %v; want both conflict errors, matching ErrKeyReused", err)
	}
	var fields map[string]string
	if err := full.Existing.Data.Decode(&fields); err != nil || fields["object"] != "uploads/x" {
		t.Errorf("recordstore.ConflictError's record: data %v, %v; want the holder's", fields, err)
	}
	if public.Existing.ClaimID != "c1" || public.Err != idempotency.ErrKeyReused || public.Error() != err.Error() {
		t.Errorf("idempotency.ConflictError = %+v (%q); want the holder c1, ErrKeyReused, the same message as %q", public, public.Error(), err)
	}
}
