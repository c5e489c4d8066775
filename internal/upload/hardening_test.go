package upload_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// eventFor is the S3 event of the object key holds now, as S3 sends it.
func (e *env) eventFor(t *testing.T, key string) upload.ObjectCreated {
	t.Helper()
	head := e.head(t, key)
	return upload.ObjectCreated{Bucket: e.bucket, Key: key, Size: aws.ToInt64(head.ContentLength), ETag: strings.Trim(aws.ToString(head.ETag), `"`), Time: e.Now()}
}

// exists reports whether the bucket holds key.
func (e *env) exists(t *testing.T, key string) bool {
	t.Helper()
	_, err := e.s3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &e.bucket, Key: &key})
	var notFound *s3types.NotFound
	if err != nil && !errors.As(err, &notFound) {
		t.Fatalf("head %s: %v", key, err)
	}
	return err == nil
}

// A URL creates its object once: the same PUT again, or one with other
// headers, is refused (412) and changes nothing S3 stored, so it can
// neither rewrite the object's headers nor announce it again.
func TestURLNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("stored once")
	_, u := e.create(t, "tenant", "key-never-overwrite1", requestFor(content, "text/plain"))
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatalf("first PUT: %d", code)
	}
	before := e.head(t, u.StorageKey)
	time.Sleep(1100 * time.Millisecond) // LastModified counts whole seconds
	for name, tweak := range map[string]func(*http.Request){
		"the same PUT": nil,
		"with a header the URL does not sign": func(r *http.Request) {
			r.Header.Set("Content-Disposition", "attachment; filename=evil.html")
			r.Header.Set("Cache-Control", "public, max-age=31536000")
		},
	} {
		if code := put(t, u, content, tweak); code != http.StatusPreconditionFailed {
			t.Errorf("%s again: %d, want 412", name, code)
		}
	}
	after := e.head(t, u.StorageKey)
	if !aws.ToTime(after.LastModified).Equal(aws.ToTime(before.LastModified)) || aws.ToString(after.ETag) != aws.ToString(before.ETag) ||
		after.ContentDisposition != nil || after.CacheControl != nil || aws.ToString(after.ContentType) != "text/plain" {
		t.Fatalf("the object changed: LastModified %v → %v, ETag %s → %s, Content-Disposition %q, Cache-Control %q, type %s",
			aws.ToTime(before.LastModified), aws.ToTime(after.LastModified), aws.ToString(before.ETag), aws.ToString(after.ETag),
			aws.ToString(after.ContentDisposition), aws.ToString(after.CacheControl), aws.ToString(after.ContentType))
	}
	if out, err := e.svc.Finalize(ctx, e.eventFor(t, u.StorageKey)); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("Finalize = %s, %v", out, err)
	}
}

// The headers S3 stores with an object and serves with it, which a
// presigned PUT cannot forbid; the server chooses none of them.
var foreignHeaders = []struct{ name, value string }{
	{"Content-Disposition", "attachment; filename=evil.html"},
	{"Content-Encoding", "gzip"},
	{"Cache-Control", "public, max-age=31536000"},
	{"Expires", "Wed, 21 Oct 2037 07:28:00 GMT"},
	{"Content-Language", "fr"},
}

// A PUT that adds a header the URL does not sign is accepted by S3, but
// finalize does not record its object: it removes it, as an object of the
// wrong size, and the upload stays pending, so the client can PUT again;
// then it completes.
func TestForeignHeadersAreRejected(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	for i, h := range foreignHeaders {
		t.Run(h.name, func(t *testing.T) {
			content := []byte("bytes with " + h.name)
			_, u := e.create(t, "tenant", fmt.Sprintf("key-foreign-header-%02d", i), requestFor(content, "text/plain"))
			if code := put(t, u, content, func(r *http.Request) { r.Header.Set(h.name, h.value) }); code != http.StatusOK {
				t.Fatalf("PUT with %s: S3 answered %d; this test wants S3 to accept it", h.name, code)
			}
			event := e.eventFor(t, u.StorageKey)
			e.resetCounts()
			if out, err := e.svc.Finalize(ctx, event); err != nil || out != upload.OutcomeRejected {
				t.Fatalf("Finalize of an object with %s = %s, %v; want rejected", h.name, out, err)
			}
			e.wantCalls(t, "rejection", map[string]int{"UpdateItem": 1}, map[string]int{"HeadObject": 1, "DeleteObject": 1})
			if e.exists(t, u.StorageKey) {
				t.Fatalf("the object with %s was kept", h.name)
			}
			// The same event again (S3 delivers at least once): no object,
			// nothing recorded.
			e.resetCounts()
			if out, err := e.svc.Finalize(ctx, event); err != nil || out != upload.OutcomeSkipped {
				t.Fatalf("the event again = %s, %v; want skipped", out, err)
			}
			e.wantCalls(t, "stale event", map[string]int{}, map[string]int{"HeadObject": 1})
			if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusPending || got.Upload == nil {
				t.Fatalf("status after the rejection: %+v, want pending with its URL", got)
			}
			if code := put(t, u, content, nil); code != http.StatusOK {
				t.Fatalf("the PUT as signed: %d", code)
			}
			if out, err := e.svc.Finalize(ctx, e.eventFor(t, u.StorageKey)); err != nil || out != upload.OutcomeCompleted {
				t.Fatalf("Finalize of the right object = %s, %v", out, err)
			}
			if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusCompleted {
				t.Fatalf("status: %s, want completed", got.Status)
			}
		})
	}
}

// The Cache-Control a browser adds by itself to a request with a
// conditional header (Chromium's max-age=0, the Fetch standard's no-cache)
// is not the uploader's choice: the object is recorded.
func TestBrowsersCacheControlIsAccepted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	for i, v := range []string{"max-age=0", "no-cache"} {
		t.Run(v, func(t *testing.T) {
			content := []byte("bytes sent by a browser, " + v)
			_, u := e.create(t, "tenant", fmt.Sprintf("key-browser-cache-%02d", i), requestFor(content, "text/plain"))
			if code := put(t, u, content, func(r *http.Request) { r.Header.Set("Cache-Control", v) }); code != http.StatusOK {
				t.Fatalf("PUT: %d", code)
			}
			if out, err := e.svc.Finalize(ctx, e.eventFor(t, u.StorageKey)); err != nil || out != upload.OutcomeCompleted {
				t.Fatalf("Finalize with Cache-Control %q = %s, %v; want completed", v, out, err)
			}
		})
	}
}

// A status that finds an object carrying a header the server did not
// choose (its event lost or late) does not complete the upload with it
// either: it removes it, and answers pending.
func TestStatusDoesNotHealWithForeignHeaders(t *testing.T) {
	e := newEnv(t, 15*time.Minute)
	content := []byte("served as an attachment")
	_, u := e.create(t, "tenant", "key-foreign-status-1", requestFor(content, "text/plain"))
	if code := put(t, u, content, func(r *http.Request) { r.Header.Set("Content-Disposition", "attachment; filename=evil.html") }); code != http.StatusOK {
		t.Fatal(code)
	}
	if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusPending {
		t.Fatalf("status: %s, want pending", got.Status)
	}
	if e.exists(t, u.StorageKey) {
		t.Fatal("the object was kept")
	}
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusCompleted {
		t.Fatalf("status after the right PUT: %s, want completed", got.Status)
	}
}

// An event for an object S3 does not hold (forged, or stale: its object
// removed since) completes nothing, and does not revive an expired claim;
// a late event for an expired claim whose object S3 holds is recorded.
func TestEventWithoutObjectCompletesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("never sent")
	req := requestFor(content, "text/plain")

	// A live claim.
	_, live := e.create(t, "tenant", "key-forged-event-001", req)
	forged := upload.ObjectCreated{Bucket: e.bucket, Key: live.StorageKey, Size: int64(len(content)), ETag: "0123456789abcdef0123456789abcdef", Time: e.Now()}
	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, forged); err != nil || out != upload.OutcomeSkipped {
		t.Fatalf("forged event = %s, %v; want skipped", out, err)
	}
	e.wantCalls(t, "forged event", map[string]int{}, map[string]int{"HeadObject": 1})
	if got := e.statusOf(t, "tenant", live.UploadID); got.Status != api.StatusPending {
		t.Fatalf("status after a forged event: %s, want pending", got.Status)
	}

	// An expired claim, without and with its object.
	_, gone := e.create(t, "tenant", "key-forged-event-002", req)
	_, late := e.create(t, "tenant", "key-forged-event-003", req)
	if code := put(t, late, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	e.Advance(time.Hour + time.Second)
	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: gone.StorageKey, Size: int64(len(content)), ETag: "x", Time: e.Now()}); err != nil || out != upload.OutcomeSkipped {
		t.Fatalf("event for an expired claim without an object = %s, %v; want skipped", out, err)
	}
	e.wantCalls(t, "event without an object", map[string]int{}, map[string]int{"HeadObject": 1})
	id, _ := upload.ParseUploadID(gone.UploadID)
	if _, err := e.store.Get(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the expired claim after the event: %v, want still expired (not revived)", err)
	}
	if again, u := e.create(t, "tenant", "key-forged-event-002", req); again.Effect != upload.EffectCreated || u.UploadID == gone.UploadID {
		t.Fatalf("the key after the event: %s %s, want a new upload", again.Effect, u.UploadID)
	}

	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, e.eventFor(t, late.StorageKey)); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("late event for an expired claim whose object exists = %s, %v; want completed", out, err)
	}
	e.wantCalls(t, "late event", map[string]int{"UpdateItem": 1}, map[string]int{"HeadObject": 1})
	if got := e.statusOf(t, "tenant", late.UploadID); got.Status != api.StatusCompleted {
		t.Fatalf("status after the late event: %s, want completed", got.Status)
	}
}
