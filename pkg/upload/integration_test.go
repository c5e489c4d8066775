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
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/awslite"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/upload"
)

var (
	dynoxide = testenv.SharedDynoxide()
	versity  = testenv.SharedVersity()
)

func TestMain(m *testing.M) {
	code := m.Run()
	dynoxide.Stop()
	versity.Stop()
	os.Exit(code)
}

// env is one service on real local DynamoDB and S3, with every call counted.
type env struct {
	svc     *upload.Service
	store   *idempotency.DynamoStore
	cfg     upload.Config
	signer  *upload.SigV4Presigner
	s3      *s3.Client  // the test's own view of the bucket, not counted
	lite    *awslite.S3 // the service's S3 client, as the functions have it
	bucket  string
	dynamo  testenv.Counter
	objects testenv.Counter
	*testenv.Clock
}

func newEnv(t *testing.T, presignTTL time.Duration, tweaks ...func(*upload.Config)) *env {
	t.Helper()
	e := &env{Clock: testenv.NewClock(time.Now())}
	dynamoURL := dynoxide.Endpoint(t)
	ddb := testenv.DynamoClient(dynamoURL, nil)
	e.s3 = testenv.S3Client(versity.Endpoint(t), nil)
	e.lite = testenv.LiteS3(versity.Endpoint(t), &e.objects)
	e.bucket = testenv.NewBucket(t, e.s3)
	store := idempotency.NewDynamoStore(testenv.LiteDynamo(dynamoURL, &e.dynamo), testenv.NewTable(t, ddb), func(o *idempotency.Options) {
		o.TTL, o.Now = time.Hour, e.Now
	})
	cfg := upload.Config{Bucket: e.bucket, Prefix: "uploads/", PresignTTL: presignTTL, MaxUploadBytes: 1 << 20, KeyTTL: time.Hour}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	presigner := upload.NewPresignerAt(e.lite.BucketEndpoint(e.bucket), testenv.Region, testenv.AWSConfig().Credentials)
	e.store, e.cfg, e.signer = store, cfg, presigner
	e.svc = upload.New(store, presigner, e.lite, cfg, func(o *upload.Options) {
		o.Now = e.Now
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
	if _, listed := u.Upload.Headers["Content-Length"]; listed || u.Upload.Headers["Content-Type"] != "application/pdf" || u.Upload.Headers["x-amz-checksum-sha256"] == "" {
		t.Fatalf("headers = %v: want Content-Type and x-amz-checksum-sha256, never Content-Length", u.Upload.Headers)
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
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatalf("the same PUT again (a client retry): %d", code)
	}
	head := e.head(t, u.StorageKey)
	if aws.ToInt64(head.ContentLength) != int64(len(content)) || aws.ToString(head.ContentType) != "application/pdf" {
		t.Errorf("stored %d bytes of %s", aws.ToInt64(head.ContentLength), aws.ToString(head.ContentType))
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

func TestExpiredURLIsRefusedAndReplayResigns(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, time.Second)
	content := []byte("expiring")
	reply, err := e.svc.Create(ctx, "tenant", "key-expired-url-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	first := decode(t, reply.Body)
	time.Sleep(2100 * time.Millisecond) // SigV4 expiry is in whole seconds of real time
	e.Advance(2100 * time.Millisecond)
	if code := put(t, first, content, nil); code != http.StatusForbidden {
		t.Fatalf("expired URL: %d, want 403", code)
	}
	again, err := e.svc.Create(ctx, "tenant", "key-expired-url-0001", requestFor(content, "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	fresh := decode(t, again.Body)
	if !again.Replayed || fresh.UploadID != first.UploadID || fresh.Upload.URL == first.Upload.URL {
		t.Fatalf("replay after expiry: replayed=%v id %s (was %s), url changed=%v", again.Replayed, fresh.UploadID, first.UploadID, fresh.Upload.URL != first.Upload.URL)
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
	e.wantCalls(t, "finalize", map[string]int{"UpdateItem": 1}, map[string]int{})
	e.resetCounts()
	if out, err := e.svc.Finalize(ctx, obj); err != nil || out != upload.OutcomeDuplicate {
		t.Fatalf("duplicate Finalize = %s, %v", out, err)
	}
	e.wantCalls(t, "duplicate finalize", map[string]int{"UpdateItem": 1}, map[string]int{})

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
	if err != nil || !bytes.Equal(pending.Body, reply.Body) {
		t.Fatalf("Status before the PUT = %s, %v; want the pending body", pending.Body, err)
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
	if done.Status != api.StatusCompleted || done.ETag != strings.Trim(aws.ToString(e.head(t, u.StorageKey).ETag), `"`) {
		t.Fatalf("healed = %+v", done)
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
	if fresh.Replayed || newU.UploadID == oldU.UploadID || newU.StorageKey == oldU.StorageKey {
		t.Fatalf("reclaim = replayed %v, id %s (old %s)", fresh.Replayed, newU.UploadID, oldU.UploadID)
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
// removed; one replaced since by the right object is kept.
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
	// Now the right bytes arrive, then the stale mismatch event again.
	if code := put(t, u, content, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	if out, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 5, ETag: "x", Time: e.Now()}); err != nil || out != upload.OutcomeRejected {
		t.Fatalf("stale mismatch event = %s, %v", out, err)
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
	// What is not an upload costs no call. An unknown claim costs the
	// conditional update plus the consistent read the store falls back to when a
	// failed condition returns no item: from outside, a missing item and a
	// server that ignores ALL_OLD look the same. S3 is never touched.
	for _, tc := range []struct {
		obj    upload.ObjectCreated
		dynamo map[string]int
	}{
		{upload.ObjectCreated{Bucket: e.bucket, Key: "elsewhere/file.txt", Size: 1}, map[string]int{}},
		{upload.ObjectCreated{Bucket: e.bucket, Key: "uploads/not-an-id", Size: 1}, map[string]int{}},
		{upload.ObjectCreated{Bucket: e.bucket, Key: "uploads/" + strings.Repeat("a", 64), Size: 1}, map[string]int{"UpdateItem": 1, "GetItem": 1}},
		{upload.ObjectCreated{Bucket: "another-bucket", Key: "uploads/" + strings.Repeat("a", 64), Size: 1}, map[string]int{}},
	} {
		e.resetCounts()
		out, err := e.svc.Finalize(ctx, tc.obj)
		if err != nil || out != upload.OutcomeSkipped {
			t.Errorf("Finalize(%s/%s) = %s, %v; want skipped", tc.obj.Bucket, tc.obj.Key, out, err)
		}
		e.wantCalls(t, "skip "+tc.obj.Bucket+"/"+tc.obj.Key, tc.dynamo, map[string]int{})
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

// replacingObjects stores the right bytes right after the mismatch check
// reads the wrong ones: the window between finalize's check and its delete.
type replacingObjects struct {
	upload.ObjectAPI
	replace func()
	once    sync.Once
}

func (r *replacingObjects) HeadObject(ctx context.Context, in *awslite.HeadObjectInput) (*awslite.HeadObjectOutput, error) {
	out, err := r.ObjectAPI.HeadObject(ctx, in)
	r.once.Do(r.replace)
	return out, err
}

// A correct object that lands between finalize's check of a wrong-size
// object and its delete survives: the delete is conditional on the checked
// ETag.
func TestMismatchRemovalSparesAReplacement(t *testing.T) {
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
	racing := &replacingObjects{ObjectAPI: e.lite, replace: func() {
		if code := put(t, u, content, nil); code != http.StatusOK {
			t.Errorf("the right bytes: %d", code)
		}
	}}
	svc := e.withObjects(racing)
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
	if err != nil || !replay.Replayed || decode(t, replay.Body).Status != api.StatusCompleted || decode(t, replay.Body).UploadID != u.UploadID {
		t.Fatalf("the key after the late event: %v %s; want its completed upload, not a new one", err, replay.Body)
	}
}
