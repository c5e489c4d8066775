package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/onceupload/onceupload/internal/handlers/events"
	"github.com/onceupload/onceupload/internal/sqsdrain"
	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// TableAPI is the part of *dynamodb.Client the replay uses.
type TableAPI interface {
	dynamodb.ScanAPIClient
}

// Publisher puts the events of table items; *events.Handler is one.
type Publisher interface {
	PublishItems(ctx context.Context, items []map[string]types.AttributeValue) (int, error)
}

var (
	_ TableAPI  = (*dynamodb.Client)(nil)
	_ Publisher = (*events.Handler)(nil)
)

// visibility is how long received messages stay hidden from other
// readers: the whole run, since every message is received first (the
// ones not deleted are made visible again at its end).
const visibility = 15 * time.Minute

// Attributes of the table that no idempotency.Schema renames: a record's
// last write (epoch milliseconds) and, in the upload's own fields, when
// it completed or was aborted (RFC 3339).
const (
	attrUpdated     = "updated_at"
	attrCompletedAt = "data.completed_at"
)

// timeFormat is internal/upload's format of data.completed_at: UTC with
// milliseconds, every value the same length ("2026-12-01T10:00:00.000Z"),
// so that comparing the strings compares the times.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

type replayer struct {
	// queue is the failure queue, read with visibility.
	queue     *sqsdrain.Reader
	table     TableAPI
	publisher Publisher
	tableName string
	bucket    string
	schema    idempotency.Schema
	slack     time.Duration
	ttl       time.Duration
	now       func() time.Time
	// dryRun: -dry-run; the publisher's EventBridge is then a dryEvents.
	dryRun bool
	// skipUnreadable: -skip-unreadable (dropUnreadable).
	skipUnreadable bool
	log            io.Writer
	// held are the messages received and not deleted, by message id.
	held map[string]sqstypes.Message
}

type result struct {
	replayed, failed, unreadable int
	// skipped counts the items dropped by -skip-unreadable.
	skipped int
	// events is how many events were put (or, dry, would be).
	events int
	// old counts the messages whose window began more than ttl ago.
	old int
}

// failureRecord is what Lambda sends to the on-failure destination of a
// DynamoDB stream's event source mapping: where the batch was, not its
// records. Arrival times are RFC 3339, to the second.
type failureRecord struct {
	RequestContext struct {
		Condition  string `json:"condition"`
		RetryCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	Batch *batchInfo `json:"DDBStreamBatchInfo"`
}

type batchInfo struct {
	ShardID             string    `json:"shardId"`
	StartSequenceNumber string    `json:"startSequenceNumber"`
	EndSequenceNumber   string    `json:"endSequenceNumber"`
	FirstArrival        time.Time `json:"approximateArrivalOfFirstRecord"`
	LastArrival         time.Time `json:"approximateArrivalOfLastRecord"`
	BatchSize           int       `json:"batchSize"`
	StreamARN           string    `json:"streamArn"`
}

// message is a readable failure queue message, its record (whose Batch
// is set) and its window.
type message struct {
	sqstypes.Message
	rec        failureRecord
	start, end time.Time
}

func (m *message) id() string { return aws.ToString(m.MessageId) }

// window is a time interval, both ends included.
type window struct{ start, end time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end) }

// found is an item that the scan of a group returned, with the times that
// place it in windows.
type found struct {
	item                 map[string]types.AttributeValue
	updated, completed   time.Time
	hasUpdated, complete bool
}

// in reports whether the item belongs to w: written, completed or aborted
// in it. An item whose times cannot be read belongs to every window of
// the group the scan found it for.
func (f *found) in(w window) bool {
	if !f.hasUpdated && !f.complete {
		return true
	}
	return (f.hasUpdated && w.holds(f.updated)) || (f.complete && w.holds(f.completed))
}

// run replays up to limit messages: it receives them all, then replays
// each group of messages whose windows overlap. The messages it does not
// delete are made visible again at the end, for the alarm and the next
// run to see.
func (r *replayer) run(ctx context.Context, limit int) (result, error) {
	var res result
	r.held = map[string]sqstypes.Message{}
	msgs, err := r.receive(ctx, limit, &res)
	for _, g := range groups(msgs) {
		if err != nil {
			break
		}
		err = r.replay(ctx, g, &res)
	}
	return res, errors.Join(err, r.release(context.WithoutCancel(ctx)))
}

// release makes the messages still held visible again.
func (r *replayer) release(ctx context.Context) error {
	var errs []error
	for id, m := range r.held {
		if err := r.queue.Release(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("make message %s visible again: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (they become visible after %s)", err, visibility)
	}
	return nil
}

// receive reads up to limit messages and returns the readable ones; the
// others are counted and left in the queue.
func (r *replayer) receive(ctx context.Context, limit int, res *result) ([]*message, error) {
	var msgs []*message
	for m, err := range r.queue.Messages(ctx, limit) {
		if err != nil {
			return nil, fmt.Errorf("receive from the failure queue: %w", err)
		}
		id := aws.ToString(m.MessageId)
		r.held[id] = m
		msg, err := r.parse(m)
		if err != nil {
			res.unreadable++
			fmt.Fprintf(r.log, "message %s: %v; left in the queue\n", id, err)
			continue
		}
		if msg.rec.Batch.FirstArrival.Before(r.now().Add(-r.ttl)) {
			res.old++
			fmt.Fprintf(r.log, "message %s: its batch arrived %s, more than %s ago: uploads of it may have expired from the table\n",
				id, msg.rec.Batch.FirstArrival.Format(time.RFC3339), r.ttl)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// parse reads a message as a stream batch's on-failure record.
func (r *replayer) parse(m sqstypes.Message) (*message, error) {
	var rec failureRecord
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil || rec.Batch == nil {
		return nil, errors.New("not a DynamoDB stream batch's on-failure record")
	}
	b := rec.Batch
	if b.FirstArrival.IsZero() || b.LastArrival.IsZero() {
		return nil, errors.New("the on-failure record has no arrival times")
	}
	// A batch of another table's stream would find nothing to publish
	// here, and its message would be deleted for nothing.
	if table := streamTable(b.StreamARN); table != r.tableName {
		return nil, fmt.Errorf("a batch of the stream %q, not of table %s's", b.StreamARN, r.tableName)
	}
	if b.LastArrival.Before(b.FirstArrival) {
		b.FirstArrival, b.LastArrival = b.LastArrival, b.FirstArrival
	}
	// The arrival times are given to the second: a second more on each
	// side holds whatever they were rounded from.
	return &message{Message: m, rec: rec, start: b.FirstArrival.Add(-time.Second - r.slack), end: b.LastArrival.Add(time.Second + r.slack)}, nil
}

// streamTable is the table whose stream arn is
// ("arn:aws:dynamodb:us-east-1:123456789012:table/NAME/stream/LABEL"), or
// "" for an ARN of another shape.
func streamTable(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "/stream/")
	if !ok {
		return ""
	}
	return name
}

// group is messages whose windows overlap, and the span of their windows.
type group struct {
	msgs []*message
	span window
}

// groups sorts messages by their window's start and gathers those whose
// windows overlap, so that each stretch of time is scanned once.
func groups(msgs []*message) []group {
	slices.SortStableFunc(msgs, func(a, b *message) int { return a.start.Compare(b.start) })
	var out []group
	for _, m := range msgs {
		if len(out) == 0 || m.start.After(out[len(out)-1].span.end) {
			out = append(out, group{msgs: []*message{m}, span: window{m.start, m.end}})
			continue
		}
		g := &out[len(out)-1]
		g.msgs = append(g.msgs, m)
		g.span.end = later(g.span.end, m.end)
	}
	return out
}

// replay scans one group's window, publishes what it finds, and deletes
// each message of the group whose window's events were all put.
func (r *replayer) replay(ctx context.Context, g group, res *result) error {
	span := g.span
	items, err := r.scan(ctx, span)
	if err != nil {
		return err
	}
	items = r.dropUnreadable(items, res)
	fmt.Fprintf(r.log, "%s to %s: %d messages, %d completed or aborted uploads\n",
		span.start.Format(time.RFC3339), span.end.Format(time.RFC3339), len(g.msgs), len(items))
	// In a dry run, the publisher's EventBridge is a dryEvents, which
	// prints the entries instead of putting them.
	batch := make([]map[string]types.AttributeValue, len(items))
	for i, f := range items {
		batch[i] = f.item
	}
	handled, perr := r.publisher.PublishItems(ctx, batch)
	res.events += handled
	for _, m := range g.msgs {
		w := window{m.start, m.end}
		done := true
		for _, f := range items[handled:] {
			if f.in(w) {
				done = false
				break
			}
		}
		switch {
		case !done:
			res.failed++
			if r.dryRun {
				fmt.Fprintf(r.log, "message %s: not every event of its window could be put (%v); it would stay in the queue\n", m.id(), perr)
				continue
			}
			fmt.Fprintf(r.log, "message %s: not every event of its window was put (%v); left in the queue\n", m.id(), perr)
			continue
		case r.dryRun:
			fmt.Fprintf(r.log, "would delete message %s (%d records of shard %s, sequence numbers %s to %s; %s after %d attempts)\n",
				m.id(), m.rec.Batch.BatchSize, m.rec.Batch.ShardID, m.rec.Batch.StartSequenceNumber, m.rec.Batch.EndSequenceNumber,
				m.rec.RequestContext.Condition, m.rec.RequestContext.RetryCount)
		default:
			if err := r.queue.Delete(ctx, m.Message); err != nil {
				return fmt.Errorf("delete replayed message %s: %w", m.id(), err)
			}
			delete(r.held, m.id())
			fmt.Fprintf(r.log, "replayed message %s\n", m.id())
		}
		res.replayed++
	}
	return nil
}

// dropUnreadable returns items without those that are not uploads'
// records this code can read, each named in the log, if -skip-unreadable
// says so; else items as they are (publishing stops at the first such
// item, and its window's messages stay in the queue). An item dropped has
// no event: if it is an upload's record, its consumers never hear of it.
func (r *replayer) dropUnreadable(items []found, res *result) []found {
	if !r.skipUnreadable {
		return items
	}
	verb := "skipped"
	if r.dryRun {
		verb = "would skip"
	}
	kept := make([]found, 0, len(items))
	for _, f := range items {
		rec, err := recordstore.DecodeItem(r.schema, f.item)
		if err == nil {
			_, _, err = uploadrecord.EventOf(r.bucket, nil, &rec)
		}
		if err != nil {
			res.skipped++
			fmt.Fprintf(r.log, "%s item %s, which cannot be made into an event: %v\n", verb, itemKey(r.schema, f.item), err)
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

// itemKey names an item by its key attributes, as the table holds them.
func itemKey(schema idempotency.Schema, item map[string]types.AttributeValue) string {
	name := func(attr string) string {
		if v, ok := item[attr].(*types.AttributeValueMemberS); ok {
			return attr + "=" + strconv.Quote(v.Value)
		}
		return attr + " missing"
	}
	if schema.SortKey != "" {
		return name(schema.PartitionKey) + " " + name(schema.SortKey)
	}
	return name(schema.PartitionKey)
}

// dryEvents is the EventBridge of a dry run's publisher: it prints each
// entry it is given, as PublishItems built it (bus, source, detail-type
// and detail), and reports every one put, calling nothing.
type dryEvents struct{ log io.Writer }

var _ events.EventBridgeAPI = dryEvents{}

func (d dryEvents) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out := &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		fmt.Fprintf(d.log, "bus %s, source %s: would publish %s %s\n",
			aws.ToString(e.EventBusName), aws.ToString(e.Source), aws.ToString(e.DetailType), aws.ToString(e.Detail))
		out.Entries[i].EventId = aws.String("dry-run")
	}
	return out, nil
}

// scan returns the uploads that are completed or aborted and were
// written, completed or aborted in w, in the order of their last write.
// Both times are compared: updated_at is the write the stream recorded,
// and completed_at may be earlier than it (finalize records the time S3
// gave, and a status check or a replayed S3 event records it late).
func (r *replayer) scan(ctx context.Context, w window) ([]found, error) {
	state := expression.Name(r.schema.State)
	between := func(name string, lo, hi any) expression.ConditionBuilder {
		return expression.Name(name).Between(expression.Value(lo), expression.Value(hi))
	}
	filter := state.In(expression.Value(string(idempotency.StateCompleted)), expression.Value(string(recordstore.StateAborted))).And(
		expression.Or(
			between(attrUpdated, w.start.UnixMilli(), w.end.UnixMilli()),
			between(attrCompletedAt, w.start.UTC().Format(timeFormat), w.end.UTC().Format(timeFormat)),
		))
	expr, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		return nil, fmt.Errorf("scan expression: %w", err)
	}
	pages := dynamodb.NewScanPaginator(r.table, &dynamodb.ScanInput{
		TableName: &r.tableName, ConsistentRead: aws.Bool(true), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var items []found
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", r.tableName, err)
		}
		for _, item := range page.Items {
			items = append(items, r.place(item))
		}
	}
	// An item that cannot be read goes last: publishing stops at it, and
	// the others should not wait for it.
	slices.SortStableFunc(items, func(a, b found) int {
		if c := cmp.Compare(b2i(!a.hasUpdated), b2i(!b.hasUpdated)); c != 0 {
			return c
		}
		return a.updated.Compare(b.updated)
	})
	return items, nil
}

// place reads an item's times.
func (r *replayer) place(item map[string]types.AttributeValue) found {
	f := found{item: item}
	rec, err := recordstore.DecodeItem(r.schema, item)
	if err != nil {
		return f
	}
	f.updated, f.hasUpdated = rec.UpdatedAt, true
	var data struct {
		CompletedAt string `dynamodbav:"completed_at"`
	}
	if rec.Data.Decode(&data) == nil {
		if t, err := time.Parse(time.RFC3339Nano, data.CompletedAt); err == nil {
			f.completed, f.complete = t, true
		}
	}
	return f
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
