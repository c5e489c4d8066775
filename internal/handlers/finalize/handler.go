// Package finalize adapts S3 ObjectCreated events to the upload service. It
// is the finalize function's handler, importable so that the local stack can
// run it in-process.
package finalize

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/internal/handlers/deadline"
	"github.com/onceupload/onceupload/pkg/upload"
)

// Service is what the handler needs of *upload.Service.
type Service interface {
	Finalize(ctx context.Context, obj upload.ObjectCreated) (upload.Outcome, error)
}

var _ Service = (*upload.Service)(nil)

// Handler records S3 ObjectCreated events. S3 delivers them at least once,
// possibly duplicated and out of order, several records per event.
type Handler struct {
	Service Service
	Logger  *slog.Logger
}

// Handle finalizes every record. It returns an error only when some record
// failed in a way a retry can cure, so that Lambda re-delivers the event;
// records already finalized are then duplicates, which are no-ops.
func (h *Handler) Handle(ctx context.Context, ev events.S3Event) error {
	ctx, cancel := deadline.Work(ctx)
	defer cancel()
	var errs []error
	for _, r := range ev.Records {
		if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
			h.Logger.InfoContext(ctx, "finalize: skipped an event that is not ObjectCreated", "event", r.EventName)
			continue
		}
		_, err := h.Service.Finalize(ctx, upload.ObjectCreated{
			Bucket: r.S3.Bucket.Name,
			Key:    r.S3.Object.URLDecodedKey, // events carry keys URL-encoded, '+' for space
			Size:   r.S3.Object.Size,
			ETag:   r.S3.Object.ETag,
			Time:   r.EventTime,
			// The event a multipart upload's CompleteMultipartUpload makes.
			Multipart: r.EventName == "ObjectCreated:CompleteMultipartUpload",
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		h.Logger.ErrorContext(ctx, "finalize: records failed; the event will be retried", "failed", len(errs), "error", err)
		return err
	}
	return nil
}
