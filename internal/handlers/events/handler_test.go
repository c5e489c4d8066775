package events

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// fakeBus records PutEvents calls and fails as told: fail(call, entry)
// returns an entry's error code, or "" to take it; callErr fails a whole
// call.
type fakeBus struct {
	calls   [][]ebtypes.PutEventsRequestEntry
	fail    func(call, entry int) string
	callErr func(call int) error
}

func (f *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	call := len(f.calls)
	f.calls = append(f.calls, in.Entries)
	if f.callErr != nil {
		if err := f.callErr(call); err != nil {
			return nil, err
		}
	}
	out := &eventbridge.PutEventsOutput{}
	for i := range in.Entries {
		e := ebtypes.PutEventsResultEntry{EventId: aws.String("id")}
		if f.fail != nil {
			if code := f.fail(call, i); code != "" {
				e = ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("refused")}
				out.FailedEntryCount++
			}
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// image is a stream image of an upload's record in state, as the store
// writes it (its attribute names are the default schema's).
func image(n int, state string) map[string]lambdaevents.DynamoDBAttributeValue {
	s, num := lambdaevents.NewStringAttribute, lambdaevents.NewNumberAttribute
	id := strconv.Itoa(n)
	data := map[string]lambdaevents.DynamoDBAttributeValue{
		"object_key": s("uploads/" + id), "filename": s("f" + id + ".txt"), "content_type": s("text/plain"), "size": num("10"),
	}
	if state == "completed" {
		data["etag"], data["completed_at"] = s("etag"+id), s("2026-12-01T10:00:00.000Z")
	}
	return map[string]lambdaevents.DynamoDBAttributeValue{
		"pk": s("0123456789abcdef0123456789abcd" + strconv.Itoa(10+n)), "tenant": s("anonymous"), "claim_id": s("upload-" + id),
		"fingerprint": s("fp"), "state": s(state), "response_status": num("201"), "created_at": num("1"), "updated_at": num("2"),
		"expires_at": num("1900000000"), "data": lambdaevents.NewMapAttribute(data),
	}
}

func record(n int, oldState, newState string) lambdaevents.DynamoDBEventRecord {
	r := lambdaevents.DynamoDBEventRecord{EventName: "MODIFY", Change: lambdaevents.DynamoDBStreamRecord{SequenceNumber: strconv.Itoa(1000 + n), NewImage: image(n, newState)}}
	if oldState != "" {
		r.Change.OldImage = image(n, oldState)
	}
	return r
}

func handler(bus *fakeBus) *Handler {
	return &Handler{Events: bus, Bus: "default", Source: api.EventSource, Bucket: "b", Schema: idempotency.DefaultSchema(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func failures(resp lambdaevents.DynamoDBEventResponse) []string {
	var seqs []string
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

func TestOneEventPerTransition(t *testing.T) {
	bus := &fakeBus{}
	var ev lambdaevents.DynamoDBEvent
	ev.Records = append(ev.Records,
		record(0, "pending", "completed"),
		record(1, "completed", "completed"), // a repeat of a final image: nothing
		record(2, "in_progress", "pending"), // not final: nothing
		record(3, "pending", "aborted"),
	)
	for n := 4; n < 16; n++ { // enough for two PutEvents calls
		ev.Records = append(ev.Records, record(n, "pending", "completed"))
	}
	ev.Records = append(ev.Records, lambdaevents.DynamoDBEventRecord{EventName: "REMOVE", Change: lambdaevents.DynamoDBStreamRecord{SequenceNumber: "9", OldImage: image(99, "completed")}})
	resp, err := handler(bus).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v %v", resp, err)
	}
	if len(bus.calls) != 2 || len(bus.calls[0]) != 10 || len(bus.calls[1]) != 4 {
		t.Fatalf("calls of %d entries, want 10 then 4", len(bus.calls))
	}
	first := bus.calls[0]
	var d api.EventDetail
	if err := json.Unmarshal([]byte(aws.ToString(first[0].Detail)), &d); err != nil {
		t.Fatal(err)
	}
	if aws.ToString(first[0].DetailType) != api.DetailTypeUploadCompleted || d.UploadID != "upload-0" || d.ETag != "etag0" ||
		d.Bytes != 10 || d.Bucket != "b" || aws.ToString(first[0].Source) != "onceupload" || aws.ToString(first[0].EventBusName) != "default" {
		t.Errorf("first entry %+v, detail %+v", first[0], d)
	}
	if aws.ToString(first[1].DetailType) != api.DetailTypeUploadAborted {
		t.Errorf("second entry %q, want the aborted upload's", aws.ToString(first[1].DetailType))
	}
}

// A failed entry, or a failed call, ends the batch there: its record is
// reported, and nothing after it is put in this invocation.
func TestFirstFailureIsReported(t *testing.T) {
	batch := lambdaevents.DynamoDBEvent{}
	for n := range 14 {
		batch.Records = append(batch.Records, record(n, "pending", "completed"))
	}
	bus := &fakeBus{fail: func(call, entry int) string {
		if call == 0 && entry >= 3 {
			return "ThrottlingException"
		}
		return ""
	}}
	resp, _ := handler(bus).Handle(context.Background(), batch)
	if got := failures(resp); len(got) != 1 || got[0] != "1003" || len(bus.calls) != 1 {
		t.Errorf("entry 3 refused: failures %v after %d calls, want [1003] after 1", got, len(bus.calls))
	}

	bus = &fakeBus{callErr: func(call int) error {
		if call == 1 {
			return errors.New("connection reset")
		}
		return nil
	}}
	resp, _ = handler(bus).Handle(context.Background(), batch)
	if got := failures(resp); len(got) != 1 || got[0] != "1010" {
		t.Errorf("second call failed: failures %v, want [1010] (its first record)", got)
	}
}

// A record that is not an upload's fails the batch at that record, after
// the events before it are put: retries end in the failure queue rather
// than an upload's event being dropped without a trace.
func TestUnreadableRecordIsReported(t *testing.T) {
	bad := record(1, "pending", "completed")
	delete(bad.Change.NewImage, "claim_id")
	bus := &fakeBus{}
	resp, _ := handler(bus).Handle(context.Background(), lambdaevents.DynamoDBEvent{Records: []lambdaevents.DynamoDBEventRecord{
		record(0, "pending", "completed"), bad, record(2, "pending", "completed"),
	}})
	if got := failures(resp); len(got) != 1 || got[0] != "1001" || len(bus.calls) != 1 || len(bus.calls[0]) != 1 {
		t.Errorf("failures %v, calls %v: want [1001] after putting record 0's event alone", got, bus.calls)
	}
}
