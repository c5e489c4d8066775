package upload_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Without a lifecycle rule (AbortIncompleteAfter zero) S3 aborts nothing
// by age, so a multipart upload S3 no longer has, with no object, is a
// Complete at work however old it is: pending, and a Complete is told to
// retry. The rule's age is internal/config's to default, not the
// service's.
func TestWithoutALifecycleRuleAgeAbortsNothing(t *testing.T) {
	ctx := context.Background()
	e := multipartEnv(t)
	f := newBigFile(t, 6<<20)
	created, err := e.svc.Create(ctx, "tenant", "key-no-rule-01", f.req)
	if err != nil {
		t.Fatal(err)
	}
	id := decode(t, created.Body).UploadID
	cfg := e.cfg
	cfg.AbortIncompleteAfter = 0
	gone := upload.New(e.store, e.signer, midComplete(e.objectsClient), cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	// Signing keeps an active upload's key alive: three days of it.
	for range 3 * 24 * 2 {
		e.Advance(30*time.Minute + time.Second)
		e.sign(t, "tenant", id, f, 1)
	}
	if st, err := gone.Status(ctx, "tenant", id); err != nil || decode(t, st.Body).Status != api.StatusPending {
		t.Fatalf("status three days on, no rule: %v %s, want pending", err, st.Body)
	}
	var inProgress *idempotency.InProgressError
	if _, err := gone.Complete(ctx, "tenant", id, api.CompleteRequest{}); !errors.As(err, &inProgress) {
		t.Fatalf("complete three days on, no rule: %v, want in progress", err)
	}
}
