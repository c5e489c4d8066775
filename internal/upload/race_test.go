package upload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/handlers/httpapi"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Races of a complete with an abort and with its twin (another complete of
// the same upload), on the real servers, each interleaving made
// deterministic by running the other request inside the complete's own S3
// calls (issue 33, section 4).

// interleaved is S3 with another request run at one point of a complete:
// before its ListParts is sent (before), after ListParts answered (after,
// with the last drop parts left out of that answer, as a listing of a
// directory an abort is removing shows them), or before its
// CompleteMultipartUpload (beforeComplete), which then answers completeErr
// instead of being sent, if set. Each runs once.
type interleaved struct {
	upload.ObjectAPI
	before, after, beforeComplete func()
	drop                          int
	completeErr                   error
}

func once(f *func()) {
	if g := *f; g != nil {
		*f = nil
		g()
	}
}

func (i *interleaved) ListParts(ctx context.Context, in *s3.ListPartsInput, optFns ...func(*s3.Options)) (*s3.ListPartsOutput, error) {
	once(&i.before)
	out, err := i.ObjectAPI.ListParts(ctx, in, optFns...)
	if i.after != nil {
		once(&i.after)
		if err == nil {
			out.Parts = out.Parts[:max(len(out.Parts)-i.drop, 0)]
		}
	}
	return out, err
}

func (i *interleaved) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	if i.beforeComplete != nil {
		once(&i.beforeComplete)
		if err := i.completeErr; err != nil {
			return nil, err
		}
	}
	return i.ObjectAPI.CompleteMultipartUpload(ctx, in, optFns...)
}

// invalidPart is S3's answer to a Complete that names a part it no longer
// holds: Versity Gateway's when an abort removed it mid-way, and a
// possible one where a twin Complete used it.
var invalidPart = &smithy.GenericAPIError{Code: "InvalidPart", Message: "One or more of the specified parts could not be found."}

// A complete that loses to an abort answers upload_not_pending
// (ErrNotPending), wherever the abort falls: it answered 409
// idempotency_in_progress (the S3 upload gone, read as a twin still at
// work), 409 parts_missing (an abort half-way through the parts) and 503
// (S3's InvalidPart read as unavailable). After each, the upload is
// aborted, without an object, and aborting again answers so.
func TestCompleteLosingToAnAbort(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name  string
		hooks func(abort func()) *interleaved
	}{
		{"abort before the list", func(abort func()) *interleaved { return &interleaved{before: abort} }},
		{"abort while the list reads the parts", func(abort func()) *interleaved { return &interleaved{after: abort, drop: 1} }},
		{"abort between the list and the complete", func(abort func()) *interleaved { return &interleaved{beforeComplete: abort} }},
		{"abort removing the parts the complete reads", func(abort func()) *interleaved {
			return &interleaved{beforeComplete: abort, completeErr: invalidPart}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := multipartEnv(t)
			f := newBigFile(t, 6<<20)
			u := e.sendAll(t, fmt.Sprintf("key-lose-to-abort-%02d", i), f)
			abort := func() {
				if _, err := e.svc.Abort(ctx, "tenant", u.UploadID); err != nil {
					t.Errorf("the abort: %v", err)
				}
			}
			hooks := tc.hooks(abort)
			hooks.ObjectAPI = e.objectsClient
			_, err := e.withObjects(hooks).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
			if !errors.Is(err, upload.ErrNotPending) {
				t.Fatalf("the complete that lost: %v, want not pending (409 upload_not_pending)", err)
			}
			again, err := e.svc.Abort(ctx, "tenant", u.UploadID)
			if err != nil || decode(t, again.Body).Status != api.StatusAborted || e.objectCount(t) != 0 {
				t.Fatalf("then: abort %v %s, %d objects; want aborted and none", err, again.Body, e.objectCount(t))
			}
		})
	}
}

// A complete that finds its upload completed by a twin answers 200 with
// the completed body, the twin's, wherever the twin falls: it answered
// 409 parts_missing (its list taken while the twin took the upload, which
// Versity Gateway shows as parts gone one by one) and 503 (S3's
// InvalidPart). The twin is a whole Complete, or one whose answer was lost
// after S3 completed (recorded by nobody yet).
func TestCompleteFindingItsTwinDone(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		atS3   bool // the twin's Complete reached S3, never its record
		hooks  func(twin func()) *interleaved
		byTwin bool // the twin answered, so its body is compared
	}{
		{"twin before the list", false, func(twin func()) *interleaved { return &interleaved{before: twin} }, true},
		{"twin while the list reads the parts", false, func(twin func()) *interleaved { return &interleaved{after: twin, drop: 1} }, true},
		{"twin between the list and the complete", false, func(twin func()) *interleaved { return &interleaved{beforeComplete: twin} }, true},
		{"twin, then S3 refuses the parts", false, func(twin func()) *interleaved {
			return &interleaved{beforeComplete: twin, completeErr: invalidPart}
		}, true},
		{"twin at S3 only, before the list", true, func(twin func()) *interleaved { return &interleaved{before: twin} }, false},
		{"twin at S3 only, while the list reads the parts", true, func(twin func()) *interleaved { return &interleaved{after: twin, drop: 1} }, false},
		{"twin at S3 only, then S3 refuses the parts", true, func(twin func()) *interleaved {
			return &interleaved{beforeComplete: twin, completeErr: invalidPart}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := multipartEnv(t)
			f := newBigFile(t, 6<<20)
			u := e.sendAll(t, fmt.Sprintf("key-twin-done-%02d", i), f)
			var twinBody []byte
			twin := func() {
				if tc.atS3 {
					e.completeAtS3(t, u, f, 2)
					return
				}
				done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
				if err != nil {
					t.Errorf("the twin: %v", err)
				}
				twinBody = done.Body
			}
			hooks := tc.hooks(twin)
			hooks.ObjectAPI = e.objectsClient
			got, err := e.withObjects(hooks).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
			if err != nil || decode(t, got.Body).Status != api.StatusCompleted {
				t.Fatalf("the complete that found its twin done: %v %s, want 200 completed", err, got.Body)
			}
			if tc.byTwin && !bytes.Equal(got.Body, twinBody) {
				t.Errorf("body %s\nthe twin's %s", got.Body, twinBody)
			}
			later, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
			if err != nil || !bytes.Equal(later.Body, got.Body) || e.objectCount(t) != 1 {
				t.Fatalf("a later complete: %v %s, %d objects; want the same body and one object", err, later.Body, e.objectCount(t))
			}
		})
	}
}

// answered is what a caller saw of one request: status, error code, and
// the completed or aborted body or the Retry-After of a 409 in progress.
type answered struct {
	status     int
	code       string
	body       string
	retryAfter string
}

func (a answered) String() string {
	if a.code == "" {
		return strconv.Itoa(a.status)
	}
	return strconv.Itoa(a.status) + " " + a.code
}

// through calls the presign handler over e's service, as API Gateway does.
func through(t *testing.T, h *httpapi.Handler, method, route, uploadID string) answered {
	t.Helper()
	req := events.APIGatewayV2HTTPRequest{RouteKey: method + " " + route, PathParameters: map[string]string{"uploadId": uploadID}}
	req.RequestContext.HTTP.Method = method
	resp, err := h.Handle(context.Background(), req)
	if err != nil {
		t.Errorf("%s: %v", route, err)
	}
	a := answered{status: resp.StatusCode, body: resp.Body, retryAfter: resp.Headers["Retry-After"]}
	var e api.Error
	if resp.StatusCode >= 400 && json.Unmarshal([]byte(resp.Body), &e) == nil {
		a.code = e.Error
	}
	return a
}

// raceEnv is a multipart env with the presign handler over its service,
// for anonymous callers.
func raceEnv(t *testing.T) (*env, *httpapi.Handler) {
	e := multipartEnv(t)
	return e, &httpapi.Handler{Service: e.svc, AllowAnonymous: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// sendAllAs is sendAll for tenant.
func (e *env) sendAllAs(t *testing.T, tenant, key string, f bigFile) api.Upload {
	t.Helper()
	created, err := e.svc.Create(context.Background(), tenant, key, f.req)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(t, created.Body)
	for n, p := range e.sign(t, tenant, u.UploadID, f, 1, 2) {
		if code := testenv.PutPart(p, f.part(n)); code != 200 {
			t.Fatalf("part %d: %d", n, code)
		}
	}
	return u
}

// at runs n calls of do at once and returns their answers in order.
func at(n int, do func(i int) answered) []answered {
	out := make([]answered, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = do(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// Concurrent completes of one upload: every answer is 200 with one body,
// or 409 idempotency_in_progress with Retry-After (a twin still at work);
// never parts_missing or 503. One object per upload. The counts are logged
// (go test -v) for the record.
func TestConcurrentCompletes(t *testing.T) {
	e, h := raceEnv(t)
	f := newBigFile(t, 6<<20)
	const rounds, n = 10, 4
	counts := map[string]int{}
	for round := range rounds {
		u := e.sendAllAs(t, httpapi.AnonymousTenant, fmt.Sprintf("key-concurrent-completes-%02d", round), f)
		answers := at(n, func(int) answered { return through(t, h, "POST", "/uploads/{uploadId}/complete", u.UploadID) })
		var body string
		for _, a := range answers {
			counts[a.String()]++
			switch {
			case a.status == 200 && (body == "" || a.body == body):
				body = a.body
			case a.status == 409 && a.code == api.CodeInProgress && a.retryAfter != "":
			default:
				t.Errorf("round %d: %s %s (Retry-After %q); want 200 with the one completed body, or 409 %s with Retry-After", round, a, a.body, a.retryAfter, api.CodeInProgress)
			}
		}
		final := through(t, h, "POST", "/uploads/{uploadId}/complete", u.UploadID)
		if final.status != 200 || body != "" && final.body != body || decode(t, []byte(final.body)).Status != api.StatusCompleted {
			t.Fatalf("round %d: the complete after them: %s %s, want 200 with %s", round, final, final.body, body)
		}
	}
	if got := e.objectCount(t); got != rounds {
		t.Errorf("%d objects for %d uploads", got, rounds)
	}
	t.Logf("%d rounds of %d concurrent completes: %v", rounds, n, counts)
}

// Completes and an abort of one upload at once: one of them wins, and
// every answer agrees with it. Completes answer 200 completed, 409
// upload_not_pending (the abort won) or 409 idempotency_in_progress; the
// abort 200 aborted, 409 upload_completed or 409 idempotency_in_progress;
// never parts_missing or 503. A later status says who won, and an aborted
// upload has no object.
func TestCompletesRacingAnAbort(t *testing.T) {
	e, h := raceEnv(t)
	f := newBigFile(t, 6<<20)
	const rounds, n = 10, 3
	counts := map[string]int{}
	completed := 0
	for round := range rounds {
		u := e.sendAllAs(t, httpapi.AnonymousTenant, fmt.Sprintf("key-completes-and-abort-%02d", round), f)
		answers := at(n+1, func(i int) answered {
			if i == n {
				return through(t, h, "DELETE", "/uploads/{uploadId}", u.UploadID)
			}
			return through(t, h, "POST", "/uploads/{uploadId}/complete", u.UploadID)
		})
		status := through(t, h, "GET", "/uploads/{uploadId}", u.UploadID)
		won := decode(t, []byte(status.body)).Status
		for i, a := range answers {
			what := "complete"
			if i == n {
				what = "abort"
			}
			counts[what+" "+a.String()]++
			inProgress := a.status == 409 && a.code == api.CodeInProgress && a.retryAfter != ""
			ok := inProgress
			switch {
			case what == "complete" && won == api.StatusCompleted:
				ok = ok || a.status == 200 && a.body == status.body
			case what == "complete" && won == api.StatusAborted:
				ok = ok || a.status == 409 && a.code == api.CodeUploadNotPending
			case what == "abort" && won == api.StatusCompleted:
				ok = ok || a.status == 409 && a.code == api.CodeUploadCompleted
			case what == "abort" && won == api.StatusAborted:
				ok = ok || a.status == 200 && a.body == status.body
			}
			if !ok {
				t.Errorf("round %d: the upload ended %s, yet a %s answered %s %s (Retry-After %q)", round, won, what, a, a.body, a.retryAfter)
			}
		}
		switch won {
		case api.StatusCompleted:
			completed++
		case api.StatusAborted:
		default:
			t.Errorf("round %d: the upload is %s after its completes and abort", round, won)
		}
	}
	if got := e.objectCount(t); got != completed {
		t.Errorf("%d objects for %d completed uploads (an aborted one has none)", got, completed)
	}
	t.Logf("%d rounds of %d completes and an abort at once: %v; %d completed, %d aborted", rounds, n, counts, completed, rounds-completed)
}

// A list of parts that is short once and whole when taken again changed
// under the complete (a twin Complete that failed and put the upload back,
// say): the complete answers in progress, to retry, not parts_missing, and
// the retry completes.
func TestShortListThenWholeIsRetried(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	u := e.sendAll(t, "key-short-then-whole", f)
	_, err := e.withObjects(&interleaved{ObjectAPI: e.objectsClient, after: func() {}, drop: 1}).Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	var inProgress *idempotency.InProgressError
	if !errors.As(err, &inProgress) || inProgress.RetryAfter <= 0 {
		t.Fatalf("a list short once: %v, want in progress with a retry time", err)
	}
	done, err := e.svc.Complete(ctx, "tenant", u.UploadID, api.CompleteRequest{})
	if err != nil || decode(t, done.Body).Status != api.StatusCompleted {
		t.Fatalf("the retry: %v %s", err, done.Body)
	}
}
