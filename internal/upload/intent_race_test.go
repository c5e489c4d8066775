package upload_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// An abort records its intent before it asks S3, and the intent is not the
// outcome: a twin's Complete can take the upload in between, and then the
// abort finds the object and the upload ends completed. These tests hold an
// abort between its intent and its S3 call, run a complete there, then let
// the abort go on: every answer must agree with how the upload ended
// (issue 40, section 3: a complete answered 409 upload_not_pending for an
// upload that ended completed).

// heldAbort is S3 with an abort that waits before it is sent: reached is
// closed when the abort gets there (its intent is recorded by then), and
// it goes on when release is closed.
type heldAbort struct {
	upload.ObjectAPI
	reached, release chan struct{}
}

func (h *heldAbort) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	close(h.reached)
	<-h.release
	return h.ObjectAPI.AbortMultipartUpload(ctx, in, optFns...)
}

// abortAnswer is what an abort answered.
type abortAnswer struct {
	res upload.Result
	err error
}

// holdAbort starts an abort of u and returns once its intent is recorded
// and it waits to reach S3; go on lets it reach S3 and returns its answer.
func (e *env) holdAbort(t *testing.T, u api.Upload) (goOn func() abortAnswer) {
	t.Helper()
	held := &heldAbort{ObjectAPI: e.objectsClient, reached: make(chan struct{}), release: make(chan struct{})}
	answer := make(chan abortAnswer, 1)
	go func() {
		res, err := e.withObjects(held).Abort(context.Background(), "tenant", u.UploadID)
		answer <- abortAnswer{res, err}
	}()
	var release sync.Once
	// A test that stops early still lets the abort go, and waits for it.
	t.Cleanup(func() { release.Do(func() { close(held.release); <-answer }) })
	select {
	case <-held.reached:
	case a := <-answer:
		t.Fatalf("the abort answered before it reached S3: %v %s", a.err, a.res.Body)
	}
	return func() (a abortAnswer) {
		release.Do(func() {
			close(held.release)
			a = <-answer
		})
		return a
	}
}

// A complete that meets an abort's intent, while a twin's Complete took
// the upload at S3 before the abort could: the upload ends completed, so
// the complete answers the completed body, never upload_not_pending (S3
// shows the upload gone and the object there). The abort then answers
// upload_completed.
func TestCompleteMeetingAnAbortsIntent(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		sha256 bool // the complete gives the file's SHA-256, which the create did not
		hooks  func(twin func()) *interleaved
	}{
		{"twin at S3 before the list", false, func(twin func()) *interleaved { return &interleaved{before: twin} }},
		{"twin at S3 while the list reads the parts", false, func(twin func()) *interleaved { return &interleaved{after: twin, drop: 1} }},
		{"twin at S3, then S3 refuses the parts", false, func(twin func()) *interleaved {
			return &interleaved{beforeComplete: twin, completeErr: invalidPart}
		}},
		{"twin at S3, then S3 finds the upload gone", false, func(twin func()) *interleaved {
			return &interleaved{beforeComplete: twin, completeErr: &smithy.GenericAPIError{Code: "NoSuchUpload"}}
		}},
		{"twin at S3 after the list, then the sha256 is recorded", true, func(twin func()) *interleaved {
			return &interleaved{after: twin}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := multipartEnv(t)
			f := newBigFile(t, 6<<20)
			var req api.CompleteRequest
			if tc.sha256 {
				req.SHA256, f.req.SHA256 = f.req.SHA256, ""
			}
			u := e.sendAll(t, fmt.Sprintf("key-meets-intent-%02d", i), f)
			goOn := e.holdAbort(t, u)
			hooks := tc.hooks(func() { e.completeAtS3(t, u, f, 2) })
			hooks.ObjectAPI = e.objectsClient
			got, err := e.withObjects(hooks).Complete(ctx, "tenant", u.UploadID, req)
			if err != nil || decode(t, got.Body).Status != api.StatusCompleted {
				t.Errorf("the complete: %v %s; want completed (the twin completed the upload)", err, got.Body)
			}
			aborted := goOn()
			if !errors.Is(aborted.err, upload.ErrCompleted) {
				t.Errorf("the abort: %v %s; want upload_completed", aborted.err, aborted.res.Body)
			}
			e.wantEnded(t, u, api.StatusCompleted, 1)
		})
	}
}

// A complete that meets an abort's intent while the S3 upload is still
// there, and cannot complete it (its list of parts came back short, as
// while an abort removes them), carries the abort out: the abort that began
// may have stopped before S3. It answers upload_not_pending, and the abort,
// going on, finds the upload gone and answers aborted.
func TestCompleteMeetingAnAbortsIntentBeforeS3(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-meets-intent-before-s3", f)
	goOn := e.holdAbort(t, u)
	_, err := e.withObjects(&interleaved{ObjectAPI: e.objectsClient, after: func() {}, drop: 1}).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if !errors.Is(err, upload.ErrNotPending) {
		t.Errorf("the complete: %v; want upload_not_pending (it carried the abort out)", err)
	}
	if a := goOn(); a.err != nil || decode(t, a.res.Body).Status != api.StatusAborted {
		t.Errorf("the abort: %v %s; want aborted", a.err, a.res.Body)
	}
	e.wantEnded(t, u, api.StatusAborted, 0)
}

// An abort that stopped after recording its intent (S3 unavailable, its
// function timed out) leaves no upload stuck between: a complete that
// cannot complete carries the abort out, and one that can completes (it
// reached S3 before any abort did).
func TestAbortThatStoppedAfterItsIntent(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name  string
		short bool // the complete's list of parts comes back short
		want  string
	}{
		{"a complete that cannot complete", true, api.StatusAborted},
		{"a complete that can", false, api.StatusCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := multipartEnv(t)
			f := newBigFile(t, 6<<20)
			u := e.sendAll(t, fmt.Sprintf("key-abort-stopped-%02d", i), f)
			if _, err := e.withObjects(unavailableAbort{e.objectsClient}).Abort(ctx, "tenant", u.UploadID); err == nil {
				t.Fatal("the abort with S3 unavailable answered success")
			}
			hooks := &interleaved{ObjectAPI: e.objectsClient}
			if tc.short {
				hooks.after, hooks.drop = func() {}, 1
			}
			got, err := e.withObjects(hooks).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
			switch tc.want {
			case api.StatusAborted:
				if !errors.Is(err, upload.ErrNotPending) {
					t.Errorf("the complete: %v %s; want upload_not_pending", err, got.Body)
				}
			default:
				if err != nil || decode(t, got.Body).Status != tc.want {
					t.Errorf("the complete: %v %s; want %s", err, got.Body, tc.want)
				}
			}
			e.wantEnded(t, u, tc.want, map[string]int{api.StatusAborted: 0, api.StatusCompleted: 1}[tc.want])
		})
	}
}

// unavailableAbort is S3 answering every abort 503.
type unavailableAbort struct{ upload.ObjectAPI }

func (unavailableAbort) AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "Please reduce your request rate."}
}

// The abort's side: held between its intent and S3 while a whole complete
// (S3 and its record) completes the upload, the abort answers
// upload_completed, and the complete's body stands.
func TestAbortAfterItsIntentMeetsACompletion(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-abort-meets-completion", f)
	goOn := e.holdAbort(t, u)
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil || decode(t, done.Body).Status != api.StatusCompleted {
		t.Fatalf("the complete: %v %s; want completed (the abort has not reached S3)", err, done.Body)
	}
	if a := goOn(); !errors.Is(a.err, upload.ErrCompleted) {
		t.Errorf("the abort: %v %s; want upload_completed", a.err, a.res.Body)
	}
	e.wantEnded(t, u, api.StatusCompleted, 1)
}

// The abort's side when S3 tells it the upload is gone before a twin's
// Complete has made the object (S3 drops the upload when a Complete
// starts): the abort records aborted, so the object that then appears is
// removed and the complete answers upload_not_pending. Every answer agrees
// with "aborted", and no object is left.
func TestAbortFindingTheUploadGoneBeforeTheObject(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-abort-before-object", f)
	gone := &goneAtS3{ObjectAPI: e.objectsClient}
	var abortErr error
	var abortBody []byte
	hooks := &interleaved{ObjectAPI: e.objectsClient, beforeComplete: func() {
		res, err := e.withObjects(gone).Abort(ctx, "tenant", u.UploadID)
		abortErr, abortBody = err, res.Body
	}}
	_, err := e.withObjects(hooks).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if abortErr != nil || decode(t, abortBody).Status != api.StatusAborted {
		t.Errorf("the abort: %v %s; want aborted", abortErr, abortBody)
	}
	if !errors.Is(err, upload.ErrNotPending) {
		t.Errorf("the complete: %v; want upload_not_pending (the abort was recorded first)", err)
	}
	e.wantEnded(t, u, api.StatusAborted, 0)
}

// goneAtS3 answers every abort NoSuchUpload without sending it, as S3 does
// once a Complete has begun.
type goneAtS3 struct{ upload.ObjectAPI }

func (goneAtS3) AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "NoSuchUpload", Message: "The specified multipart upload does not exist."}
}

// wantEnded checks how u ended, as a later status sees it, and how many
// objects the bucket holds.
func (e *env) wantEnded(t *testing.T, u api.Upload, status string, objects int) {
	t.Helper()
	res, err := e.svc.Status(context.Background(), "tenant", u.UploadID)
	if err != nil || decode(t, res.Body).Status != status {
		t.Errorf("status after: %v %s; want %s", err, res.Body, status)
	}
	if got := e.objectCount(t); got != objects {
		t.Errorf("%d objects; want %d", got, objects)
	}
}
