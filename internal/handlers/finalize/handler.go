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
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/onceupload/onceupload/internal/handlers/deadline"
	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/idempotency"
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
	// Telemetry, if set, writes one log-and-metrics line per S3 record.
	Telemetry *telemetry.Recorder
}

// Handle finalizes every record. It returns an error only when some record
// failed in a way a retry can cure, so that Lambda re-delivers the event;
// records already finalized are then duplicates, which are no-ops.
func (h *Handler) Handle(ctx context.Context, ev events.S3Event) error {
	ctx, cancel := deadline.Work(ctx)
	defer cancel()
	var errs []error
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	for _, r := range ev.Records {
		rctx, measured := ctx, (*telemetry.Request)(nil)
		if h.Telemetry != nil {
			rctx, measured = h.Telemetry.Start(ctx)
		}
		outcome, err := h.finalize(rctx, r)
		if measured != nil {
			measured.Done(rctx, outcomeOf(outcome, err), "s3:"+r.EventName, requestID)
		}
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

// finalize records one S3 record.
func (h *Handler) finalize(ctx context.Context, r events.S3EventRecord) (upload.Outcome, error) {
	if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
		h.Logger.InfoContext(ctx, "finalize: skipped an event that is not ObjectCreated", "event", r.EventName)
		return upload.OutcomeSkipped, nil
	}
	return h.Service.Finalize(ctx, upload.ObjectCreated{
		Bucket: r.S3.Bucket.Name,
		Key:    r.S3.Object.URLDecodedKey, // events carry keys URL-encoded, '+' for space
		Size:   r.S3.Object.Size,
		ETag:   r.S3.Object.ETag,
		Time:   r.EventTime,
		// The event a multipart upload's CompleteMultipartUpload makes.
		Multipart: r.EventName == "ObjectCreated:CompleteMultipartUpload",
	})
}

// outcomeOf names a record's outcome for its line. The service's Outcomes
// and telemetry's are two vocabularies, mapped here one by one rather
// than by their strings matching; the switch has no default, so that an
// Outcome it lacks is an error line, which TestEveryOutcomeHasItsLine
// finds.
func outcomeOf(o upload.Outcome, err error) string {
	switch {
	case errors.Is(err, idempotency.ErrUnavailable):
		return telemetry.OutcomeUnavailable
	case err != nil:
		return telemetry.OutcomeError
	}
	switch o {
	case upload.OutcomeCompleted:
		return telemetry.OutcomeCompleted
	case upload.OutcomeDuplicate:
		return telemetry.OutcomeDuplicate
	case upload.OutcomeSkipped:
		return telemetry.OutcomeSkipped
	case upload.OutcomeRejected:
		return telemetry.OutcomeMismatch
	}
	return telemetry.OutcomeError
}
