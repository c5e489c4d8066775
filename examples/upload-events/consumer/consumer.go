// Package consumer is the example consumer of onceupload's upload events:
// it indexes each completed upload once, however often EventBridge delivers
// its Upload Completed event (once more only if recording that it did fails
// after the indexing; so the sink should write by upload id).
//
// Delivery is at least once: EventBridge and Lambda retry, and a
// re-published event (cmd/replay-events) carries a new event id and time
// but the same detail. [Consumer.Handle] therefore wraps the side effect
// with [idempotency.MakeIdempotent], keyed on the detail's uploadId and
// fingerprinted on the detail's members it knows, never the envelope:
//
//   - a second delivery, or a re-published event, is answered from the
//     record without indexing again;
//   - a delivery while the first is still indexing gets an
//     *idempotency.InProgressError, and its retry the recorded answer;
//   - a detail that differs under an upload id already indexed gets an
//     *idempotency.ConflictError (ErrKeyReused): something is wrong
//     upstream, and the error keeps it in sight;
//   - a failed side effect releases the upload id, so the retry indexes.
//
// The same Consumer runs as a Lambda function on an EventBridge rule
// (lambda.Start(c.Handle)) and, for local and chaos runs, as an
// http.Handler that takes the event's JSON envelope in a POST body.
package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Sink is the side effect to do once per upload: here, indexing it.
type Sink interface {
	Index(ctx context.Context, upload api.EventDetail) error
}

// SinkFunc is a function that is a Sink.
type SinkFunc func(ctx context.Context, upload api.EventDetail) error

// Index calls f.
func (f SinkFunc) Index(ctx context.Context, upload api.EventDetail) error { return f(ctx, upload) }

// LogSink indexes an upload by writing one log line: the example's stand-in
// for a search index or a catalogue table.
type LogSink struct{ Logger *slog.Logger }

// Index logs the upload.
func (s LogSink) Index(ctx context.Context, u api.EventDetail) error {
	s.Logger.InfoContext(ctx, "upload indexed", "uploadId", u.UploadID, "tenant", u.Tenant,
		"bucket", u.Bucket, "storageKey", u.StorageKey, "filename", u.Filename,
		"contentType", u.ContentType, "bytes", u.Bytes, "completedAt", u.CompletedAt)
	return nil
}

// Result is what Handle returns for an event, and what the HTTP adapter
// answers with. UploadID and Status are recorded with the upload's claim;
// Replayed and Ignored never are.
type Result struct {
	UploadID string `json:"uploadId,omitempty"`
	Status   string `json:"status,omitempty"`
	// Replayed: the upload was indexed before; this delivery was answered
	// from its record and did nothing.
	Replayed bool `json:"replayed,omitempty"`
	// Ignored: the event is not one the consumer takes (another source or
	// detail-type); nothing was recorded or indexed.
	Ignored bool `json:"ignored,omitempty"`
}

// ErrInvalidEvent: the event's detail is not an upload's (not a JSON
// object, or no uploadId). Retrying it cannot help.
var ErrInvalidEvent = errors.New("consumer: invalid upload event")

// DefaultScope keeps the consumer's records apart from other functions'
// in a shared table. It is fixed rather than the function's name
// (MakeIdempotent's default), so that a function renamed or replaced by
// CloudFormation, or the same consumer run locally, finds the records it
// made before.
const DefaultScope = "upload-events"

// DefaultHTTPTimeout is how long the HTTP adapter gives one delivery when
// the request's context has no deadline: the Lambda function's timeout in
// template.yaml, so that an interrupted delivery's claim blocks its
// upload id for as long in both.
const DefaultHTTPTimeout = 10 * time.Second

// Options configure New. A field left empty (or zero) takes its default.
type Options struct {
	// Source is the events' source the consumer takes; events of another
	// source are ignored. Defaults to api.EventSource; set it to the main
	// stack's EventSource parameter.
	Source string
	// DetailTypes are the detail-types the consumer takes; others are
	// ignored. Defaults to Upload Completed only.
	DetailTypes []string
	// Scope is the idempotency scope. Defaults to DefaultScope.
	Scope string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// HTTPTimeout bounds a delivery through ServeHTTP whose request has no
	// deadline. Defaults to DefaultHTTPTimeout.
	HTTPTimeout time.Duration
}

// delivery is the request of the idempotent index: the event's detail as
// delivered, and the upload Handle decoded from it. The key and the
// fingerprint are read from Detail alone (upload is not in its JSON), at
// the paths below: the same JSON at the same paths as when the whole event
// was the request, so records made before keep matching their events.
type delivery struct {
	Detail json.RawMessage `json:"detail"`
	upload api.EventDetail
}

// fingerprintPaths are the members of an event a redelivery must repeat:
// each member of api.EventDetail as this consumer knows it. It is a fixed
// list, not "detail", so that members added later never count; and it
// stays fixed when api.EventDetail grows, since the records made before a
// change hold fingerprints of this list, and a re-published event of their
// uploads would conflict with a longer one.
var fingerprintPaths = []string{
	"detail.uploadId", "detail.status", "detail.tenant", "detail.bucket",
	"detail.storageKey", "detail.filename", "detail.contentType", "detail.bytes",
	"detail.sha256", "detail.compositeSha256", "detail.etag",
	"detail.completedAt", "detail.abortedAt", "detail.partSize", "detail.partCount",
}

// Consumer indexes each upload once. Its methods are safe for concurrent
// use.
type Consumer struct {
	opts  Options
	index func(context.Context, delivery) (Result, error)
}

// New returns a consumer that indexes uploads into sink, at most once per
// upload id as recorded in store.
func New(store idempotency.Store, sink Sink, optFns ...func(*Options)) *Consumer {
	var o Options
	for _, f := range optFns {
		f(&o)
	}
	if o.Source == "" {
		o.Source = api.EventSource
	}
	if len(o.DetailTypes) == 0 {
		o.DetailTypes = []string{api.DetailTypeUploadCompleted}
	}
	if o.Scope == "" {
		o.Scope = DefaultScope
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HTTPTimeout <= 0 {
		o.HTTPTimeout = DefaultHTTPTimeout
	}
	index := func(ctx context.Context, dl delivery) (Result, error) {
		d := dl.upload
		if err := sink.Index(ctx, d); err != nil {
			return Result{}, fmt.Errorf("consumer: index upload %s: %w", d.UploadID, err)
		}
		return Result{UploadID: d.UploadID, Status: d.Status}, nil
	}
	c := &Consumer{opts: o}
	c.index = idempotency.MakeIdempotent(store, index, func(h *idempotency.HandlerOptions[delivery, Result]) {
		// The member paths are into the delivery as encoding/json writes
		// it: "detail" is the detail's JSON object, as delivered.
		h.KeyPath = "detail.uploadId"
		// Only the detail must repeat: the envelope's id and time are new
		// on every re-published event. And only the detail's members this
		// consumer knows, so a member a later onceupload adds does not
		// turn the re-published events of uploads indexed before it into
		// conflicts. Values count as canonical JSON: member order and
		// white space do not.
		h.FingerprintPaths = fingerprintPaths
		h.Scope = o.Scope
		h.Logger = o.Logger
		h.OnReplay = func(_ context.Context, r Result, _ idempotency.Record) Result {
			r.Replayed = true
			return r
		}
	})
	return c
}

// Handle indexes the upload of an Upload Completed event, once per upload
// id: it is the Lambda function's handler. Events of another source or
// detail-type are ignored. The errors:
//
//   - ErrInvalidEvent, for a detail that is not an upload's;
//   - an *idempotency.InProgressError (errors.Is ErrInProgress), while
//     another delivery of the upload is being indexed: retry after its
//     RetryAfter;
//   - an *idempotency.ConflictError (errors.Is ErrKeyReused), for a detail
//     that differs from the one indexed under its upload id;
//   - the sink's error, wrapped, after which the upload id is released and
//     a retry indexes it; or the store's (errors.Is ErrUnavailable when
//     DynamoDB throttled or could not be reached).
//
// Lambda's asynchronous retries, then the function's on-failure
// destination, keep every error in sight.
func (c *Consumer) Handle(ctx context.Context, ev events.EventBridgeEvent) (Result, error) {
	log := c.opts.Logger.With("eventId", ev.ID, "detailType", ev.DetailType)
	if ev.Source != c.opts.Source || !slices.Contains(c.opts.DetailTypes, ev.DetailType) {
		log.InfoContext(ctx, "upload event ignored", "source", ev.Source)
		return Result{Ignored: true}, nil
	}
	d, err := decodeDetail(ev.Detail)
	if err != nil {
		log.ErrorContext(ctx, "upload event refused", "error", err)
		return Result{}, err
	}
	log = log.With("uploadId", d.UploadID)
	res, err := c.index(ctx, delivery{Detail: ev.Detail, upload: d})
	switch {
	case err == nil && res.Replayed:
		log.InfoContext(ctx, "upload already indexed; duplicate delivery answered from its record")
	case err == nil:
	case errors.Is(err, idempotency.ErrInProgress):
		log.InfoContext(ctx, "upload being indexed by another delivery", "error", err)
	default:
		log.ErrorContext(ctx, "upload not indexed", "error", err)
	}
	return res, err
}

// decodeDetail decodes an event's detail. Unknown members are allowed (the
// producer may add some), but an upload id is required; a missing or null
// detail has none.
func decodeDetail(raw json.RawMessage) (api.EventDetail, error) {
	var d api.EventDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("%w: the detail is not an upload's JSON object: %w", ErrInvalidEvent, err)
	}
	if d.UploadID == "" {
		return d, fmt.Errorf("%w: the detail has no uploadId", ErrInvalidEvent)
	}
	return d, nil
}
