// Package events turns the idempotency table's stream into upload events:
// one Upload Completed or Upload Aborted event on EventBridge for each
// record that becomes completed or aborted. It is the events function's
// handler, importable so that the dev stack runs the same code.
//
// The record's transition is the event's only source: nothing publishes
// beside the write, so a function that dies between recording and
// publishing loses nothing; the stream hands the change to this handler
// until it is published or its retries run out (then the on-failure
// destination keeps the batch's place, and cmd/replay-events rebuilds the
// events from the table). Delivery is at least once.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/onceupload/onceupload/internal/handlers/deadline"
	"github.com/onceupload/onceupload/internal/tableitem"
	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// EventBridgeAPI is what the handler calls; *eventbridge.Client has it.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ EventBridgeAPI = (*eventbridge.Client)(nil)

// maxEntries is PutEvents' limit of entries per call.
const maxEntries = 10

// Handler publishes the events of a batch of stream records.
type Handler struct {
	Events EventBridgeAPI
	// Bus is the event bus's name or ARN ("default" for the account's).
	Bus string
	// Source is the events' source (api.EventSource unless configured).
	Source string
	// Bucket is the upload bucket, which the events name.
	Bucket string
	Schema idempotency.Schema
	Logger *slog.Logger
}

// pending is an event waiting to be put, and the record it came from:
// the stream record's sequence number (Handle) or the item's index
// (PublishItems).
type pending struct {
	entry ebtypes.PutEventsRequestEntry
	seq   string
	item  int
	id    string
}

// Handle publishes the batch's events in order. Records of a shard arrive
// in order, and Lambda retries a shard from the lowest sequence number
// reported as failed, so the first failure ends the batch: what came
// before it is published, it and what follows are retried. An error is
// returned only for a batch that cannot be read at all.
func (h *Handler) Handle(ctx context.Context, ev lambdaevents.DynamoDBEvent) (lambdaevents.DynamoDBEventResponse, error) {
	ctx, cancel := deadline.Work(ctx)
	defer cancel()
	var batch []pending
	failedAt := ""
	for _, r := range ev.Records {
		before, after, err := h.streamRecords(r.Change.OldImage, r.Change.NewImage)
		var p pending
		var ok bool
		if err == nil {
			p, ok, err = h.shape(before, after)
		}
		if err != nil {
			// Not an upload's record, or one this code cannot read: retrying
			// will not change it, but failing keeps it in sight (the retries
			// end in the failure queue and its alarm) instead of dropping an
			// upload's event.
			h.Logger.ErrorContext(ctx, "upload event: cannot shape the record", "sequence", r.Change.SequenceNumber, "error", err)
			failedAt = r.Change.SequenceNumber
			break
		}
		if ok {
			p.seq = r.Change.SequenceNumber
			batch = append(batch, p)
		}
	}
	if k := h.put(ctx, batch); k >= 0 {
		failedAt = batch[k].seq
	}
	if failedAt == "" {
		return lambdaevents.DynamoDBEventResponse{}, nil
	}
	return lambdaevents.DynamoDBEventResponse{BatchItemFailures: []lambdaevents.DynamoDBBatchItemFailure{{ItemIdentifier: failedAt}}}, nil
}

// shape returns the event of a change (the record before and after it,
// nil for a side it lacks), and false for a change that makes none.
func (h *Handler) shape(before, after *recordstore.Record) (pending, bool, error) {
	if after == nil {
		return pending{}, false, nil
	}
	e, ok, err := uploadrecord.EventOf(h.Bucket, before, after)
	if err != nil || !ok {
		return pending{}, false, err
	}
	detail, err := json.Marshal(e.Detail)
	if err != nil {
		return pending{}, false, fmt.Errorf("encode detail: %w", err)
	}
	return pending{
		entry: ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String(h.Bus), Source: aws.String(h.Source),
			DetailType: aws.String(e.DetailType), Detail: aws.String(string(detail)),
		},
		id: e.Detail.UploadID,
	}, true, nil
}

// streamRecords decodes a change's images (recordstore decodes them): nil
// for an image the change lacks. A new image that is not a record is an
// error, so that it is seen rather than skipped; an old one is no record
// before the change, which cannot have been this claim's final state.
func (h *Handler) streamRecords(oldImage, newImage map[string]lambdaevents.DynamoDBAttributeValue) (before, after *recordstore.Record, err error) {
	if newImage == nil {
		return nil, nil, nil
	}
	rec, err := tableitem.DecodeStreamImage(h.Schema, newImage)
	if err != nil {
		return nil, nil, fmt.Errorf("upload event: new image: %w", err)
	}
	if oldImage != nil {
		if prev, err := tableitem.DecodeStreamImage(h.Schema, oldImage); err == nil {
			before = &prev
		}
	}
	return before, &rec, nil
}

// put publishes batch in calls of up to maxEntries, in order, and returns
// the index in batch of the first entry that was not put (-1 if every one
// was).
func (h *Handler) put(ctx context.Context, batch []pending) int {
	for start := 0; start < len(batch); start += maxEntries {
		chunk := batch[start:min(start+maxEntries, len(batch))]
		entries := make([]ebtypes.PutEventsRequestEntry, len(chunk))
		for i, p := range chunk {
			entries[i] = p.entry
		}
		out, err := h.Events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			h.Logger.ErrorContext(ctx, "upload event: PutEvents failed", "events", len(chunk), "error", err)
			return start
		}
		for i, p := range chunk {
			if i < len(out.Entries) && out.Entries[i].ErrorCode != nil {
				// Entries keep the request's order; one failed entry's
				// record and everything after it are retried. PutEvents is
				// not atomic: the entries after it that were put will be
				// put again, so they are logged as such.
				h.Logger.ErrorContext(ctx, "upload event: not put", "uploadId", p.id,
					"code", aws.ToString(out.Entries[i].ErrorCode), "message", aws.ToString(out.Entries[i].ErrorMessage))
				for j := i + 1; j < len(chunk) && j < len(out.Entries); j++ {
					if out.Entries[j].ErrorCode == nil {
						h.Logger.InfoContext(ctx, "upload event, to be put again with the failed one", "detailType", aws.ToString(chunk[j].entry.DetailType), "uploadId", chunk[j].id)
					}
				}
				return start + i
			}
			if i >= len(out.Entries) && out.FailedEntryCount > 0 {
				return start + i // an answer without per-entry results: trust none
			}
			h.Logger.InfoContext(ctx, "upload event", "detailType", aws.ToString(p.entry.DetailType), "uploadId", p.id)
		}
	}
	return -1
}
