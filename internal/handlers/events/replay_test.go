package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/onceupload/onceupload/internal/tableitem"
	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// replayBus records PutEvents calls and refuses the entries whose upload
// id is in refuse, or the whole call when down is set.
type replayBus struct {
	calls  [][]ebtypes.PutEventsRequestEntry
	refuse map[string]bool
	down   bool
}

func (b *replayBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls = append(b.calls, in.Entries)
	if b.down {
		return nil, errors.New("unavailable")
	}
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		var d api.EventDetail
		_ = json.Unmarshal([]byte(aws.ToString(e.Detail)), &d)
		if b.refuse[d.UploadID] {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("InternalFailure"), ErrorMessage: aws.String("refused")})
			continue
		}
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("id")})
	}
	return out, nil
}

func (b *replayBus) put() []string {
	var ids []string
	for _, call := range b.calls {
		for _, e := range call {
			var d api.EventDetail
			_ = json.Unmarshal([]byte(aws.ToString(e.Detail)), &d)
			ids = append(ids, d.UploadID)
		}
	}
	return ids
}

// replayItem is an upload's record as the table holds it, shaped by hand
// after pkg/idempotency/recordstore's schema and internal/upload's fields (the command's
// integration tests use records written by the service itself).
func replayItem(n int, state idempotency.State) map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	id := fmt.Sprintf("upload-%02d", n)
	data := map[string]types.AttributeValue{
		"object_key": s("uploads/" + id), "filename": s("a.txt"), "content_type": s("text/plain"),
		"size": num(5), "sha256": s(strings.Repeat("ab", 32)),
	}
	if state != recordstore.StatePending {
		data["completed_at"] = s("2026-12-01T10:00:00.000Z")
		data["etag"] = s("etag")
	}
	return map[string]types.AttributeValue{
		"pk": s(fmt.Sprintf("%032x", n)), "tenant": s("jwt:tenant"), "claim_id": s(id), "fingerprint": s("f"),
		"state": s(string(state)), "expires_at": num(1_900_000_000), "created_at": num(1_800_000_000_000),
		"updated_at": num(1_800_000_000_000), "response_status": num(201), "response_body": s("{}"),
		"data": &types.AttributeValueMemberM{Value: data},
		// Attribute types the upload's record does not use, for the
		// conversion's sake.
		"extra": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberNULL{Value: true},
			&types.AttributeValueMemberB{Value: []byte{1, 2}}, &types.AttributeValueMemberSS{Value: []string{"a"}},
			&types.AttributeValueMemberNS{Value: []string{"1"}}, &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		}},
	}
}

func replayHandler(bus *replayBus) *Handler {
	return &Handler{
		Events: bus, Bus: "uploads", Source: api.EventSource, Bucket: "bucket",
		Schema: idempotency.DefaultSchema(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// An item converted to a stream image decodes as the item does.
func TestStreamImageDecodesAsTheItem(t *testing.T) {
	item := replayItem(1, idempotency.StateCompleted)
	schema := idempotency.DefaultSchema()
	want, err := recordstore.DecodeItem(schema, item)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tableitem.DecodeStreamImage(schema, tableitem.LambdaImage(item))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("stream image decoded as %#v, %v; the item as %#v", got, err, want)
	}
	if tableitem.LambdaImage(nil) != nil {
		t.Fatal("a nil image must stay nil")
	}
}

// Every final item yields its event, shaped as uploadrecord.EventOf shapes
// a new image with no old one, in calls of at most 10; other states yield
// none.
func TestPublishItems(t *testing.T) {
	var items []map[string]types.AttributeValue
	var want []string
	for i := range 23 {
		state := []idempotency.State{idempotency.StateCompleted, recordstore.StateAborted, recordstore.StatePending}[i%3]
		items = append(items, replayItem(i, state))
		if state != recordstore.StatePending {
			want = append(want, fmt.Sprintf("upload-%02d", i))
		}
	}
	bus := &replayBus{}
	n, err := replayHandler(bus).PublishItems(context.Background(), items)
	if err != nil || n != len(items) {
		t.Fatalf("PublishItems = %d, %v; want %d, nil", n, err, len(items))
	}
	if got := bus.put(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events put: %v\nwant %v", got, want)
	}
	for _, call := range bus.calls {
		if len(call) > maxEntries {
			t.Fatalf("a call of %d entries", len(call))
		}
	}
	first := bus.calls[0][0]
	rec, err := recordstore.DecodeItem(idempotency.DefaultSchema(), items[0])
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := uploadrecord.EventOf("bucket", nil, &rec)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	detail, _ := json.Marshal(e.Detail)
	if aws.ToString(first.DetailType) != api.DetailTypeUploadCompleted || aws.ToString(first.Detail) != string(detail) ||
		aws.ToString(first.Source) != api.EventSource || aws.ToString(first.EventBusName) != "uploads" {
		t.Fatalf("first entry: %s %s %s %s\nwant detail %s", aws.ToString(first.EventBusName), aws.ToString(first.Source),
			aws.ToString(first.DetailType), aws.ToString(first.Detail), detail)
	}
	if aws.ToString(bus.calls[0][1].DetailType) != api.DetailTypeUploadAborted {
		t.Fatalf("second entry: %s", aws.ToString(bus.calls[0][1].DetailType))
	}
}

// The first failure ends the work, and the count says how far it got.
func TestPublishItemsStopsAtTheFirstFailure(t *testing.T) {
	items := []map[string]types.AttributeValue{
		replayItem(0, idempotency.StateCompleted), replayItem(1, recordstore.StatePending),
		replayItem(2, idempotency.StateCompleted), replayItem(3, recordstore.StateAborted),
	}
	ctx := context.Background()

	// An entry refused: the items before it are handled.
	bus := &replayBus{refuse: map[string]bool{"upload-02": true}}
	if n, err := replayHandler(bus).PublishItems(ctx, items); n != 2 || err == nil || !strings.Contains(err.Error(), "upload-02") {
		t.Fatalf("refused entry: PublishItems = %d, %v; want 2 and an error naming upload-02", n, err)
	}

	// PutEvents failing: nothing is handled.
	bus = &replayBus{down: true}
	if n, err := replayHandler(bus).PublishItems(ctx, items); n != 0 || err == nil {
		t.Fatalf("PutEvents down: PublishItems = %d, %v; want 0 and an error", n, err)
	}

	// An item that is not an upload's record: the ones before it are put,
	// and nothing after it.
	bad := replayItem(2, idempotency.StateCompleted)
	delete(bad["data"].(*types.AttributeValueMemberM).Value, "object_key")
	bus = &replayBus{}
	n, err := replayHandler(bus).PublishItems(ctx, []map[string]types.AttributeValue{items[0], items[1], bad, items[3]})
	if n != 2 || err == nil {
		t.Fatalf("bad item: PublishItems = %d, %v; want 2 and an error", n, err)
	}
	if got := bus.put(); !reflect.DeepEqual(got, []string{"upload-00"}) {
		t.Fatalf("bad item: events put %v, want only upload-00's", got)
	}

	// Nothing to events.
	if n, err := replayHandler(&replayBus{}).PublishItems(ctx, nil); n != 0 || err != nil {
		t.Fatalf("no items: %d, %v", n, err)
	}
}
