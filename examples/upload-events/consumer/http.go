package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// MaxEventBytes is the largest body ServeHTTP reads: EventBridge's limit
// on an event's size.
const MaxEventBytes = 256 << 10

// ServeHTTP takes one event as EventBridge delivers it, its JSON envelope
// ({"version":"0","id":…,"detail-type":…,"source":…,"account":…,"time":…,
// "region":…,"resources":[],"detail":{…}}) in a POST body, and runs
// Handle on it. It answers 200 with the Result only once the upload is
// indexed and recorded (or was before, or the event is ignored), so a
// sender that retries until it gets a 2xx delivers at least once and the
// upload is indexed once. Otherwise, with an api.Error body:
//
//   - 400 invalid_request: not an event envelope, or its detail is not an
//     upload's (413 request_too_large: over MaxEventBytes); retrying
//     cannot help;
//   - 405 for a method other than POST;
//   - 409 idempotency_in_progress, with Retry-After: another delivery of the
//     upload is being indexed; retry after that many seconds;
//   - 422 idempotency_key_reuse: a different detail under an upload id
//     already indexed; retrying cannot help;
//   - 503 service_unavailable, with Retry-After: DynamoDB is unavailable;
//   - 500 internal_error: the sink (or the store) failed; the upload id was
//     released, retry.
//
// A request whose context has no deadline is given Options.HTTPTimeout,
// as a Lambda invocation is given its function's timeout.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidRequest, "POST an EventBridge event's JSON envelope")
		return
	}
	var ev events.EventBridgeEvent
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxEventBytes))
	if err := dec.Decode(&ev); err != nil || dec.More() {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, api.CodeRequestTooLarge, "an event is at most 256 KiB")
			return
		}
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "the body must be one EventBridge event's JSON envelope")
		return
	}
	ctx := r.Context()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.HTTPTimeout)
		defer cancel()
	}
	res, err := c.Handle(ctx, ev)
	var inProgress *idempotency.InProgressError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, ErrInvalidEvent):
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
	case errors.As(err, &inProgress):
		w.Header().Set("Retry-After", strconv.Itoa(inProgress.RetryAfterSeconds()))
		writeError(w, http.StatusConflict, api.CodeInProgress, "another delivery of this upload is being indexed; retry")
	case errors.Is(err, idempotency.ErrKeyReused):
		writeError(w, http.StatusUnprocessableEntity, api.CodeKeyReuse, "this upload was indexed with another detail")
	case errors.Is(err, idempotency.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the idempotency store is unavailable; retry")
	default:
		// Never echo the error: it may name internals. Handle logged it.
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "the upload was not indexed; retry")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // plain structs of strings and booleans
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, api.Error{Error: code, Message: message})
}
