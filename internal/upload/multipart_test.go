package upload_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

const partSize = 5 << 20

// bigFile is 11 MiB of random bytes: parts of 5, 5 and 1 MiB.
type bigFile struct {
	data []byte
	req  api.CreateRequest
}

func newBigFile(t *testing.T, size int) bigFile {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	req := requestFor(data, "video/mp4")
	req.Filename, req.PartSize = "movie.mp4", partSize
	return bigFile{data, req}
}

func (f bigFile) part(n int) []byte {
	start := (n - 1) * partSize
	return f.data[start:min(start+partSize, len(f.data))]
}

func (f bigFile) partSum(n int) string {
	sum := sha256.Sum256(f.part(n))
	return hex.EncodeToString(sum[:])
}

func multipartEnv(t *testing.T) *env {
	return newEnv(t, 15*time.Minute, func(c *upload.Config) { c.MaxUploadBytes = api.MaxMultipartBytes })
}

// sign signs parts and returns their instructions by number.
func (e *env) sign(t *testing.T, tenant, uploadID string, f bigFile, parts ...int) map[int]api.SignedPart {
	t.Helper()
	req := api.SignPartsRequest{}
	for _, n := range parts {
		req.Parts = append(req.Parts, api.PartToSign{PartNumber: n, SHA256: f.partSum(n)})
	}
	reply, err := e.svc.SignParts(context.Background(), tenant, uploadID, req)
	if err != nil {
		t.Fatalf("sign %v: %v", parts, err)
	}
	var out api.SignedParts
	if err := json.Unmarshal(reply.Body, &out); err != nil || reply.Effect != upload.EffectServed || reply.UploadID != uploadID {
		t.Fatalf("sign: %s %s %s", reply.Effect, reply.UploadID, reply.Body)
	}
	byNumber := map[int]api.SignedPart{}
	for _, p := range out.Parts {
		byNumber[p.PartNumber] = p
	}
	return byNumber
}

func (e *env) multipartUploads(t *testing.T) int {
	t.Helper()
	out, err := e.s3.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

// sendAll creates a multipart upload of f under key for the tenant and
// sends every part; it returns the pending upload.
func (e *env) sendAll(t *testing.T, key string, f bigFile) api.Upload {
	t.Helper()
	created, err := e.svc.Create(context.Background(), "tenant", key, f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	parts := make([]int, u.Multipart.PartCount)
	for i := range parts {
		parts[i] = i + 1
	}
	for n, p := range e.sign(t, "tenant", u.UploadID, f, parts...) {
		if code := testenv.PutPart(p, f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
	return u
}

// withObjects is the env's service over other S3 behaviour.
func (e *env) withObjects(objects upload.ObjectAPI) *upload.Service {
	return upload.New(e.store, e.signer, objects, e.cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
}

// The whole multipart flow on the real servers: create (one claim, one S3
// upload, one answer), replay, sign, S3 refusing other bytes part by part,
// list, complete from what S3 holds, and every later request answering the
// completed body.
func TestMultipartUploadEndToEnd(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)

	e.resetCounts()
	created, err := e.svc.Create(ctx, "tenant", "key-multipart-00001", f.req)
	if err != nil {
		t.Fatal(err)
	}
	e.wantCalls(t, "create", map[string]int{"PutItem": 1, "UpdateItem": 1}, map[string]int{"CreateMultipartUpload": 1})
	u := decode(t, created.Body)
	if created.Effect != upload.EffectCreated || created.UploadID != u.UploadID || u.Status != api.StatusPending || u.Upload != nil || u.Multipart == nil ||
		*u.Multipart != (api.Multipart{PartSize: partSize, PartCount: 3}) || u.Bytes != 11<<20 {
		t.Fatalf("create: %s %s", created.Effect, created.Body)
	}
	e.resetCounts()
	replay, err := e.svc.Create(ctx, "tenant", "key-multipart-00001", f.req)
	if err != nil || replay.Effect != upload.EffectReplayed || !bytes.Equal(replay.Body, created.Body) {
		t.Fatalf("replay: %v %s %s", err, replay.Effect, replay.Body)
	}
	e.wantCalls(t, "replay", map[string]int{"PutItem": 1}, map[string]int{})
	if n := e.multipartUploads(t); n != 1 {
		t.Fatalf("%d S3 multipart uploads, want 1", n)
	}

	signed := e.sign(t, "tenant", u.UploadID, f, 1, 2, 3)
	for n := 1; n <= 3; n++ {
		p := signed[n]
		if _, listed := p.Headers["Content-Length"]; listed || p.Headers["x-amz-checksum-sha256"] == "" || p.Method != "PUT" {
			t.Fatalf("part %d instructions: %+v", n, p)
		}
	}
	// S3 refuses anything but the signed bytes, part by part.
	wrong := bytes.Clone(f.part(1))
	wrong[0] ^= 1
	for name, body := range map[string][]byte{"other bytes": wrong, "one byte short": f.part(1)[1:], "another part's bytes": f.part(2)[:len(f.part(1))-1]} {
		if code := testenv.PutPart(signed[1], body); code < 400 {
			t.Errorf("part 1 with %s: S3 answered %d", name, code)
		}
	}
	for n := 1; n <= 3; n++ {
		if code := testenv.PutPart(signed[n], f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
	listed, err := e.svc.ListParts(ctx, "tenant", u.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	var list api.PartList
	_ = json.Unmarshal(listed.Body, &list)
	if len(list.Parts) != 3 {
		t.Fatalf("list: %s", listed.Body)
	}
	for i, p := range list.Parts {
		if p.PartNumber != i+1 || p.Size != int64(len(f.part(i+1))) || p.SHA256 != f.partSum(i+1) || p.ETag == "" {
			t.Errorf("listed part %d: %+v", i+1, p)
		}
	}

	e.resetCounts()
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.wantCalls(t, "complete", map[string]int{"GetItem": 1, "UpdateItem": 1}, map[string]int{"ListParts": 1, "CompleteMultipartUpload": 1})
	c := decode(t, done.Body)
	if done.Effect != upload.EffectServed || c.Status != api.StatusCompleted || c.ETag == "" || c.CompletedAt == "" || c.Multipart == nil || c.SHA256 != f.req.SHA256 {
		t.Fatalf("complete: %s %s", done.Effect, done.Body)
	}
	if want := compositeSHA256(f, 3); c.CompositeSHA256 != want {
		t.Errorf("compositeSha256 %q, want S3's %q", c.CompositeSHA256, want)
	}
	head := e.head(t, u.StorageKey)
	if aws.ToInt64(head.ContentLength) != 11<<20 || aws.ToString(head.ContentType) != "video/mp4" || e.objectCount(t) != 1 || e.multipartUploads(t) != 0 {
		t.Fatalf("stored %d bytes of %s; %d objects, %d multipart uploads", aws.ToInt64(head.ContentLength), aws.ToString(head.ContentType), e.objectCount(t), e.multipartUploads(t))
	}

	// From now on, the same completed body everywhere; nothing more to do.
	again, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil || !bytes.Equal(again.Body, done.Body) {
		t.Fatalf("complete again: %v %s", err, again.Body)
	}
	replayDone, err := e.svc.Create(ctx, "tenant", "key-multipart-00001", f.req)
	if err != nil || replayDone.Effect != upload.EffectReplayed || !bytes.Equal(replayDone.Body, done.Body) {
		t.Fatalf("replay after complete: %v %s", err, replayDone.Body)
	}
	status, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || !bytes.Equal(status.Body, done.Body) {
		t.Fatalf("status after complete: %v %s", err, status.Body)
	}
	// The S3 event arrives after the Complete recorded it: a no-op.
	outcome, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 11 << 20, ETag: c.ETag, Time: time.Now(), Multipart: true})
	if err != nil || outcome != upload.OutcomeDuplicate {
		t.Fatalf("late event: %v %v", outcome, err)
	}
	for name, call := range map[string]func() error{
		"sign": func() error {
			_, err := e.svc.SignParts(ctx, "tenant", u.UploadID, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: f.partSum(1)}}})
			return err
		},
		"list":  func() error { _, err := e.svc.ListParts(ctx, "tenant", u.UploadID); return err },
		"abort": func() error { _, err := e.svc.Abort(ctx, "tenant", u.UploadID); return err },
	} {
		want := upload.ErrNotPending
		if name == "abort" {
			want = upload.ErrCompleted
		}
		if err := call(); !errors.Is(err, want) {
			t.Errorf("%s after complete: %v, want %v", name, err, want)
		}
	}
}

// compositeSHA256 is S3's checksum of a multipart object: the SHA-256 of
// the parts' SHA-256 digests, base64, then "-" and the part count.
func compositeSHA256(f bigFile, parts int) string {
	h := sha256.New()
	for n := 1; n <= parts; n++ {
		sum := sha256.Sum256(f.part(n))
		h.Write(sum[:])
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(parts)
}

// When the S3 event records the completion first (a client that completes
// with S3 directly, or an event racing the Complete call), the record says
// the same: completed, with S3's composite checksum.
func TestMultipartFinalizedByTheEvent(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-multipart-event1", f)
	// Complete at S3 behind the service's back: the answer of a Complete
	// call that was lost before it was recorded.
	out := e.completeAtS3(t, u, f, 2)
	outcome, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 6 << 20, ETag: aws.ToString(out.ETag), Time: time.Now(), Multipart: true})
	if err != nil || outcome != upload.OutcomeCompleted {
		t.Fatalf("event: %v %v", outcome, err)
	}
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c := decode(t, done.Body)
	if c.Status != api.StatusCompleted || c.CompositeSHA256 != compositeSHA256(f, 2) || c.ETag != unquote(aws.ToString(out.ETag)) {
		t.Fatalf("complete after the event: %s (S3 ETag %s)", done.Body, aws.ToString(out.ETag))
	}
}

func unquote(s string) string { return string(bytes.Trim([]byte(s), `"`)) }

func (e *env) completeAtS3(t *testing.T, u api.Upload, f bigFile, parts int) *s3.CompleteMultipartUploadOutput {
	t.Helper()
	ctx := context.Background()
	mpus, err := e.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &e.bucket})
	if err != nil || len(mpus.Uploads) != 1 {
		t.Fatalf("multipart uploads: %v %v", mpus, err)
	}
	listed, err := e.s3.ListParts(ctx, &s3.ListPartsInput{Bucket: &e.bucket, Key: &u.StorageKey, UploadId: mpus.Uploads[0].UploadId})
	if err != nil || len(listed.Parts) != parts {
		t.Fatalf("parts: %v %v", listed, err)
	}
	var completed []types.CompletedPart
	for _, p := range listed.Parts {
		completed = append(completed, types.CompletedPart{PartNumber: p.PartNumber, ETag: p.ETag, ChecksumSHA256: p.ChecksumSHA256})
	}
	out, err := e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &e.bucket, Key: &u.StorageKey, UploadId: mpus.Uploads[0].UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A Complete whose answer was lost after S3 completed is recognised on the
// next call (the object exists) and recorded, never repeated into a
// second object.
func TestLostCompleteAnswerIsRecognised(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-lost-complete-1", f)
	e.completeAtS3(t, u, f, 2) // S3 completed; the record never heard
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if c := decode(t, done.Body); c.Status != api.StatusCompleted || c.CompositeSHA256 != compositeSHA256(f, 2) {
		t.Fatalf("complete after a lost answer: %s", done.Body)
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// Complete checks what S3 holds: a missing part is a 409 that names it,
// and nothing is completed.
func TestCompleteWithPartsMissing(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-parts-missing-1", f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	signed := e.sign(t, "tenant", u.UploadID, f, 2)
	testenv.PutPart(signed[2], f.part(2))
	_, err = e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	var missing *upload.PartsMissingError
	if !errors.As(err, &missing) || missing.Count != 2 || fmt.Sprint(missing.Missing) != "[1 3]" {
		t.Fatalf("complete with parts 1 and 3 missing: %v", err)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("%d objects after a refused complete", n)
	}
}

// A part S3 holds shorter than its place in the file (sent past its URL,
// which signs the length) counts as missing: the service's own check of
// the listed sizes keeps a short object out, not MpuObjectSize alone,
// which MinIO ignores.
func TestAShortPartIsNotCompleted(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-short-part-01", f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	for n, p := range e.sign(t, "tenant", u.UploadID, f, 1, 2) {
		if code := testenv.PutPart(p, f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
	uploads, err := e.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &e.bucket, Prefix: &u.StorageKey})
	if err != nil || len(uploads.Uploads) != 1 {
		t.Fatalf("S3's uploads of %s: %v, %v; want one", u.StorageKey, uploads, err)
	}
	if _, err := e.s3.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &e.bucket, Key: &u.StorageKey, UploadId: uploads.Uploads[0].UploadId, PartNumber: aws.Int32(3),
		Body: bytes.NewReader(f.part(3)[1:]), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	}); err != nil {
		t.Fatalf("part 3, one byte short: %v", err)
	}
	_, err = e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	var missing *upload.PartsMissingError
	if !errors.As(err, &missing) || missing.Count != 1 || fmt.Sprint(missing.Missing) != "[3]" {
		t.Fatalf("complete with part 3 one byte short: %v, want part 3 missing", err)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("%d objects after a refused complete", n)
	}
}

// Abort: S3's upload is gone, the record answers "aborted" from then on
// (to a replay of the create too), and nothing can be signed, sent or
// completed; a part PUT racing the abort is refused by S3.
func TestAbort(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-abort-0000001", f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	signed := e.sign(t, "tenant", u.UploadID, f, 1, 2)
	testenv.PutPart(signed[1], f.part(1))

	aborted, err := e.svc.Abort(ctx, "tenant", u.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	a := decode(t, aborted.Body)
	if aborted.Effect != upload.EffectServed || a.Status != api.StatusAborted || a.UploadID != u.UploadID || a.Multipart == nil {
		t.Fatalf("abort: %s %s", aborted.Effect, aborted.Body)
	}
	id, _ := upload.ParseUploadID(u.UploadID)
	if rec, err := e.store.GetRecord(ctx, id); err != nil || rec.State != recordstore.StateAborted {
		t.Fatalf("the record after the abort is %q (%v), want %q", rec.State, err, recordstore.StateAborted)
	}
	if code := testenv.PutPart(signed[2], f.part(2)); code < 400 {
		t.Errorf("part PUT after the abort: %d, want S3's refusal", code)
	}
	if n, m := e.multipartUploads(t), e.objectCount(t); n != 0 || m != 0 {
		t.Fatalf("after abort: %d multipart uploads, %d objects", n, m)
	}
	again, err := e.svc.Abort(ctx, "tenant", u.UploadID)
	if err != nil || !bytes.Equal(again.Body, aborted.Body) {
		t.Fatalf("abort again: %v %s", err, again.Body)
	}
	replay, err := e.svc.Create(ctx, "tenant", "key-abort-0000001", f.req)
	if err != nil || replay.Effect != upload.EffectReplayed || !bytes.Equal(replay.Body, aborted.Body) {
		t.Fatalf("replay after abort: %v %s", err, replay.Body)
	}
	status, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || !bytes.Equal(status.Body, aborted.Body) {
		t.Fatalf("status after abort: %v %s", err, status.Body)
	}
	if _, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{}); !errors.Is(err, upload.ErrNotPending) {
		t.Fatalf("complete after abort: %v", err)
	}
	if _, err := e.svc.SignParts(ctx, "tenant", u.UploadID, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: f.partSum(1)}}}); !errors.Is(err, upload.ErrNotPending) {
		t.Fatalf("sign after abort: %v", err)
	}
}

// Concurrent creates with one key make one S3 multipart upload: one claim
// wins; the others get 409 in progress while it works, or its answer.
func TestConcurrentMultipartCreates(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	const n = 16
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			reply, err := e.svc.Create(ctx, "tenant", "key-mp-concurrent-1", f.req)
			errs[i] = err
			if err == nil {
				ids[i] = decode(t, reply.Body).UploadID
			}
		})
	}
	wg.Wait()
	var winner string
	for i := range n {
		var inProgress *idempotency.InProgressError
		switch {
		case errs[i] == nil && (winner == "" || ids[i] == winner):
			winner = ids[i]
		case errors.As(errs[i], &inProgress) && inProgress.RetryAfter >= time.Second:
		default:
			t.Fatalf("create %d: id %q err %v (winner %q)", i, ids[i], errs[i], winner)
		}
	}
	if winner == "" || e.multipartUploads(t) != 1 {
		t.Fatalf("winner %q, %d S3 multipart uploads; want one", winner, e.multipartUploads(t))
	}
}

// While a create holds the claim in progress, the key answers 409 with
// Retry-After; once its lease runs out, a retry takes the claim over; and
// the stalled create, resuming late, gives up its S3 upload instead of
// answering with a second one.
func TestInProgressLeaseIsTakenOver(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	// S3 holds the create until released, as a function that stalls (or
	// dies) between its claim and its answer.
	entered, release := make(chan struct{}), make(chan struct{})
	stalled := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{CreateMultipartUpload: func(ctx context.Context, in *s3.CreateMultipartUploadInput,
		next s3fake.Next[s3.CreateMultipartUploadInput, s3.CreateMultipartUploadOutput]) (*s3.CreateMultipartUploadOutput, error) {
		entered <- struct{}{}
		<-release
		return next(ctx, in)
	}}))
	done := make(chan error, 1)
	go func() {
		_, err := stalled.Create(ctx, "tenant", "key-lease-takeover1", f.req)
		done <- err
	}()
	<-entered
	_, err := e.svc.Create(ctx, "tenant", "key-lease-takeover1", f.req)
	var inProgress *idempotency.InProgressError
	if !errors.As(err, &inProgress) || inProgress.RetryAfter < time.Second || inProgress.RetryAfter > 30*time.Second {
		t.Fatalf("during the claim's work: %v, want in progress with a Retry-After within the lease", err)
	}
	e.Advance(31 * time.Second) // the default lease is 30 s
	taken, err := e.svc.Create(ctx, "tenant", "key-lease-takeover1", f.req)
	if err != nil || taken.Effect != upload.EffectCreated {
		t.Fatalf("after the lease: %v %s", err, taken.Effect)
	}
	close(release)
	if err := <-done; !errors.As(err, &inProgress) {
		t.Fatalf("the stalled create resumed: %v, want in progress (another request holds the key)", err)
	}
	if n := e.multipartUploads(t); n != 1 {
		t.Fatalf("%d S3 multipart uploads, want only the winner's", n)
	}
	replay, err := e.svc.Create(ctx, "tenant", "key-lease-takeover1", f.req)
	if err != nil || decode(t, replay.Body).UploadID != taken.UploadID {
		t.Fatalf("replay: %v %s, want the winner %s", err, replay.Body, taken.UploadID)
	}
}

// Another tenant gets 404 on every route of an upload, and nothing changes.
func TestMultipartTenantIsolation(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	created, err := e.svc.Create(ctx, "owner", "key-mp-isolation-1", f.req)
	if err != nil {
		t.Fatal(err)
	}
	id := decode(t, created.Body).UploadID
	sign := api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: f.partSum(1)}}}
	for name, call := range map[string]func() (upload.Result, error){
		"status":   func() (upload.Result, error) { return e.svc.Status(ctx, "intruder", id) },
		"sign":     func() (upload.Result, error) { return e.svc.SignParts(ctx, "intruder", id, sign) },
		"list":     func() (upload.Result, error) { return e.svc.ListParts(ctx, "intruder", id) },
		"complete": func() (upload.Result, error) { return e.svc.Complete(ctx, "intruder", id, api.CompleteRequest{}) },
		"abort":    func() (upload.Result, error) { return e.svc.Abort(ctx, "intruder", id) },
	} {
		if reply, err := call(); !errors.Is(err, upload.ErrNotFound) {
			t.Errorf("%s by another tenant: %v %s, want not found", name, err, reply.Body)
		}
	}
	if n := e.multipartUploads(t); n != 1 {
		t.Fatalf("%d S3 multipart uploads after the intruder, want the owner's 1", n)
	}
	if _, err := e.svc.ListParts(ctx, "owner", id); err != nil {
		t.Fatalf("the owner's upload after the intruder: %v", err)
	}
}

// Signing keeps an upload that makes progress alive past its first
// window; an idle one expires like any claim; and no URL outlives its
// claim.
func TestSigningKeepsAnActiveUploadAlive(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2*time.Hour, func(c *upload.Config) { c.MaxUploadBytes = api.MaxMultipartBytes }) // longer than the 1 h keys
	f := newBigFile(t, 6<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-mp-keepalive-1", f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	id, _ := upload.ParseUploadID(u.UploadID)
	for range 3 { // 3 × 40 min: past the first hour
		e.Advance(40 * time.Minute)
		p := e.sign(t, "tenant", u.UploadID, f, 1)[1]
		rec, err := e.store.GetRecord(ctx, id)
		if err != nil {
			t.Fatalf("after %s of signing: %v", time.Until(e.Now()).Round(time.Minute), err)
		}
		expires, _ := time.Parse(time.RFC3339, p.ExpiresAt)
		if expires.After(rec.ExpiresAt) {
			t.Fatalf("URL expires %s, after its claim %s", expires, rec.ExpiresAt)
		}
	}
	e.Advance(61 * time.Minute) // idle for longer than the window
	if _, err := e.svc.ListParts(ctx, "tenant", u.UploadID); !errors.Is(err, upload.ErrNotFound) {
		t.Fatalf("idle upload after its window: %v, want not found", err)
	}
}

// Parts outside 1..partCount, and signing a single-PUT upload, are the
// client's errors.
func TestSignPartsRefusals(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-mp-refusals-01", f.req)
	if err != nil {
		t.Fatal(err)
	}
	id := decode(t, created.Body).UploadID
	for _, n := range []int{0, 3, -1} {
		_, err := e.svc.SignParts(ctx, "tenant", id, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: n, SHA256: f.partSum(1)}}})
		var v *api.RequestError
		if !errors.As(err, &v) || v.Field != "parts" || !strings.Contains(v.Message, "outside 1..2") {
			t.Errorf("part %d of 2: %v, want the part number refused as outside 1..2", n, err)
		}
	}
	single, err := e.svc.Create(ctx, "tenant", "key-mp-refusals-02", requestFor([]byte("small"), "text/plain"))
	if err != nil {
		t.Fatal(err)
	}
	sid := decode(t, single.Body).UploadID
	for name, call := range map[string]func() error{
		"sign": func() error {
			_, err := e.svc.SignParts(ctx, "tenant", sid, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: f.partSum(1)}}})
			return err
		},
		"list":     func() error { _, err := e.svc.ListParts(ctx, "tenant", sid); return err },
		"complete": func() error { _, err := e.svc.Complete(ctx, "tenant", sid, api.CompleteRequest{}); return err },
		"abort":    func() error { _, err := e.svc.Abort(ctx, "tenant", sid); return err },
	} {
		var v *api.RequestError
		if err := call(); !errors.As(err, &v) || v.Field != "uploadId" || !strings.Contains(v.Message, "single PUT") {
			t.Errorf("%s of a single-PUT upload: %v, want it refused as a single PUT", name, err)
		}
	}
}

// s3fake restates the service's S3 interface (it cannot import this
// package, whose own tests import it): the two are the same.
var (
	_ upload.ObjectAPI = s3fake.API(nil)
	_ s3fake.API       = upload.ObjectAPI(nil)
)

// midComplete shows S3 as another request's Complete leaves it while it
// works: the multipart upload already gone, the object not there yet.
func midComplete(objects upload.ObjectAPI) upload.ObjectAPI {
	return s3fake.Wrap(objects, s3fake.Hooks{
		ListParts: func(context.Context, *s3.ListPartsInput, s3fake.Next[s3.ListPartsInput, s3.ListPartsOutput]) (*s3.ListPartsOutput, error) {
			return nil, s3fake.APIError("ListParts", http.StatusNotFound, &types.NoSuchUpload{})
		},
		HeadObject: func(context.Context, *s3.HeadObjectInput, s3fake.Next[s3.HeadObjectInput, s3.HeadObjectOutput]) (*s3.HeadObjectOutput, error) {
			return nil, s3fake.APIError("HeadObject", http.StatusNotFound, &types.NotFound{})
		},
	})
}

// A Complete (or a list) that finds the S3 upload gone and no object yet is
// a 409 to retry, never "aborted": another Complete may be at work. (The
// chaos run found this: the record said aborted, then the object appeared.)
func TestUploadGoneWithoutObjectIsNotAborted(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-mid-complete-01", f)
	racing := e.withObjects(midComplete(e.objectsClient))
	for name, call := range map[string]func() error{
		"complete": func() error { _, err := racing.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{}); return err },
		"list":     func() error { _, err := racing.ListParts(ctx, "tenant", u.UploadID); return err },
	} {
		var inProgress *idempotency.InProgressError
		if err := call(); !errors.As(err, &inProgress) {
			t.Errorf("%s while a Complete is at work: %v, want in progress", name, err)
		}
	}
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil || decode(t, done.Body).Status != api.StatusCompleted || e.objectCount(t) != 1 {
		t.Fatalf("the Complete at work, then: %v %s (%d objects)", err, done.Body, e.objectCount(t))
	}

	// Past the bucket's abort-incomplete age, a gone upload without an
	// object is what the lifecycle rule left: aborted.
	old, err := e.svc.Create(ctx, "tenant", "key-mid-complete-02", f.req)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.AbortIncompleteAfter = 30 * time.Minute
	lifecycle := upload.New(e.store, e.signer, midComplete(e.objectsClient), cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	// Before that age, the status of an upload without an object is pending.
	oldID := decode(t, old.Body).UploadID
	if st, err := lifecycle.Status(ctx, "tenant", oldID); err != nil || decode(t, st.Body).Status != api.StatusPending {
		t.Fatalf("status before the lifecycle age: %v %s, want pending", err, st.Body)
	}
	e.Advance(31 * time.Minute)
	if _, err := lifecycle.Complete(ctx, "tenant", oldID, api.CompleteRequest{}); !errors.Is(err, upload.ErrNotPending) {
		t.Fatalf("gone past the lifecycle age: %v, want not pending (aborted)", err)
	}
	// Past it, the status route settles it too: no object, the S3 upload
	// aborted by the rule.
	other, err := e.svc.Create(ctx, "tenant", "key-mid-complete-03", f.req)
	if err != nil {
		t.Fatal(err)
	}
	e.Advance(31 * time.Minute)
	if st, err := lifecycle.Status(ctx, "tenant", decode(t, other.Body).UploadID); err != nil || decode(t, st.Body).Status != api.StatusAborted {
		t.Fatalf("status past the lifecycle age: %v %s, want aborted", err, st.Body)
	}
}

// When an abort is recorded while S3 completes the upload, the record
// stays aborted and the object S3 made is removed: aborted means no object.
func TestCompleteRacingAnAbortLeavesNoObject(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-complete-abort1", f)
	id, _ := upload.ParseUploadID(u.UploadID)
	// An abort is recorded while S3 completes the upload.
	racing := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{CompleteMultipartUpload: func(ctx context.Context, in *s3.CompleteMultipartUploadInput,
		next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
		if _, err := e.store.Update(ctx, id, u.UploadID, recordstore.Update{State: recordstore.StateAborted}); err != nil {
			t.Errorf("record the abort: %v", err)
		}
		return next(ctx, in)
	}}))
	if _, err := racing.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{}); !errors.Is(err, upload.ErrNotPending) {
		t.Fatalf("complete that raced an abort: %v, want not pending", err)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("%d objects for an aborted upload", n)
	}
}

// An object whose S3 event comes after its upload was recorded as aborted
// (a Complete that raced the abort and failed to record) is removed by
// finalize: aborted means no object.
func TestEventForAnAbortedUploadRemovesItsObject(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-event-aborted-1", f)
	out := e.completeAtS3(t, u, f, 2)
	id, _ := upload.ParseUploadID(u.UploadID)
	if _, err := e.store.Update(ctx, id, u.UploadID, recordstore.Update{State: recordstore.StateAborted}); err != nil {
		t.Fatal(err)
	}
	outcome, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: 6 << 20, ETag: unquote(aws.ToString(out.ETag)), Time: time.Now(), Multipart: true})
	if err != nil || outcome != upload.OutcomeDuplicate {
		t.Fatalf("event: %s %v", outcome, err)
	}
	if n := e.objectCount(t); n != 0 {
		t.Fatalf("%d objects for an aborted upload", n)
	}
}

// An abort that stopped half-way (S3's upload aborted, the record not yet
// marked) is finished by the next request that finds the S3 upload gone,
// instead of answering "in progress" until the key expires.
func TestHalfFinishedAbortIsSettled(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	// The request that finds S3's upload gone: a Complete (its ListParts),
	// or the client retrying its Abort (AbortMultipartUpload).
	for key, next := range map[string]func(uploadID string) error{
		"key-half-aborted-1": func(uploadID string) error {
			if _, err := e.svc.Complete(ctx, "tenant", uploadID, api.CompleteRequest{}); !errors.Is(err, upload.ErrNotPending) {
				return fmt.Errorf("complete after a half-finished abort: %v, want not pending (aborted)", err)
			}
			return nil
		},
		"key-half-aborted-2": func(uploadID string) error {
			reply, err := e.svc.Abort(ctx, "tenant", uploadID)
			if err != nil || decode(t, reply.Body).Status != api.StatusAborted {
				return fmt.Errorf("abort again after a half-finished abort: %v %s, want aborted", err, reply.Body)
			}
			return nil
		},
	} {
		u := e.sendAll(t, key, f)
		id, _ := upload.ParseUploadID(u.UploadID)
		rec, err := e.store.GetRecord(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// What Abort leaves when it stops after S3: the intent recorded, S3's
		// upload gone.
		if _, err := e.store.Update(ctx, id, u.UploadID, recordstore.Update{State: upload.StateAborting}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &e.bucket, Key: &u.StorageKey, UploadId: aws.String(s3UploadID(t, rec))}); err != nil {
			t.Fatal(err)
		}
		if err := next(u.UploadID); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		status, err := e.svc.Status(ctx, "tenant", u.UploadID)
		if err != nil || decode(t, status.Body).Status != api.StatusAborted {
			t.Fatalf("%s: status: %v %s, want aborted", key, err, status.Body)
		}
		if rec, err := e.store.GetRecord(ctx, id); err != nil || rec.State != recordstore.StateAborted {
			t.Fatalf("%s: the record is %q (%v), want %q", key, rec.State, err, recordstore.StateAborted)
		}
	}
}

// The service reads every page of S3's part list (S3 pages at 1,000 parts;
// here at one), and a server that repeats its marker cannot make it loop.
func TestPartsAreListedAcrossPages(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	u := e.sendAll(t, "key-paged-list-0001", f)
	// S3 is asked for one part per ListParts page, so that every listing
	// pages; the pages are counted.
	pages := 0
	svc := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{ListParts: func(ctx context.Context, in *s3.ListPartsInput,
		next s3fake.Next[s3.ListPartsInput, s3.ListPartsOutput]) (*s3.ListPartsOutput, error) {
		pages++
		one := *in
		one.MaxParts = aws.Int32(1)
		return next(ctx, &one)
	}}))

	listed, err := svc.ListParts(ctx, "tenant", u.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	var list api.PartList
	_ = json.Unmarshal(listed.Body, &list)
	if len(list.Parts) != 3 || pages != 3 {
		t.Fatalf("listed %d parts in %d pages, want 3 in 3: %s", len(list.Parts), pages, listed.Body)
	}
	done, err := svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil || decode(t, done.Body).Status != api.StatusCompleted {
		t.Fatalf("complete over paged lists: %v %s", err, done.Body)
	}

	stuck := e.sendAll(t, "key-paged-list-0002", f)
	// S3 answers every page as truncated, with the same marker, and
	// refuses to answer more than maxStuckPages, so that a listing that
	// loops fails at once rather than when the test times out.
	const maxStuckPages = 10
	pages = 0
	looping := s3fake.Wrap(e.objectsClient, s3fake.Hooks{ListParts: func(context.Context, *s3.ListPartsInput,
		s3fake.Next[s3.ListPartsInput, s3.ListPartsOutput]) (*s3.ListPartsOutput, error) {
		pages++
		if pages > maxStuckPages {
			return nil, fmt.Errorf("ListParts asked for page %d of a listing that repeats its marker", pages)
		}
		return &s3.ListPartsOutput{
			Parts:       []types.Part{{PartNumber: aws.Int32(1), Size: aws.Int64(partSize)}},
			IsTruncated: aws.Bool(true), NextPartNumberMarker: aws.String("1"),
		}, nil
	}})
	if _, err := e.withObjects(looping).ListParts(ctx, "tenant", stuck.UploadID); err != nil {
		t.Fatalf("a repeated marker: %v (%d pages asked)", err, pages)
	}
}

// s3UploadID is the S3 multipart upload id the record of an upload keeps.
func s3UploadID(t *testing.T, rec recordstore.Record) string {
	t.Helper()
	var f struct {
		ID string `dynamodbav:"s3_upload_id"`
	}
	if err := rec.Data.Decode(&f); err != nil || f.ID == "" {
		t.Fatalf("the record's S3 upload id: %q, %v", f.ID, err)
	}
	return f.ID
}
