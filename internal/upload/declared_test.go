package upload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Large uploads start at once: a multipart create need not give the whole
// file's SHA-256, which takes a pass over the file before the first byte
// goes. Each part's SHA-256 is what S3 checks; the client may declare them
// all at complete.

// withoutSHA256 is f's create without the whole file's SHA-256.
func (f bigFile) withoutSHA256() api.CreateRequest {
	req := f.req
	req.SHA256 = ""
	return req
}

// declaration declares every part of f with its SHA-256.
func (f bigFile) declaration() []api.PartToSign {
	n := api.PartCount(int64(len(f.data)), partSize)
	parts := make([]api.PartToSign, n)
	for i := range parts {
		parts[i] = api.PartToSign{PartNumber: i + 1, SHA256: f.partSum(i + 1)}
	}
	return parts
}

// sendParts signs and sends parts of f to the upload.
func (e *env) sendParts(t *testing.T, uploadID string, f bigFile, parts ...int) {
	t.Helper()
	for n, p := range e.sign(t, "tenant", uploadID, f, parts...) {
		if code := testenv.PutPart(p, f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
}

// createWithout creates f's multipart upload under key without sha256 and
// sends all its parts.
func (e *env) createWithout(t *testing.T, key string, f bigFile) api.Upload {
	t.Helper()
	created, err := e.svc.Create(context.Background(), "tenant", key, f.withoutSHA256())
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	parts := make([]int, u.Multipart.PartCount)
	for i := range parts {
		parts[i] = i + 1
	}
	e.sendParts(t, u.UploadID, f, parts...)
	return u
}

// wantPending fails t unless the upload is pending with its S3 upload
// still there and no object.
func (e *env) wantPending(t *testing.T, u api.Upload) {
	t.Helper()
	st, err := e.svc.Status(context.Background(), "tenant", u.UploadID)
	if err != nil || decode(t, st.Body).Status != api.StatusPending {
		t.Fatalf("status: %v %s, want pending", err, st.Body)
	}
	if n, m := e.objectCount(t), e.multipartUploads(t); n != 0 || m != 1 {
		t.Fatalf("%d objects and %d S3 multipart uploads, want none and the one", n, m)
	}
}

// A multipart create may leave sha256 out; its fingerprint is what it
// holds, so the same key with sha256 is another request (422), and the
// same request again is a replay. A single PUT still needs sha256: S3
// checks the file against it.
func TestCreateWithoutSHA256(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00001", f.withoutSHA256())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(created.Body, []byte(`"sha256"`)) || decode(t, created.Body).Multipart == nil {
		t.Fatalf("pending body %s: want multipart and no sha256", created.Body)
	}
	replay, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00001", f.withoutSHA256())
	if err != nil || replay.Effect != upload.EffectReplayed || !bytes.Equal(replay.Body, created.Body) {
		t.Fatalf("replay: %v %s %s", err, replay.Effect, replay.Body)
	}
	if _, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00001", f.req); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("the same key with sha256: %v, want key reused", err)
	}
	// And the other way round: a create with sha256, then without.
	if _, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00002", f.req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00002", f.withoutSHA256()); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("the same key without sha256: %v, want key reused", err)
	}
	single := requestFor([]byte("one PUT"), "text/plain")
	single.SHA256 = ""
	var v *api.RequestError
	if _, err := e.svc.Create(ctx, "tenant", "key-no-sha256-00003", single); !errors.As(err, &v) || v.Field != "sha256" {
		t.Fatalf("a single PUT without sha256: %v, want a 400 naming sha256", err)
	}
}

// Complete with every part declared, right: S3 stores the object, and the
// body carries S3's composite checksum and no sha256 (none was given).
// Every later complete answers that body, whatever it declares.
func TestCompleteWithDeclaredParts(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	u := e.createWithout(t, "key-declared-parts1", f)

	e.resetCounts()
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration()})
	if err != nil {
		t.Fatal(err)
	}
	// The declaration costs no call: the parts are listed anyway.
	e.wantCalls(t, "complete", map[string]int{"GetItem": 1, "UpdateItem": 1}, map[string]int{"ListParts": 1, "CompleteMultipartUpload": 1})
	c := decode(t, done.Body)
	if c.Status != api.StatusCompleted || c.CompositeSHA256 != compositeSHA256(f, 3) || bytes.Contains(done.Body, []byte(`"sha256"`)) {
		t.Fatalf("completed: %s; want compositeSha256 %s and no sha256", done.Body, compositeSHA256(f, 3))
	}
	if head := e.head(t, u.StorageKey); aws.ToInt64(head.ContentLength) != int64(len(f.data)) || e.objectCount(t) != 1 {
		t.Fatalf("stored %d bytes, %d objects", aws.ToInt64(head.ContentLength), e.objectCount(t))
	}
	wrong := f.declaration()
	wrong[0].SHA256 = strings.Repeat("0", 64)
	for name, req := range map[string]api.CompleteRequest{
		"no body": {}, "the same": {Parts: f.declaration()}, "a wrong part": {Parts: wrong},
		"a sha256": {SHA256: strings.Repeat("1", 64)}, "a partial list": {Parts: f.declaration()[:1]},
	} {
		again, err := e.svc.Complete(ctx, "tenant", u.UploadID, req)
		if err != nil || !bytes.Equal(again.Body, done.Body) {
			t.Errorf("complete again with %s: %v %s", name, err, again.Body)
		}
	}
	replay, err := e.svc.Create(ctx, "tenant", "key-declared-parts1", f.withoutSHA256())
	if err != nil || !bytes.Equal(replay.Body, done.Body) {
		t.Errorf("replay: %v %s", err, replay.Body)
	}
}

// One declared part SHA-256 that is not what S3 holds: 409 parts_mismatch
// naming it, and nothing stored: no object, the record pending, the S3
// upload kept. Completing with the right declaration then works.
func TestCompleteWithAWrongDeclaredPart(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	u := e.createWithout(t, "key-declared-wrong1", f)

	wrong := f.declaration()
	wrong[1].SHA256 = strings.Repeat("ab", 32)
	e.resetCounts()
	_, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: wrong})
	var mismatch *upload.PartsMismatchError
	if !errors.As(err, &mismatch) || mismatch.Count != 1 || fmt.Sprint(mismatch.Mismatched) != "[2]" {
		t.Fatalf("complete declaring a wrong part 2: %v, want parts_mismatch naming 2", err)
	}
	e.wantCalls(t, "refused complete", map[string]int{"GetItem": 1}, map[string]int{"ListParts": 1})
	e.wantPending(t, u)
	// The same declaration again gets the same answer.
	if _, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: wrong}); !errors.As(err, &mismatch) {
		t.Fatalf("again: %v", err)
	}
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration()})
	if err != nil || decode(t, done.Body).CompositeSHA256 != compositeSHA256(f, 3) {
		t.Fatalf("complete with the right declaration: %v %s", err, done.Body)
	}
}

// Missing parts answer parts_missing before any declaration is compared.
func TestDeclaredCompleteWithPartsMissing(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 11<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-declared-missing", f.withoutSHA256())
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	e.sendParts(t, u.UploadID, f, 1)
	wrong := f.declaration()
	wrong[0].SHA256 = strings.Repeat("0", 64)
	_, err = e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: wrong})
	var missing *upload.PartsMissingError
	if !errors.As(err, &missing) || fmt.Sprint(missing.Missing) != "[2 3]" {
		t.Fatalf("complete with parts 2 and 3 missing and part 1 declared wrong: %v, want parts_missing", err)
	}
}

// A key reused for another file of the same name, type and size, created
// without sha256 both times: the second client gets the first's upload,
// whose parts hold the first file. Declaring its own parts at complete
// tells it (409 parts_mismatch naming every part) instead of storing the
// other file under its name; it sends its own parts again, and completes.
func TestDeclaredPartsOfAnotherFile(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	first, second := newBigFile(t, 6<<20), newBigFile(t, 6<<20)
	u := e.createWithout(t, "key-declared-reused", first)

	again, err := e.svc.Create(ctx, "tenant", "key-declared-reused", second.withoutSHA256())
	if err != nil || again.Effect != upload.EffectReplayed || again.UploadID != u.UploadID {
		t.Fatalf("the second file's create: %v %s %s", err, again.Effect, again.Body)
	}
	_, err = e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: second.declaration()})
	var mismatch *upload.PartsMismatchError
	if !errors.As(err, &mismatch) || mismatch.Count != 2 || fmt.Sprint(mismatch.Mismatched) != "[1 2]" {
		t.Fatalf("complete declaring the second file's parts: %v, want parts_mismatch naming 1 and 2", err)
	}
	e.wantPending(t, u)

	// Signing again while pending signs the second file's digests: S3
	// replaces each part.
	e.sendParts(t, u.UploadID, second, 1, 2)
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: second.declaration()})
	if err != nil || decode(t, done.Body).CompositeSHA256 != compositeSHA256(second, 2) {
		t.Fatalf("complete after sending the second file's parts: %v %s", err, done.Body)
	}
	obj, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &e.bucket, Key: &u.StorageKey})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	var stored bytes.Buffer
	if _, err := stored.ReadFrom(obj.Body); err != nil || !bytes.Equal(stored.Bytes(), second.data) {
		t.Fatalf("the object is not the second file (%d bytes, %v)", stored.Len(), err)
	}
}

// The whole file's SHA-256 given at complete, for a create that gave none,
// is recorded and answered from then on; one that contradicts the create's
// is a 400.
func TestCompleteRecordsSHA256(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.createWithout(t, "key-complete-sha-01", f)
	whole := sha256.Sum256(f.data)
	sum := hex.EncodeToString(whole[:])

	e.resetCounts()
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration(), SHA256: strings.ToUpper(sum)})
	if err != nil {
		t.Fatal(err)
	}
	// One more UpdateItem: the sha256 is recorded before S3 completes.
	e.wantCalls(t, "complete", map[string]int{"GetItem": 1, "UpdateItem": 2}, map[string]int{"ListParts": 1, "CompleteMultipartUpload": 1})
	c := decode(t, done.Body)
	if c.SHA256 != sum || c.CompositeSHA256 != compositeSHA256(f, 2) {
		t.Fatalf("completed: %s; want sha256 %s and the composite", done.Body, sum)
	}
	for name, call := range map[string]func() (upload.Result, error){
		"complete again without a body": func() (upload.Result, error) {
			return e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
		},
		"status": func() (upload.Result, error) { return e.svc.Status(ctx, "tenant", u.UploadID) },
		"replay": func() (upload.Result, error) {
			return e.svc.Create(ctx, "tenant", "key-complete-sha-01", f.withoutSHA256())
		},
	} {
		res, err := call()
		if err != nil || !bytes.Equal(res.Body, done.Body) {
			t.Errorf("%s: %v %s", name, err, res.Body)
		}
	}

	// A create that gave sha256: the same at complete is fine, another
	// one is a 400 and completes nothing.
	g := newBigFile(t, 6<<20)
	v := e.sendAll(t, "key-complete-sha-02", g)
	var invalid *api.RequestError
	if _, err := e.svc.Complete(ctx, "tenant", v.UploadID, api.CompleteRequest{SHA256: sum}); !errors.As(err, &invalid) || invalid.Field != "sha256" {
		t.Fatalf("complete with another sha256 than the create's: %v, want a 400 naming sha256", err)
	}
	done, err = e.svc.Complete(ctx, "tenant", v.UploadID, api.CompleteRequest{SHA256: g.req.SHA256})
	if err != nil || decode(t, done.Body).SHA256 != g.req.SHA256 {
		t.Fatalf("complete with the create's sha256: %v %s", err, done.Body)
	}
}

// When the object's event is recorded before the complete call returns
// (finalize wins the race), or the complete's answer is lost and the
// retry finds the object, every answer is the same body, sha256 given at
// complete included: the complete recorded it before asking S3.
func TestFinalizeWinsTheRaceWithACompleteSHA256(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("answer lost %v", lose), func(t *testing.T) {
			ctx := context.Background()
			e := multipartEnv(t)
			f := newBigFile(t, 6<<20)
			key := fmt.Sprintf("key-finalize-race-%v", lose)
			u := e.createWithout(t, key, f)
			whole := sha256.Sum256(f.data)
			sum := hex.EncodeToString(whole[:])
			// The object's S3 event is delivered, and finalize records
			// it, before S3's answer to CompleteMultipartUpload reaches the
			// service; lose also loses that answer.
			var finalized []byte
			racing := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{CompleteMultipartUpload: func(ctx context.Context, in *s3.CompleteMultipartUploadInput,
				next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
				out, err := next(ctx, in)
				if err != nil {
					return out, err
				}
				outcome, err := e.svc.Finalize(ctx, upload.ObjectCreated{Bucket: e.bucket, Key: u.StorageKey, Size: int64(len(f.data)), ETag: aws.ToString(out.ETag), Time: time.Now(), Multipart: true})
				if err != nil || outcome != upload.OutcomeCompleted {
					t.Errorf("the event: %v %v", outcome, err)
				}
				st, err := e.svc.Status(ctx, "tenant", u.UploadID)
				if err != nil {
					t.Errorf("status after the event: %v", err)
				}
				finalized = st.Body
				if lose {
					return nil, errors.New("connection reset: the answer was lost")
				}
				return out, nil
			}}))
			req := api.CompleteRequest{Parts: f.declaration(), SHA256: sum}
			done, err := racing.Complete(ctx, "tenant", u.UploadID, req)
			if lose {
				if err == nil {
					t.Fatalf("the lost answer: %s", done.Body)
				}
				done, err = e.svc.Complete(ctx, "tenant", u.UploadID, req)
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := decode(t, done.Body); c.SHA256 != sum || c.CompositeSHA256 != compositeSHA256(f, 2) || !bytes.Equal(done.Body, finalized) {
				t.Fatalf("complete %s\nfinalize %s\nwant the same body, with sha256 %s", done.Body, finalized, sum)
			}
			replay, err := e.svc.Create(ctx, "tenant", key, f.withoutSHA256())
			if err != nil || !bytes.Equal(replay.Body, done.Body) {
				t.Fatalf("replay: %v %s", err, replay.Body)
			}
			if n := e.objectCount(t); n != 1 {
				t.Fatalf("%d objects", n)
			}
		})
	}
}

// The first sha256 recorded by a complete stays even when S3 then refuses
// that complete: a later complete with another one is a 400 and stores
// nothing; one with the same, or none, completes with the first.
func TestFailedCompleteKeepsItsSHA256(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f, other := newBigFile(t, 6<<20), newBigFile(t, 6<<20)
	u := e.createWithout(t, "key-complete-sha-kept", f)
	whole, otherWhole := sha256.Sum256(f.data), sha256.Sum256(other.data)
	sum, otherSum := hex.EncodeToString(whole[:]), hex.EncodeToString(otherWhole[:])

	// Another part is sent in place of the upload's part 1 just before
	// CompleteMultipartUpload, once: S3 then refuses the complete
	// (InvalidPart), as it does when a client re-sends a part between the
	// service's list and its complete.
	var replaced bool
	racing := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{CompleteMultipartUpload: func(ctx context.Context, in *s3.CompleteMultipartUploadInput,
		next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
		if !replaced {
			replaced = true
			e.sendParts(t, u.UploadID, other, 1)
		}
		return next(ctx, in)
	}}))
	_, err := racing.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration(), SHA256: sum})
	if !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("complete refused by S3 (a part replaced): %v, want a retryable error", err)
	}
	e.wantPending(t, u)
	id, err := upload.ParseUploadID(u.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	// The pending answer is the create's; the record holds the sha256, as
	// its 32 bytes.
	rec, err := e.store.GetRecord(ctx, id)
	var got struct {
		SHA256 []byte `dynamodbav:"sha256"`
	}
	if err == nil {
		err = rec.Data.Decode(&got)
	}
	if err != nil || hex.EncodeToString(got.SHA256) != sum {
		t.Fatalf("the record after the refused complete: %v, sha256 %x; want %s kept", err, got.SHA256, sum)
	}

	// The client sends its part 1 again, then completes.
	e.sendParts(t, u.UploadID, f, 1)
	_, err = e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration(), SHA256: otherSum})
	var invalid *api.RequestError
	if !errors.As(err, &invalid) || invalid.Field != "sha256" || !strings.Contains(invalid.Message, "differs from the sha256 recorded for this upload") {
		t.Fatalf("complete with another sha256 than the one recorded: %v, want a 400 naming sha256", err)
	}
	e.wantPending(t, u)
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration()})
	if c := decode(t, done.Body); err != nil || c.Status != api.StatusCompleted || c.SHA256 != sum || c.CompositeSHA256 != compositeSHA256(f, 2) {
		t.Fatalf("complete without sha256: %v %s; want completed with sha256 %s", err, done.Body, sum)
	}
}

// Two completes with different sha256s, both having read the upload
// before either recorded its own: the first recorded wins and completes;
// the other is a 400, never a 200 with a sha256 it did not give.
func TestConcurrentCompletesWithDifferentSHA256s(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.createWithout(t, "key-complete-sha-race", f)
	sums := [2]string{strings.Repeat("a", 64), strings.Repeat("b", 64)}

	// S3 holds each ListParts until two have come (both completes have
	// read the record), and CompleteMultipartUpload until one of the
	// completes has returned.
	listed, bothListed, firstReturned := make(chan struct{}, 2), make(chan struct{}), make(chan struct{})
	racing := e.withObjects(s3fake.Wrap(e.objectsClient, s3fake.Hooks{
		ListParts: func(ctx context.Context, in *s3.ListPartsInput, next s3fake.Next[s3.ListPartsInput, s3.ListPartsOutput]) (*s3.ListPartsOutput, error) {
			listed <- struct{}{}
			select {
			case <-bothListed:
			case <-time.After(10 * time.Second):
			}
			return next(ctx, in)
		},
		CompleteMultipartUpload: func(ctx context.Context, in *s3.CompleteMultipartUploadInput,
			next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
			select {
			case <-firstReturned:
			case <-time.After(10 * time.Second):
			}
			return next(ctx, in)
		},
	}))
	var results [2]upload.Result
	var errs [2]error
	var first sync.Once
	var wg sync.WaitGroup
	for i := range sums {
		wg.Go(func() {
			results[i], errs[i] = racing.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration(), SHA256: sums[i]})
			first.Do(func() { close(firstReturned) })
		})
	}
	for range sums {
		select {
		case <-listed:
		case <-time.After(10 * time.Second):
			t.Error("the two completes did not both list the parts")
		}
	}
	close(bothListed)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		var invalid *api.RequestError
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("both completes succeeded: %s and %s", results[winner].Body, results[i].Body)
			}
			winner = i
			if c := decode(t, results[i].Body); c.Status != api.StatusCompleted || c.SHA256 != sums[i] {
				t.Fatalf("the complete with sha256 %s answered %s", sums[i], results[i].Body)
			}
		case !errors.As(err, &invalid) || invalid.Field != "sha256":
			t.Fatalf("complete with sha256 %s: %v, want success or a 400 naming sha256", sums[i], err)
		}
	}
	if winner < 0 {
		t.Fatal("neither complete succeeded")
	}
	st, err := e.svc.Status(ctx, "tenant", u.UploadID)
	if err != nil || !bytes.Equal(st.Body, results[winner].Body) {
		t.Fatalf("status: %v %s; want the winner's body %s", err, st.Body, results[winner].Body)
	}
	if n := e.objectCount(t); n != 1 {
		t.Fatalf("%d objects", n)
	}
}

// A Complete answered without a checksum still records the object's
// composite: the completed body of an upload in parts always has
// compositeSha256, which clients check against their parts. (Before, the
// chaos run found completed bodies without it, from racing completes.)
func TestCompleteAnsweredWithoutChecksum(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.createWithout(t, "key-checksumless-complete", f) // its parts sent
	// S3 answers CompleteMultipartUpload without the object's checksum, as
	// Versity Gateway answers a Complete that repeats one already done (two
	// completes of one upload racing).
	checksumless := s3fake.Wrap(e.objectsClient, s3fake.Hooks{CompleteMultipartUpload: func(ctx context.Context, in *s3.CompleteMultipartUploadInput,
		next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
		out, err := next(ctx, in)
		if out != nil {
			out.ChecksumSHA256, out.ChecksumType = nil, ""
		}
		return out, err
	}})
	done, err := e.withObjects(checksumless).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{Parts: f.declaration()})
	if err != nil {
		t.Fatal(err)
	}
	if c := decode(t, done.Body); c.Status != api.StatusCompleted || c.CompositeSHA256 != compositeSHA256(f, 2) {
		t.Fatalf("completed body %s, want compositeSha256 %s", done.Body, compositeSHA256(f, 2))
	}
}
