// Package batch runs each record of an SQS, Kinesis or DynamoDB stream
// event through an idempotent record handler ([idempotency.MakeIdempotent])
// and answers with the records that failed (BatchItemFailures), so that
// one bad record does not make Lambda deliver the batch's good ones again,
// and a record delivered again after it succeeded is a replay, not a
// rerun. It is Powertools' batch processing utility, with its idempotency
// integration built in.
//
// The event source mapping must have FunctionResponseTypes
// [ReportBatchItemFailures]; without it Lambda ignores the response: a
// batch whose handler returned no error is deleted whole, its failed
// records with it. (A batch whose every record failed returns an error
// matching [ErrAllFailed] as well, so that it comes again either way.)
//
// A record fails when its handler returns an error (its claim is released,
// and its next delivery runs it again), when it is found in progress
// (another invocation holds it: [idempotency.ErrInProgress]; it will come
// again and then be a replay or a run), when its key was used for another
// record ([idempotency.ErrKeyReused]), when it has no key, and when the
// store fails. An ordered source (a FIFO queue, a Kinesis or DynamoDB
// stream) stops at its first failure and reports that record and every
// later one, unprocessed, as failed, so that none runs ahead of one before
// it.
package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// ErrAllFailed: every record of a non-empty batch failed. The handler
// returns it with the response, as Powertools does (throwOnFullBatchFailure),
// so that the batch comes again even where the event source mapping lacks
// ReportBatchItemFailures.
var ErrAllFailed = errors.New("batch: every record failed")

// Options configure [SQS], [Kinesis] and [DynamoDB]. Rec is the record
// type, Resp the record handler's response.
type Options[Rec, Resp any] struct {
	// Idempotency configures the MakeIdempotent wrapper each record goes
	// through. It runs after the source's defaults (see SQS, Kinesis and
	// DynamoDB), which it may change: for example, for SQS,
	// o.KeyPath = "body.orderId" to key on the message body instead of its
	// messageId. Defaults to nil.
	Idempotency func(*idempotency.HandlerOptions[Rec, Resp])
	// FIFO processes an SQS event in order, stopping at the first failure,
	// even when its records' event source ARN does not end in ".fifo"
	// (one that does is always processed so). Streams are always in order.
	// Defaults to false.
	FIFO bool
	// Parallelism is how many records of a standard SQS queue's batch run
	// at once. Ordered sources (FIFO queues, streams) always run one at a
	// time. Defaults to 1 when 0 or less.
	Parallelism int
	// Logger receives one line per failed record, and is the idempotency
	// wrapper's Logger unless Idempotency sets another. Defaults to
	// slog.Default(), as it is when SQS, Kinesis or DynamoDB is called.
	Logger *slog.Logger
}

// SQS returns a handler for SQS events that runs each message through fn,
// made idempotent over store, and reports the messages that failed by
// messageId.
//
// A message's idempotency key defaults to its messageId and its
// fingerprint to its body (never its attributes or receipt handle, which
// change on every delivery), as Powertools' example of batch processing
// with idempotency keys on messageId. A messageId is the same on every
// delivery of one message, which is what a failed batch item brings back;
// a message the producer sends again gets a new one, and runs again. To
// catch those too, key on the body: o.Idempotency =
// func(h *idempotency.HandlerOptions[events.SQSMessage, Resp]) { h.KeyPath
// = "body.orderId" }, or a path to whatever identifies the work (a message
// without it then fails with idempotency.ErrMissingKey).
//
// A batch from a FIFO queue (an event source ARN ending in ".fifo", or
// Options.FIFO) runs in order and stops at its first failure; others run
// in order, Options.Parallelism at a time.
func SQS[Resp any](store idempotency.Store, fn func(context.Context, events.SQSMessage) (Resp, error), optFns ...func(*Options[events.SQSMessage, Resp])) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	p := newProcessor(store, fn, func(h *idempotency.HandlerOptions[events.SQSMessage, Resp]) {
		h.KeyPath, h.FingerprintPaths = "messageId", []string{"body"}
	}, optFns)
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ordered := p.opts.FIFO || slices.ContainsFunc(ev.Records, func(m events.SQSMessage) bool { return strings.HasSuffix(m.EventSourceARN, ".fifo") })
		failed, err := p.run(ctx, ev.Records, func(m events.SQSMessage) string { return m.MessageId }, ordered)
		return events.SQSEventResponse{BatchItemFailures: items[events.SQSBatchItemFailure](failed)}, err
	}
}

// Kinesis returns a handler for Kinesis stream events that runs each
// record through fn, made idempotent over store, in order, and stops at
// the first failure, reporting it and every later record by sequence
// number: Lambda retries a shard from the lowest sequence number
// reported, so later records would come again anyway, and running them
// before it would break the shard's order.
//
// A record's idempotency key defaults to its event source ARN and eventID
// (the shard and sequence number), the same on every retry, and its
// fingerprint to its data.
func Kinesis[Resp any](store idempotency.Store, fn func(context.Context, events.KinesisEventRecord) (Resp, error), optFns ...func(*Options[events.KinesisEventRecord, Resp])) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	p := newProcessor(store, fn, streamDefaults[Resp](func(r events.KinesisEventRecord) (string, string) { return r.EventSourceArn, r.EventID }, "kinesis.data"), optFns)
	return func(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
		failed, err := p.run(ctx, ev.Records, func(r events.KinesisEventRecord) string { return r.Kinesis.SequenceNumber }, true)
		return events.KinesisEventResponse{BatchItemFailures: items[events.KinesisBatchItemFailure](failed)}, err
	}
}

// DynamoDB returns a handler for DynamoDB stream events that runs each
// record through fn, made idempotent over store, in order, and stops at
// the first failure, reporting it and every later record by sequence
// number, as [Kinesis] does.
//
// A record's idempotency key defaults to its event source ARN and eventID,
// the same on every retry, and its fingerprint to its change (the
// "dynamodb" member: keys, images, sequence number).
func DynamoDB[Resp any](store idempotency.Store, fn func(context.Context, events.DynamoDBEventRecord) (Resp, error), optFns ...func(*Options[events.DynamoDBEventRecord, Resp])) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	p := newProcessor(store, fn, streamDefaults[Resp](func(r events.DynamoDBEventRecord) (string, string) { return r.EventSourceArn, r.EventID }, "dynamodb"), optFns)
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		failed, err := p.run(ctx, ev.Records, func(r events.DynamoDBEventRecord) string { return r.Change.SequenceNumber }, true)
		return events.DynamoDBEventResponse{BatchItemFailures: items[events.DynamoDBBatchItemFailure](failed)}, err
	}
}

// streamDefaults key a stream record on its eventID within its stream
// (ids gives both), so that two streams feeding one function never share a
// record, and fingerprint it on the member at path. An empty eventID is a
// missing key.
func streamDefaults[Resp, Rec any](ids func(Rec) (arn, eventID string), path string) func(*idempotency.HandlerOptions[Rec, Resp]) {
	return func(h *idempotency.HandlerOptions[Rec, Resp]) {
		h.Key = func(_ context.Context, r Rec) (string, error) {
			arn, eventID := ids(r)
			if eventID == "" {
				return "", nil
			}
			return arn + "#" + eventID, nil
		}
		h.FingerprintPaths = []string{path}
	}
}

// item is the type of a batch item failure: events' SQS, Kinesis and
// DynamoDB ones are all this struct.
type item interface {
	~struct {
		ItemIdentifier string `json:"itemIdentifier"`
	}
}

// items are the failures of the items ids.
func items[F item](ids []string) []F {
	var out []F
	for _, id := range ids {
		out = append(out, F{ItemIdentifier: id})
	}
	return out
}

// processor runs the records of one source's batches.
type processor[Rec, Resp any] struct {
	opts Options[Rec, Resp]
	fn   func(context.Context, Rec) (Resp, error)
}

func newProcessor[Rec, Resp any](store idempotency.Store, fn func(context.Context, Rec) (Resp, error), defaults func(*idempotency.HandlerOptions[Rec, Resp]), optFns []func(*Options[Rec, Resp])) *processor[Rec, Resp] {
	p := &processor[Rec, Resp]{opts: Options[Rec, Resp]{Logger: slog.Default()}}
	for _, f := range optFns {
		f(&p.opts)
	}
	p.fn = idempotency.MakeIdempotent(store, fn, func(h *idempotency.HandlerOptions[Rec, Resp]) {
		h.Logger = p.opts.Logger
		defaults(h)
		if p.opts.Idempotency != nil {
			p.opts.Idempotency(h)
		}
	})
	return p
}

// run runs records and returns the identifiers of those that failed, in
// the batch's order, and ErrAllFailed (with the first failure's error)
// when every one did. Ordered, it stops at the first failure and reports
// every record from it on.
func (p *processor[Rec, Resp]) run(ctx context.Context, records []Rec, id func(Rec) string, ordered bool) ([]string, error) {
	errs := make([]error, len(records))
	if ordered || p.opts.Parallelism <= 1 {
		for i, r := range records {
			if errs[i] = p.one(ctx, r, id(r)); errs[i] != nil && ordered {
				for j := i + 1; j < len(records); j++ {
					errs[j] = errSkipped
				}
				break
			}
		}
	} else {
		sem := make(chan struct{}, p.opts.Parallelism)
		var wg sync.WaitGroup
		for i, r := range records {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs[i] = p.one(ctx, r, id(r))
			})
		}
		wg.Wait()
	}
	var failed []string
	var first error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, id(records[i]))
			if first == nil {
				first = fmt.Errorf("%s: %w", id(records[i]), err)
			}
		}
	}
	if len(records) > 0 && len(failed) == len(records) {
		return failed, fmt.Errorf("%w (%d records); the first, %w", ErrAllFailed, len(records), first)
	}
	return failed, nil
}

// errSkipped marks a record of an ordered batch after a failure: not run,
// reported failed.
var errSkipped = errors.New("batch: not run: an earlier record of the ordered batch failed")

// one runs one record; its error is its failure. A panic is the record
// handler's and goes on, its claim released by the idempotency wrapper.
func (p *processor[Rec, Resp]) one(ctx context.Context, r Rec, id string) error {
	_, err := p.fn(ctx, r)
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, idempotency.ErrInProgress) {
			level = slog.LevelInfo // another invocation holds it; it comes again
		}
		p.opts.Logger.Log(ctx, level, "batch: record failed; it will be delivered again", "itemIdentifier", id, "error", err)
	}
	return err
}
