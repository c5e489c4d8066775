package upload_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// Tenant isolation on real DynamoDB and S3: another tenant can never read,
// replay or complete a tenant's upload, whatever key or id it sends.

const (
	alice = "alice"
	bob   = "bob"
)

func (e *env) create(t *testing.T, tenant, key string, req api.CreateRequest) (upload.Result, api.Upload) {
	t.Helper()
	reply, err := e.svc.Create(context.Background(), tenant, key, req)
	if err != nil {
		t.Fatalf("%s creates %s: %v", tenant, key, err)
	}
	return reply, decode(t, reply.Body)
}

func (e *env) wantNotFound(t *testing.T, tenant, uploadID string) {
	t.Helper()
	e.resetCounts()
	if reply, err := e.svc.Status(context.Background(), tenant, uploadID); !errors.Is(err, upload.ErrNotFound) {
		t.Fatalf("%s's status of %s = %s, %v; want ErrNotFound", tenant, uploadID, reply.Body, err)
	}
	// One read and nothing else: a foreign record is neither checked in S3
	// nor completed on the way.
	e.wantCalls(t, tenant+"'s status of a foreign upload", map[string]int{"GetItem": 1}, map[string]int{})
}

func (e *env) statusOf(t *testing.T, tenant, uploadID string) api.Upload {
	t.Helper()
	reply, err := e.svc.Status(context.Background(), tenant, uploadID)
	if err != nil {
		t.Fatalf("%s's status of %s: %v", tenant, uploadID, err)
	}
	return decode(t, reply.Body)
}

func TestTenantCannotReadAnotherTenantsUpload(t *testing.T) {
	e := newEnv(t, 15*time.Minute)
	content := []byte("alice's private file")
	_, a := e.create(t, alice, "key-isolation-read-01", requestFor(content, "text/plain"))

	// Pending, then uploaded but not yet recorded (Status heals it for its
	// owner, and wantNotFound checks nobody else's look touched S3 or the
	// record), then completed: never anyone else's.
	for _, stage := range []string{"pending", "uploaded", "completed"} {
		switch stage {
		case "uploaded":
			if code := put(t, a, content, nil); code != http.StatusOK {
				t.Fatalf("alice's PUT: %d", code)
			}
		case "completed":
			if got := e.statusOf(t, alice, a.UploadID); got.Status != api.StatusCompleted {
				t.Fatalf("alice's own status after her PUT = %s, want completed", got.Status)
			}
		}
		for _, other := range []string{bob, "Alice", "alice ", " alice", "alice\x00", "", "anonymous"} {
			e.wantNotFound(t, other, a.UploadID)
		}
	}
}

func TestTenantCannotReplayAnotherTenantsKey(t *testing.T) {
	e := newEnv(t, 15*time.Minute)
	const key = "key-isolation-replay-01"
	content := []byte("same bytes, two tenants")
	req := requestFor(content, "text/plain")
	aReply, a := e.create(t, alice, key, req)

	// The same key and the same request from bob: a fresh claim of his own.
	bReply, b := e.create(t, bob, key, req)
	if bReply.Effect != upload.EffectCreated || b.UploadID == a.UploadID || b.StorageKey == a.StorageKey || b.UploadID[:32] == a.UploadID[:32] {
		t.Fatalf("bob's create = %s, id %s; alice's id %s: want a fresh claim at another record", bReply.Effect, b.UploadID, a.UploadID)
	}
	if bytes.Contains(bReply.Body, []byte(a.UploadID)) || b.Upload.URL == a.Upload.URL {
		t.Fatalf("bob's body carries alice's upload: %s", bReply.Body)
	}
	// A different request under the same key is no reuse for anyone else:
	// for them the key is unused.
	other := requestFor([]byte("something else entirely"), "application/pdf")
	if _, err := e.svc.Create(context.Background(), "carol", key, other); err != nil {
		t.Fatalf("carol's different request under alice's key: %v, want a fresh claim", err)
	}

	// Each replays their own answer, byte for byte.
	for _, c := range []struct {
		tenant string
		first  upload.Result
	}{{alice, aReply}, {bob, bReply}} {
		again, _ := e.create(t, c.tenant, key, req)
		if again.Effect != upload.EffectReplayed || !bytes.Equal(again.Body, c.first.Body) {
			t.Fatalf("%s's replay = %s, %s; want %s", c.tenant, again.Effect, again.Body, c.first.Body)
		}
	}

	// Once alice's upload is completed, bob still replays his pending one
	// and a newcomer gets a fresh claim, never alice's completed response.
	if code := put(t, a, content, nil); code != http.StatusOK {
		t.Fatalf("alice's PUT: %d", code)
	}
	head := e.head(t, a.StorageKey)
	if out, err := e.svc.Finalize(context.Background(), upload.ObjectCreated{Bucket: e.bucket, Key: a.StorageKey,
		Size: int64(len(content)), ETag: aws.ToString(head.ETag), Time: e.Now()}); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("finalize alice's upload = %s, %v", out, err)
	}
	if done, _ := e.create(t, alice, key, req); done.Effect != upload.EffectReplayed || decode(t, done.Body).Status != api.StatusCompleted {
		t.Fatalf("alice's replay after completion: %s", done.Body)
	}
	bAgain, _ := e.create(t, bob, key, req)
	if !bytes.Equal(bAgain.Body, bReply.Body) {
		t.Fatalf("bob's replay after alice completed = %s, want his pending body %s", bAgain.Body, bReply.Body)
	}
	dReply, d := e.create(t, "dave", key, req)
	if dReply.Effect != upload.EffectCreated || d.Status != api.StatusPending || d.UploadID == a.UploadID || bytes.Contains(dReply.Body, []byte(a.UploadID)) {
		t.Fatalf("a newcomer's create under alice's key = %s", dReply.Body)
	}
}

// Tenant names and keys that concatenate to the same text are different
// claims: the tenant is length-prefixed in the record's hash.
func TestTenantBoundaryCannotBeShifted(t *testing.T) {
	e := newEnv(t, 15*time.Minute)
	req := requestFor([]byte("shifted"), "text/plain")
	first, a := e.create(t, "tenant-1", "2-shifted-key-0001", req)
	second, b := e.create(t, "tenant-12", "-shifted-key-0001", req)
	if first.Effect != upload.EffectCreated || second.Effect != upload.EffectCreated || a.UploadID[:32] == b.UploadID[:32] {
		t.Fatalf("tenant-1 + 2-… and tenant-12 + -… share a record: %s, %s", a.UploadID, b.UploadID)
	}
	e.wantNotFound(t, "tenant-12", a.UploadID)
	e.wantNotFound(t, "tenant-1", b.UploadID)
}

func TestTenantCannotCompleteAnotherTenantsUpload(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	const key = "key-isolation-final-01"
	content := []byte("twenty-one bytes here")
	req := requestFor(content, "text/plain")
	_, a := e.create(t, alice, key, req)
	bReply, b := e.create(t, bob, key, req)

	// Bob cannot write alice's object with his own presigned URL: the
	// signature covers the object key.
	bobsURLForAlicesKey := b
	bobsURLForAlicesKey.Upload = &api.PutInstructions{Method: b.Upload.Method, Headers: b.Upload.Headers,
		URL: strings.Replace(b.Upload.URL, b.StorageKey, a.StorageKey, 1)}
	if bobsURLForAlicesKey.Upload.URL == b.Upload.URL {
		t.Fatal("the URL does not contain the storage key")
	}
	if code := put(t, bobsURLForAlicesKey, content, nil); code != http.StatusForbidden {
		t.Fatalf("bob's URL pointed at alice's key: %d, want 403", code)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("%d objects after a refused PUT", n)
	}

	// Events for keys that mix the two claims' halves complete nothing.
	for _, forged := range []string{
		"uploads/" + a.UploadID[:32] + b.UploadID[32:],
		"uploads/" + b.UploadID[:32] + a.UploadID[32:],
	} {
		out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: forged, Size: int64(len(content)), ETag: "x", Time: e.Now()})
		if err != nil || out != upload.OutcomeSkipped {
			t.Fatalf("Finalize(%s) = %s, %v; want skipped", forged, out, err)
		}
	}

	// Alice's object and its event complete alice's record only.
	if code := put(t, a, content, nil); code != http.StatusOK {
		t.Fatalf("alice's PUT: %d", code)
	}
	head := e.head(t, a.StorageKey)
	if out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: a.StorageKey, Size: int64(len(content)),
		ETag: aws.ToString(head.ETag), Time: e.Now()}); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("Finalize(alice's object) = %s, %v", out, err)
	}
	if got := e.statusOf(t, alice, a.UploadID); got.Status != api.StatusCompleted {
		t.Fatalf("alice's status after her event = %s, want completed", got.Status)
	}
	// Bob's record is untouched: his replay is still his first answer,
	// and his status is pending.
	if again, _ := e.create(t, bob, key, req); again.Effect != upload.EffectReplayed || !bytes.Equal(again.Body, bReply.Body) {
		t.Fatalf("bob's replay after alice's event = %s, want his first answer %s", again.Body, bReply.Body)
	}
	if got := e.statusOf(t, bob, b.UploadID); got.Status != api.StatusPending || got.UploadID != b.UploadID {
		t.Fatalf("bob's own status after alice completed = %+v, want pending", got)
	}
	e.wantNotFound(t, bob, a.UploadID)
	e.wantNotFound(t, alice, b.UploadID)
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects, want alice's only", n)
	}
}
