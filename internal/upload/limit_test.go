package upload_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// limitedEnv is a multipart env whose tenants may each keep limit
// multipart uploads unfinished.
func limitedEnv(t *testing.T, limit int) *env {
	return newEnv(t, 15*time.Minute, func(c *upload.Config) {
		c.MaxUploadBytes, c.MaxPendingMultipart = api.MaxMultipartBytes, limit
	})
}

// createOK creates a multipart upload of f under key for tenant.
func (e *env) createOK(t *testing.T, tenant, key string, f bigFile) api.Upload {
	t.Helper()
	created, err := e.svc.Create(context.Background(), tenant, key, f.req)
	if err != nil || created.Effect != upload.EffectCreated {
		t.Fatalf("create %s for %s: %v %s", key, tenant, err, created.Effect)
	}
	return decode(t, created.Body)
}

// refused checks that a create under key is refused by the limit at the
// cost of a claim, a count and a release, and leaves nothing behind: no
// record holds its key, no S3 upload was made.
func (e *env) refused(t *testing.T, tenant, key string, f bigFile) {
	t.Helper()
	before := e.multipartUploads(t)
	e.resetCounts()
	_, err := e.svc.Create(context.Background(), tenant, key, f.req)
	if !errors.Is(err, upload.ErrTooManyUploads) {
		t.Fatalf("create %s for %s: %v, want ErrTooManyUploads", key, tenant, err)
	}
	e.wantCalls(t, "a refused create", map[string]int{"PutItem": 1, "Query": 1, "DeleteItem": 1}, map[string]int{})
	if _, err := e.store.Get(context.Background(), idempotency.NewID(tenant, key)); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the refused create's key is held: %v", err)
	}
	if after := e.multipartUploads(t); after != before {
		t.Fatalf("a refused create changed the S3 multipart uploads: %d -> %d", before, after)
	}
}

// The cap on a tenant's unfinished multipart uploads, on the real servers:
// the (limit+1)th is refused before any S3 work, with a claim, a count and
// a release; a replay of an upload it holds is answered as always; another
// tenant and single PUTs are not counted; and a place frees when an upload
// is aborted, completed or expires, not when it is only renewed.
func TestPendingMultipartLimit(t *testing.T) {
	ctx := context.Background()
	e := limitedEnv(t, 2)
	f := newBigFile(t, 6<<20)

	e.resetCounts()
	a := e.createOK(t, "tenant", "key-limit-a-000001", f)
	e.wantCalls(t, "a multipart create under the cap", map[string]int{"PutItem": 1, "Query": 1, "UpdateItem": 1}, map[string]int{"CreateMultipartUpload": 1})
	b := e.createOK(t, "tenant", "key-limit-b-000001", f)

	e.refused(t, "tenant", "key-limit-c-000001", f)

	// A replay is answered from its record: no count, never refused.
	e.resetCounts()
	replay, err := e.svc.Create(ctx, "tenant", "key-limit-a-000001", f.req)
	if err != nil || replay.Effect != upload.EffectReplayed || decode(t, replay.Body).UploadID != a.UploadID {
		t.Fatalf("replay at the cap: %v %s", err, replay.Effect)
	}
	e.wantCalls(t, "a replay at the cap", map[string]int{"PutItem": 1}, map[string]int{})

	// Another tenant has its own count.
	e.createOK(t, "tenant-2", "key-limit-a-000001", f)
	e.createOK(t, "tenant-2", "key-limit-b-000001", f)
	e.refused(t, "tenant-2", "key-limit-c-000001", f)

	// A single PUT is neither counted nor costs more than its one put.
	small := requestFor([]byte("a small file"), "text/plain")
	for _, key := range []string{"key-limit-put-0001", "key-limit-put-0002"} {
		e.resetCounts()
		if reply, err := e.svc.Create(ctx, "tenant", key, small); err != nil || reply.Effect != upload.EffectCreated {
			t.Fatalf("a single PUT at the multipart cap: %v", err)
		}
		e.wantCalls(t, "a single-PUT create", map[string]int{"PutItem": 1}, map[string]int{})
	}
	e.refused(t, "tenant", "key-limit-c-000001", f)

	// An abort frees a place: the refused key now creates.
	if _, err := e.svc.Abort(ctx, "tenant", a.UploadID); err != nil {
		t.Fatal(err)
	}
	c := e.createOK(t, "tenant", "key-limit-c-000001", f)
	e.refused(t, "tenant", "key-limit-d-000001", f)

	// So does a completion.
	for n, p := range e.sign(t, "tenant", b.UploadID, f, 1, 2) {
		if code := testenv.PutPart(p, f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
	if _, err := e.svc.Complete(ctx, "tenant", b.UploadID, api.CompleteRequest{}); err != nil {
		t.Fatal(err)
	}
	e.createOK(t, "tenant", "key-limit-d-000001", f)
	e.refused(t, "tenant", "key-limit-e-000001", f)

	// Expiry frees a place at the second the record expires, with no
	// housekeeping; a renewed upload (one that signs parts) keeps its own.
	e.Advance(31 * time.Minute) // less than half of the 1 h window left
	e.sign(t, "tenant", c.UploadID, f, 1)
	e.Advance(29 * time.Minute)
	e.refused(t, "tenant", "key-limit-e-000001", f)
	e.Advance(time.Second) // d, not renewed, has expired; c has not
	e.createOK(t, "tenant", "key-limit-e-000001", f)
	e.refused(t, "tenant", "key-limit-f-000001", f)
	if _, err := e.svc.Abort(ctx, "tenant", c.UploadID); err != nil {
		t.Fatalf("the renewed upload: %v", err)
	}
	e.createOK(t, "tenant", "key-limit-f-000001", f)
}

// A cap lowered under a tenant's uploads (a redeploy with a smaller
// MAX_PENDING_MULTIPART_PER_TENANT) refuses new ones until enough end, and
// still replays every upload held; a refusal repeated changes nothing.
func TestLoweredLimit(t *testing.T) {
	ctx := context.Background()
	e := limitedEnv(t, 3)
	f := newBigFile(t, 6<<20)
	held := []api.Upload{
		e.createOK(t, "tenant", "key-lowered-a-0001", f),
		e.createOK(t, "tenant", "key-lowered-b-0001", f),
		e.createOK(t, "tenant", "key-lowered-c-0001", f),
	}
	cfg := e.cfg
	cfg.MaxPendingMultipart = 2
	e.svc = upload.New(e.store, e.signer, e.objectsClient, cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	for range 3 {
		e.refused(t, "tenant", "key-lowered-d-0001", f)
	}
	for i, key := range []string{"key-lowered-a-0001", "key-lowered-b-0001", "key-lowered-c-0001"} {
		replay, err := e.svc.Create(ctx, "tenant", key, f.req)
		if err != nil || replay.Effect != upload.EffectReplayed || replay.UploadID != held[i].UploadID {
			t.Fatalf("replay of %s over the lowered cap: %v %s", key, err, replay.Effect)
		}
	}
	for _, u := range held[:2] {
		if _, err := e.svc.Abort(ctx, "tenant", u.UploadID); err != nil {
			t.Fatal(err)
		}
	}
	e.createOK(t, "tenant", "key-lowered-d-0001", f)
	e.refused(t, "tenant", "key-lowered-e-0001", f)
}

// uncountable is a store that cannot count groups.
type uncountable struct{ recordstore.Store }

// A cap on a store that cannot count is an error on every multipart
// create, never a cap silently off, and leaves the key free.
func TestLimitNeedsACountingStore(t *testing.T) {
	ctx := context.Background()
	e := limitedEnv(t, 2)
	f := newBigFile(t, 6<<20)
	svc := upload.New(uncountable{e.store}, e.signer, e.objectsClient, e.cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	_, err := svc.Create(ctx, "tenant", "key-uncountable-01", f.req)
	if err == nil || errors.Is(err, upload.ErrTooManyUploads) || errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("create on a store that cannot count: %v, want an internal error", err)
	}
	if _, err := e.store.Get(ctx, idempotency.NewID("tenant", "key-uncountable-01")); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the failed create's key is held: %v", err)
	}
	if n := e.multipartUploads(t); n != 0 {
		t.Fatalf("%d S3 multipart uploads, want none", n)
	}
	if reply, err := svc.Create(ctx, "tenant", "key-uncountable-02", requestFor([]byte("x"), "text/plain")); err != nil || reply.Effect != upload.EffectCreated {
		t.Fatalf("a single PUT needs no count: %v", err)
	}
}
