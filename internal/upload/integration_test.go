package upload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

var (
	dynoxide = testenv.SharedDynoxide()
	// objectStore is TEST_S3's server: Versity Gateway, or MinIO.
	objectStore = testenv.SharedS3()
)

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, objectStore) }

// env is one service on real local DynamoDB and S3, with every call counted.
type env struct {
	svc           *upload.Service
	store         *dynamostore.Store
	cfg           upload.Config
	signer        *upload.S3Presigner
	s3            *s3.Client // the test's own view of the bucket, not counted
	objectsClient *s3.Client // the service's S3 client, counted in objects
	bucket        string
	dynamo        testenv.Counter
	objects       testenv.Counter
	*testenv.Clock
}

func newEnv(t *testing.T, presignTTL time.Duration, tweaks ...func(*upload.Config)) *env {
	t.Helper()
	e := &env{Clock: testenv.NewClock(time.Now())}
	dynamoURL := dynoxide.Endpoint(t)
	ddb := testenv.DynamoClient(dynamoURL, nil)
	e.s3 = testenv.S3Client(objectStore.Endpoint(t), nil)
	e.objectsClient = testenv.S3Client(objectStore.Endpoint(t), &e.objects)
	e.bucket = testenv.NewBucket(t, e.s3)
	store := dynamostore.New(testenv.DynamoClient(dynamoURL, &e.dynamo), testenv.NewTable(t, ddb), func(o *idempotency.Options) {
		o.TTL, o.Now = time.Hour, e.Now
	})
	cfg := upload.Config{Bucket: e.bucket, Prefix: "uploads/", PresignTTL: presignTTL, MaxUploadBytes: 1 << 20}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	// The functions presign with their S3 client too; a presign sends
	// nothing, so it adds no count.
	presigner := upload.NewPresigner(e.objectsClient, e.bucket)
	e.store, e.cfg, e.signer = store, cfg, presigner
	e.svc = upload.New(store, presigner, e.objectsClient, cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	return e
}

func (e *env) resetCounts() { e.dynamo.Reset(); e.objects.Reset() }

func (e *env) wantCalls(t *testing.T, what string, dynamo, objects map[string]int) {
	t.Helper()
	if got := e.dynamo.Ops(); !maps.Equal(got, dynamo) {
		t.Errorf("%s: DynamoDB calls %v, want %v", what, got, dynamo)
	}
	if got := e.objects.Ops(); !maps.Equal(got, objects) {
		t.Errorf("%s: S3 calls %v, want %v", what, got, objects)
	}
}

func requestFor(content []byte, contentType string) api.CreateRequest {
	sum := sha256.Sum256(content)
	return api.CreateRequest{Filename: "report.pdf", ContentType: contentType, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

func decode(t *testing.T, body []byte) api.Upload {
	t.Helper()
	var u api.Upload
	if err := json.Unmarshal(body, &u); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return u
}

// put sends body to the presigned URL with plain net/http and the headers
// the response lists, changed by tweak.
func put(t *testing.T, u api.Upload, body []byte, tweak func(*http.Request)) int {
	t.Helper()
	code, err := testenv.PutPresigned(u, body, tweak)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func (e *env) objectCount(t *testing.T) int {
	t.Helper()
	out, err := e.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

func (e *env) head(t *testing.T, key string) *s3.HeadObjectOutput {
	t.Helper()
	out, err := e.s3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &e.bucket, Key: &key})
	if err != nil {
		t.Fatalf("head %s: %v", key, err)
	}
	return out
}

func TestPresignedPutOnRealS3(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("%PDF-1.7 exactly these bytes")
	e.resetCounts()
	reply, err := e.svc.Create(ctx, "tenant", "key-presigned-put-0001", requestFor(content, "application/pdf"))
	if err != nil {
		t.Fatal(err)
	}
	e.wantCalls(t, "create", map[string]int{"PutItem": 1}, map[string]int{})
	u := decode(t, reply.Body)
	if _, listed := u.Upload.Headers["Content-Length"]; listed || u.Upload.Headers["Content-Type"] != "application/pdf" || u.Upload.Headers["x-amz-checksum-sha256"] == "" ||
		u.Upload.Headers["If-None-Match"] != "*" || len(u.Upload.Headers) != 3 {
		t.Fatalf("headers = %v: want Content-Type, x-amz-checksum-sha256 and If-None-Match: *, never Content-Length", u.Upload.Headers)
	}

	wrongBytes := bytes.Clone(content)
	wrongBytes[0] = 'X'
	refused := map[string]struct {
		body  []byte
		tweak func(*http.Request)
	}{
		"wrong bytes":      {wrongBytes, nil},
		"wrong type":       {content, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }},
		"longer":           {append(bytes.Clone(content), '!'), nil},
		"shorter":          {content[1:], nil},
		"no checksum":      {content, func(r *http.Request) { r.Header.Del("x-amz-checksum-sha256") }},
		"no If-None-Match": {content, func(r *http.Request) { r.Header.Del("If-None-Match") }},
		"tampered address": {content, func(r *http.Request) { r.URL.Path += "x" }},
	}
	for name, tc := range refused {
		if code := put(t, u, tc.body, tc.tweak); code < 400 || code >= 500 {
			t.Errorf("%s: S3 answered %d, want a 4xx refusal", name, code)
		}
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("refused PUTs left %d objects", n)
	}
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatalf("right bytes: S3 answered %d", code)
	}
	// A client retry whose first answer was lost: the object is stored, and
	// the URL never overwrites it.
	if code := put(t, u, content, nil); code != http.StatusPreconditionFailed {
		t.Fatalf("the same PUT again (a client retry): %d, want 412", code)
	}
	head := e.head(t, u.StorageKey)
	if aws.ToInt64(head.ContentLength) != int64(len(content)) || aws.ToString(head.ContentType) != "application/pdf" {
		t.Errorf("stored %d bytes of %s", aws.ToInt64(head.ContentLength), aws.ToString(head.ContentType))
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// withPresigner is the env's service presigning with presigner.
func (e *env) withPresigner(presigner upload.Presigner) *upload.Service {
	return upload.New(e.store, presigner, e.objectsClient, e.cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
}

// clockSigner is the SDK's S3 presigner signing at the env's clock instead
// of the wall clock's time.
type clockSigner struct {
	signer *v4.Signer
	now    func() time.Time
}

func (c clockSigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string,
	_ time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return c.signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, c.now(), optFns...)
}

// S3 judges a URL's expiry by its own clock, the wall clock. The service
// here signs at the env's clock, set behind the wall clock by more than a
// URL's lifetime: its first URL is expired for S3 the moment it is made,
// and no real time needs to pass.
func TestExpiredURLIsRefusedAndReplayResigns(t *testing.T) {
	ctx := context.Background()
	const lifetime = time.Minute
	e := newEnv(t, lifetime)
	e.Advance(-2 * lifetime)
	e.svc = e.withPresigner(upload.NewPresignerWith(e.objectsClient, e.bucket, func(o *s3.PresignOptions) {
		// As the S3 client's own signer: S3 paths are not escaped twice.
		o.Presigner = clockSigner{signer: v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true }), now: e.Now}
	}))
	content := []byte("expiring")
	reply, err := e.svc.Create(ctx, "tenant", "key-expired-url-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	first := decode(t, reply.Body)
	// The body states the expiry S3 enforces: signed at the clock's second,
	// for the lifetime.
	want := e.Now().Truncate(time.Second).Add(lifetime)
	if got, err := time.Parse(time.RFC3339, first.Upload.ExpiresAt); err != nil || !got.Equal(want) {
		t.Fatalf("expiresAt %s, want %s", first.Upload.ExpiresAt, want.UTC())
	}
	if code := put(t, first, content, nil); code != http.StatusForbidden {
		t.Fatalf("expired URL: %d, want 403", code)
	}
	e.Advance(2 * lifetime) // the clock meets the wall clock: the URL is past its expiry for the service too
	again, err := e.svc.Create(ctx, "tenant", "key-expired-url-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	fresh := decode(t, again.Body)
	if again.Effect != upload.EffectReplayed || fresh.UploadID != first.UploadID || fresh.Upload.URL == first.Upload.URL {
		t.Fatalf("replay after expiry: %s, id %s (was %s), url changed=%v", again.Effect, fresh.UploadID, first.UploadID, fresh.Upload.URL != first.Upload.URL)
	}
	if code := put(t, fresh, content, nil); code != http.StatusOK {
		t.Fatalf("fresh URL: %d", code)
	}
}

func TestFinalizeAndReplayCompleted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("the file")
	req := requestFor(content, "text/plain")
	reply, err := e.svc.Create(ctx, "tenant", "key-finalize-000001", req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, reply.Body)
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	head := e.head(t, u.StorageKey)
	obj := upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: int64(len(content)), ETag: strings.Trim(aws.ToString(head.ETag), `"`), Time: e.Now()}

	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, obj); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("Finalize = %s, %v", out, err)
	}
	// One DynamoDB call, and the HeadObject that confirms the object.
	e.wantCalls(t, "finalize", map[string]int{"UpdateItem": 1}, map[string]int{"HeadObject": 1})
	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, obj); err != nil || out != upload.OutcomeDuplicate {
		t.Fatalf("duplicate Finalize = %s, %v", out, err)
	}
	e.wantCalls(t, "duplicate finalize", map[string]int{"UpdateItem": 1}, map[string]int{"HeadObject": 1})

	e.resetCounts()
	replay, err := e.svc.Create(ctx, "tenant", "key-finalize-000001", req)
	if err != nil {
		t.Fatal(err)
	}
	e.wantCalls(t, "replay completed", map[string]int{"PutItem": 1}, map[string]int{})
	done := decode(t, replay.Body)
	if done.Status != api.StatusCompleted || done.UploadID != u.UploadID || done.ETag != obj.ETag || done.Upload != nil || done.CompletedAt == "" {
		t.Fatalf("completed replay = %+v", done)
	}
	e.resetCounts()
	status, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || !bytes.Equal(status.Body, replay.Body) {
		t.Fatalf("Status = %s, %v; want the completed body", status.Body, err)
	}
	e.wantCalls(t, "status completed", map[string]int{"GetItem": 1}, map[string]int{})
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// A lost S3 event: the status endpoint sees the object and completes the
// record itself.
func TestStatusCompletesWhenTheEventIsLost(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("event lost")
	reply, err := e.svc.Create(ctx, "tenant", "key-lost-event-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, reply.Body)

	e.resetCounts()
	pending, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || pending.Effect != upload.EffectServed || !bytes.Equal(pending.Body, reply.Body) {
		t.Fatalf("Status before the PUT = %s %s, %v; want the pending body", pending.Effect, pending.Body, err)
	}
	e.wantCalls(t, "status pending", map[string]int{"GetItem": 1}, map[string]int{"HeadObject": 1})

	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	e.resetCounts()
	healed, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	e.wantCalls(t, "status heal", map[string]int{"GetItem": 1, "UpdateItem": 1}, map[string]int{"HeadObject": 1})
	done := decode(t, healed.Body)
	if healed.Effect != upload.EffectHealed || done.Status != api.StatusCompleted || done.ETag != strings.Trim(aws.ToString(e.head(t, u.StorageKey).ETag), `"`) {
		t.Fatalf("healed = %s %+v", healed.Effect, done)
	}
	// The late event is now a duplicate.
	out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: int64(len(content)), ETag: done.ETag, Time: e.Now()})
	if err != nil || out != upload.OutcomeDuplicate {
		t.Fatalf("late event = %s, %v; want duplicate", out, err)
	}
	if _, err := e.svc.Status(ctx, "someone-else", u.UploadID); !errors.Is(err, upload.ErrNotFound) {
		t.Fatalf("another tenant's status: %v, want ErrNotFound", err)
	}
}

// A key reused after expiry gets a new upload id and object; a late event
// for the old id completes nothing.
func TestLateEventCannotCompleteANewClaim(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("v1")
	old, err := e.svc.Create(ctx, "tenant", "key-reclaimed-00001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	oldU := decode(t, old.Body)
	if code := put(t, oldU, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	e.Advance(time.Hour + time.Second)
	if _, err := e.svc.Status(ctx, "tenant", oldU.UploadID); !errors.Is(err, upload.ErrNotFound) {
		t.Fatalf("status of an expired upload: %v, want ErrNotFound", err)
	}
	fresh, err := e.svc.Create(ctx, "tenant", "key-reclaimed-00001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	newU := decode(t, fresh.Body)
	if fresh.Effect != upload.EffectCreated || newU.UploadID == oldU.UploadID || newU.StorageKey == oldU.StorageKey {
		t.Fatalf("reclaim = %s, id %s (old %s)", fresh.Effect, newU.UploadID, oldU.UploadID)
	}
	out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: oldU.StorageKey, Size: 2, ETag: "x", Time: e.Now()})
	if err != nil || out != upload.OutcomeSkipped {
		t.Fatalf("late event for the old id = %s, %v; want skipped", out, err)
	}
	status, err := e.svc.Status(ctx, "tenant", newU.UploadID)
	if err != nil || decode(t, status.Body).Status != api.StatusPending {
		t.Fatalf("new claim after the late event: %s, %v; want pending", status.Body, err)
	}
}

// An object whose size differs from the claim is not recorded and is
// removed; one replaced since by the right object is kept, and recorded:
// the size checked is the one S3 reports, never the event's.
func TestSizeMismatchIsRejectedAndRemoved(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("twelve bytes")
	reply, err := e.svc.Create(ctx, "tenant", "key-mismatch-000001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, reply.Body)
	// Someone with write access to the bucket stores other bytes there.
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &u.StorageKey, Body: strings.NewReader("short")}); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 5, ETag: "x", Time: e.Now()})
	if err != nil || out != upload.OutcomeRejected {
		t.Fatalf("Finalize = %s, %v; want rejected", out, err)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("mismatched object kept (%d objects)", n)
	}
	// The record is still pending: the client's PUT is not refused.
	if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusPending {
		t.Fatalf("status after the rejection: %s, want pending", got.Status)
	}
	// Now the right bytes arrive, then the stale mismatch event again: S3
	// holds the right object, and that is what is recorded.
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	if out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 5, ETag: "x", Time: e.Now()}); err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("stale mismatch event = %s, %v; want the right object recorded", out, err)
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("the right object was removed by a stale event (%d objects)", n)
	}
	status, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || decode(t, status.Body).Status != api.StatusCompleted {
		t.Fatalf("status = %s, %v; want completed", status.Body, err)
	}
}

func TestFinalizeSkipsWhatIsNotAnUpload(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	// What is not an upload costs no call. An upload id without an object
	// costs the HeadObject that finds none, and nothing else. An unknown
	// claim whose object exists costs that, the conditional update, and
	// the consistent read the store falls back to when a failed condition
	// returns no item: from outside, a missing item and a server that
	// ignores ALL_OLD look the same.
	stray := "uploads/" + strings.Repeat("b", 64)
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &stray, Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj        upload.ObjectCreated
		dynamo, s3 map[string]int
	}{
		{upload.ObjectCreated{Bucket: e.bucket, Key: "elsewhere/file.txt", Size: 1}, map[string]int{}, map[string]int{}},
		{upload.ObjectCreated{Bucket: e.bucket, Key: "uploads/not-an-id", Size: 1}, map[string]int{}, map[string]int{}},
		{upload.ObjectCreated{Bucket: e.bucket, Key: "uploads/" + strings.Repeat("a", 64), Size: 1}, map[string]int{}, map[string]int{"HeadObject": 1}},
		{upload.ObjectCreated{Bucket: e.bucket, Key: stray, Size: 1}, map[string]int{"UpdateItem": 1, "GetItem": 1}, map[string]int{"HeadObject": 1}},
		{upload.ObjectCreated{Bucket: "another-bucket", Key: "uploads/" + strings.Repeat("a", 64), Size: 1}, map[string]int{}, map[string]int{}},
	} {
		e.resetCounts()
		out, err := e.svc.Finalize(ctx, tc.obj)
		if err != nil || out != upload.OutcomeSkipped {
			t.Errorf("Finalize(%s/%s) = %s, %v; want skipped", tc.obj.Bucket, tc.obj.Key, out, err)
		}
		e.wantCalls(t, "skip "+tc.obj.Bucket+"/"+tc.obj.Key, tc.dynamo, tc.s3)
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects; an object of no live claim is left alone", n)
	}
}

func TestConcurrentCreatesOneUpload(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("raced")
	const n = 50
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			reply, err := e.svc.Create(ctx, "tenant", "key-concurrent-0001", requestFor(content, "text/plain"))
			ids[i], errs[i] = reply.UploadID, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("create %d: id %s, %v; want %s", i, ids[i], errs[i], ids[0])
		}
	}
}

// A correct object that lands between finalize's check of a wrong-size
// object and its delete survives: the delete is conditional on the checked
// ETag. (A URL never overwrites, so the replacement is written by someone
// with write access to the bucket, or through a URL signed before URLs
// carried If-None-Match.)
func TestMismatchRemovalSparesAReplacement(t *testing.T) {
	testenv.SkipOnS3(t, services.MinIO, "it ignores If-Match on DeleteObject, so there the removal takes the replacement too")
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	content := []byte("twelve bytes")
	reply, err := e.svc.Create(ctx, "tenant", "key-mismatch-race01", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, reply.Body)
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &u.StorageKey, Body: strings.NewReader("short")}); err != nil {
		t.Fatal(err)
	}
	// The right bytes are stored right after finalize's check reads the
	// wrong ones: the window between that check and its delete.
	var once sync.Once
	svc := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{HeadObject: func(ctx context.Context, in *s3.HeadObjectInput,
		next s3fake.Next[s3.HeadObjectInput, s3.HeadObjectOutput]) (*s3.HeadObjectOutput, error) {
		out, err := next(ctx, in)
		once.Do(func() {
			if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &u.StorageKey, Body: bytes.NewReader(content), ContentType: aws.String("text/plain")}); err != nil {
				t.Errorf("the right bytes: %v", err)
			}
		})
		return out, err
	}}))
	out, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 5, ETag: "x", Time: e.Now()})
	if err != nil || out != upload.OutcomeRejected {
		t.Fatalf("Finalize = %s, %v; want rejected", out, err)
	}
	if head := e.head(t, u.StorageKey); aws.ToInt64(head.ContentLength) != int64(len(content)) {
		t.Fatalf("the object is %d bytes; the right one (%d) was removed", aws.ToInt64(head.ContentLength), len(content))
	}
}

// An object S3 accepted through a claim's URL is recorded even when its
// event comes after the claim expired: the URL never outlived the claim,
// only the announcement was late.
func TestLateEventAfterExpiryIsRecorded(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2*time.Hour) // PRESIGN_TTL longer than the 1 h keys
	// Signed at the env's clock, which the claim's expiry is counted from:
	// the SDK's own signer reads the wall clock, which has moved on since
	// newEnv read it, and a second boundary between the two made the URL
	// look as if it outlived the claim.
	e.svc = e.withPresigner(upload.NewPresignerWith(e.objectsClient, e.bucket, func(o *s3.PresignOptions) {
		o.Presigner = clockSigner{signer: v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true }), now: e.Now}
	}))
	content := []byte("accepted just in time")
	reply, err := e.svc.Create(ctx, "tenant", "key-late-event-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, reply.Body)
	urlExpires, _ := time.Parse(time.RFC3339, u.Upload.ExpiresAt)
	if limit := e.Now().Add(time.Hour); urlExpires.After(limit) {
		t.Fatalf("URL expires %s, after its claim (%s)", urlExpires, limit)
	}
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	e.Advance(61 * time.Minute) // the event is late: the claim has expired
	if _, err := e.svc.Status(ctx, "tenant", u.UploadID); !errors.Is(err, upload.ErrNotFound) {
		t.Fatalf("status of an expired claim: %v, want not found", err)
	}
	head := e.head(t, u.StorageKey)
	out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: int64(len(content)), ETag: aws.ToString(head.ETag), Time: e.Now()})
	if err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("late event: %s %v, want completed", out, err)
	}
	replay, err := e.svc.Create(ctx, "tenant", "key-late-event-0001", requestFor(content, "text/plain"))
	if err != nil || replay.Effect != upload.EffectReplayed || decode(t, replay.Body).Status != api.StatusCompleted || decode(t, replay.Body).UploadID != u.UploadID {
		t.Fatalf("the key after the late event: %v %s; want its completed upload, not a new one", err, replay.Body)
	}
}

// A deployment's prefix is free text, so an object key may need every kind
// of escaping in a URL: spaces, non-ASCII, "+", "%", "=", "~". Each S3 call
// the service makes (the presigned PUT and parts, HeadObject, DeleteObject,
// CreateMultipartUpload, ListParts, CompleteMultipartUpload,
// AbortMultipartUpload) reaches the one object the key names.
func TestKeysThatNeedEscaping(t *testing.T) {
	ctx := context.Background()
	const prefix = "in box+/é ü/50%+50%=~x/"
	e := newEnv(t, 15*time.Minute, func(c *upload.Config) { c.Prefix, c.MaxUploadBytes = prefix, api.MaxMultipartBytes })

	// A presigned PUT, then Status's HeadObject, which completes it.
	content := []byte("escaped key")
	_, u := e.create(t, "tenant", "key-escaped-put-0001", requestFor(content, "text/plain"))
	if u.StorageKey != prefix+u.UploadID {
		t.Fatalf("storage key %q, want %q", u.StorageKey, prefix+u.UploadID)
	}
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatalf("PUT to %q: %d", u.StorageKey, code)
	}
	if head := e.head(t, u.StorageKey); aws.ToInt64(head.ContentLength) != int64(len(content)) {
		t.Fatalf("%q holds %d bytes, want %d", u.StorageKey, aws.ToInt64(head.ContentLength), len(content))
	}
	e.resetCounts()
	if got := e.statusOf(t, "tenant", u.UploadID); got.Status != api.StatusCompleted {
		t.Fatalf("status after the PUT: %s, want completed (HeadObject found the object)", got.Status)
	}
	e.wantCalls(t, "status heal", map[string]int{"GetItem": 1, "UpdateItem": 1}, map[string]int{"HeadObject": 1})

	// Finalize's check and conditional delete of a wrong-size object.
	_, wrong := e.create(t, "tenant", "key-escaped-put-0002", requestFor(content, "text/plain"))
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &wrong.StorageKey, Body: strings.NewReader("short")}); err != nil {
		t.Fatal(err)
	}
	e.resetCounts()
	out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: wrong.StorageKey, Size: 5, ETag: "x", Time: e.Now()})
	if err != nil || out != upload.OutcomeRejected {
		t.Fatalf("Finalize of a wrong-size object = %s, %v; want rejected", out, err)
	}
	e.wantCalls(t, "mismatch", map[string]int{"UpdateItem": 1}, map[string]int{"HeadObject": 1, "DeleteObject": 1})
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects after the mismatch was removed, want the first upload's 1", n)
	}

	// A multipart upload: created, its parts sent, listed and completed.
	f := newBigFile(t, 6<<20)
	m := e.sendAll(t, "key-escaped-mp-00001", f)
	listed, err := e.svc.ListParts(ctx, "tenant", m.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	var list api.PartList
	if err := json.Unmarshal(listed.Body, &list); err != nil || len(list.Parts) != 2 || list.Parts[1].SHA256 != f.partSum(2) {
		t.Fatalf("list of %q: %s", m.StorageKey, listed.Body)
	}
	done, err := e.svc.Complete(ctx, "tenant", m.UploadID, api.CompleteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if c := decode(t, done.Body); c.Status != api.StatusCompleted || c.CompositeSHA256 != compositeSHA256(f, 2) {
		t.Fatalf("complete of %q: %s", m.StorageKey, done.Body)
	}
	if head := e.head(t, m.StorageKey); aws.ToInt64(head.ContentLength) != 6<<20 {
		t.Fatalf("%q holds %d bytes, want %d", m.StorageKey, aws.ToInt64(head.ContentLength), 6<<20)
	}

	// And one aborted.
	created, err := e.svc.Create(ctx, "tenant", "key-escaped-mp-00002", f.req)
	if err != nil {
		t.Fatal(err)
	}
	a := decode(t, created.Body)
	if code := testenv.PutPart(e.sign(t, "tenant", a.UploadID, f, 1)[1], f.part(1)); code != http.StatusOK {
		t.Fatalf("part 1 of %q: %d", a.StorageKey, code)
	}
	if aborted, err := e.svc.Abort(ctx, "tenant", a.UploadID); err != nil || decode(t, aborted.Body).Status != api.StatusAborted {
		t.Fatalf("abort of %q: %v", a.StorageKey, err)
	}
	if n, objects := e.multipartUploads(t), e.objectCount(t); n != 0 || objects != 2 {
		t.Fatalf("after the abort: %d multipart uploads, %d objects; want 0 and 2", n, objects)
	}
}

// s3Parts starts a multipart upload of key with SHA-256 checksums, as the
// service does, and sends parts of the given sizes; it returns the upload
// id and the parts to complete it with.
func (e *env) s3Parts(t *testing.T, key string, sizes ...int) (string, []s3types.CompletedPart) {
	t.Helper()
	ctx := context.Background()
	created, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &e.bucket, Key: &key, ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	var parts []s3types.CompletedPart
	for i, size := range sizes {
		n := int32(i + 1)
		out, err := e.s3.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &e.bucket, Key: &key, UploadId: created.UploadId, PartNumber: &n,
			Body: bytes.NewReader(bytes.Repeat([]byte{byte(n)}, size)), ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
		})
		if err != nil {
			t.Fatalf("part %d of %q: %v", n, key, err)
		}
		parts = append(parts, s3types.CompletedPart{PartNumber: &n, ETag: out.ETag, ChecksumSHA256: out.ChecksumSHA256})
	}
	return aws.ToString(created.UploadId), parts
}

// wantAPIError fails t unless err is an S3 API error with one of codes.
func wantAPIError(t *testing.T, what string, err error, codes ...string) {
	t.Helper()
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || !slices.Contains(codes, apiErr.ErrorCode()) {
		t.Errorf("%s: %v, want an S3 error with code %v", what, err, codes)
	}
}

// The answers of S3 that the service's decisions rest on but no test of
// the service can provoke from outside: the guards it sends with
// CompleteMultipartUpload, and the codes of an upload that is gone, which
// it reads as "completed or aborted elsewhere".
func TestS3AnswersTheServiceReliesOn(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 15*time.Minute)
	const key = "guards/in sub+dir/é 50%.bin"

	t.Run("Complete with If-None-Match * never overwrites", func(t *testing.T) {
		k := key + " exists"
		first, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &k, Body: strings.NewReader("first")})
		if err != nil {
			t.Fatal(err)
		}
		uploadID, parts := e.s3Parts(t, k, 1024)
		_, err = e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &e.bucket, Key: &k, UploadId: &uploadID, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
			MpuObjectSize: aws.Int64(1024), IfNoneMatch: aws.String("*"),
		})
		wantAPIError(t, "complete over an existing object", err, "PreconditionFailed", "ConditionalRequestConflict")
		if head := e.head(t, k); aws.ToString(head.ETag) != aws.ToString(first.ETag) || aws.ToInt64(head.ContentLength) != 5 {
			t.Errorf("the object is now %s (%d bytes), want the first one %s", aws.ToString(head.ETag), aws.ToInt64(head.ContentLength), aws.ToString(first.ETag))
		}
	})

	t.Run("Complete with a wrong MpuObjectSize is refused", func(t *testing.T) {
		testenv.SkipOnS3(t, services.MinIO, "it ignores MpuObjectSize (x-amz-mp-object-size); the service's own check of the listed part sizes keeps a short object out there (TestAShortPartIsNotCompleted)")
		k := key + " size"
		uploadID, parts := e.s3Parts(t, k, 1024)
		_, err := e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &e.bucket, Key: &k, UploadId: &uploadID, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
			MpuObjectSize: aws.Int64(1023),
		})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("complete with MpuObjectSize 1023 of 1024 bytes: %v, want S3's refusal", err)
		}
		if _, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &e.bucket, Key: &k}); err == nil {
			t.Errorf("%q exists after a refused complete", k)
		}
	})

	// Complete passes each part's declared SHA-256; S3 checks it against
	// the part it holds, so a part replaced after the service compared
	// the list is refused rather than stored.
	t.Run("Complete with a wrong part checksum is refused", func(t *testing.T) {
		k := key + " part checksum"
		uploadID, parts := e.s3Parts(t, k, 5<<20, 1024)
		right := parts[1].ChecksumSHA256
		parts[1].ChecksumSHA256 = parts[0].ChecksumSHA256
		in := &s3.CompleteMultipartUploadInput{
			Bucket: &e.bucket, Key: &k, UploadId: &uploadID, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
			MpuObjectSize: aws.Int64(5<<20 + 1024), IfNoneMatch: aws.String("*"),
		}
		_, err := e.s3.CompleteMultipartUpload(ctx, in)
		wantAPIError(t, "complete with part 2's checksum wrong", err, "InvalidPart")
		t.Logf("S3 answered: %v", err)
		if _, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &e.bucket, Key: &k}); err == nil {
			t.Errorf("%q exists after a refused complete", k)
		}
		parts[1].ChecksumSHA256 = right
		if _, err := e.s3.CompleteMultipartUpload(ctx, in); err != nil {
			t.Errorf("complete with the right checksums after the refusal: %v", err)
		}
	})

	t.Run("an aborted upload is NoSuchUpload", func(t *testing.T) {
		k := key + " aborted"
		uploadID, parts := e.s3Parts(t, k, 1024)
		abort := &s3.AbortMultipartUploadInput{Bucket: &e.bucket, Key: &k, UploadId: &uploadID}
		if _, err := e.s3.AbortMultipartUpload(ctx, abort); err != nil {
			t.Fatal(err)
		}
		_, err := e.s3.ListParts(ctx, &s3.ListPartsInput{Bucket: &e.bucket, Key: &k, UploadId: &uploadID})
		wantAPIError(t, "list parts", err, "NoSuchUpload")
		_, err = e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &e.bucket, Key: &k, UploadId: &uploadID, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
			MpuObjectSize: aws.Int64(1024), IfNoneMatch: aws.String("*"),
		})
		// S3 says NoSuchUpload; Versity looks for the parts first. The
		// service retries an InvalidPart, whose next list finds the upload
		// gone.
		wantAPIError(t, "complete", err, "NoSuchUpload", "InvalidPart")
		testenv.SkipOnS3(t, services.MinIO, "it answers an abort of an upload that is gone with success, not NoSuchUpload")
		_, err = e.s3.AbortMultipartUpload(ctx, abort)
		wantAPIError(t, "abort again", err, "NoSuchUpload")
	})
}
