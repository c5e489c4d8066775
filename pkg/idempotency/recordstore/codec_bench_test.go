package recordstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// avS is a string attribute value.
func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func benchRecord() Record {
	now := time.UnixMilli(1_750_000_000_123)
	return Record{Record: idempotency.Record{ID: idempotency.NewID("tenant-a", "client-key-0001"), Tenant: "tenant-a", ClaimID: "0123456789abcdef0123456789abcdef", Fingerprint: "8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f", State: StatePending, Response: idempotency.Response{Body: []byte(`{"uploadId":"u-1","status":"pending","upload":{"method":"PUT"}}`)}, CreatedAt: now, UpdatedAt: now, ExpiresAt: time.Unix(now.Add(24*time.Hour).Unix(), 0)}, Data: Data{m: map[string]types.AttributeValue{
		"object": avS("uploads/tenant-a/u-1"), "size": &types.AttributeValueMemberN{Value: "1048576"}, "content_type": avS("image/png"),
	}}}
}

// BenchmarkCodec is the record a claim writes (encode: its item) and a
// replay reads (decode: the record from the item). The JSON the item
// travels in is the SDK's own serialisation, which this package does not
// reach; Claim/dynoxide includes it. make bench prints these figures.
func BenchmarkCodec(b *testing.B) {
	rec := benchRecord()
	schema := NewCodec(idempotency.DefaultSchema())
	item, err := schema.EncodeItem(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schema.EncodeItem(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schema.DecodeItem(item); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// DecodeItem gives back the record EncodeItem wrote, and refuses an item of
// another shape rather than guess.
func TestItemDecoding(t *testing.T) {
	rec := benchRecord()
	rec.LeaseExpiresAt = time.UnixMilli(1_750_000_030_123)
	for _, sc := range []idempotency.Schema{idempotency.DefaultSchema(), {PartitionKey: "PK", SortKey: "SK", KeyPrefix: "IDEMPOTENCY#", State: "status"}} {
		schema := NewCodec(sc)
		item, err := schema.EncodeItem(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := schema.DecodeItem(item)
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Errorf("round trip with %+v:\n got %+v, %v\nwant %+v", sc, got, err, rec)
		}
	}

	// response_status is reserved and never read: an item that holds one
	// decodes as it would without it.
	item, err := NewCodec(idempotency.DefaultSchema()).EncodeItem(rec)
	if err != nil {
		t.Fatal(err)
	}
	item["response_status"] = &types.AttributeValueMemberN{Value: "201"}
	if got, err := NewCodec(idempotency.DefaultSchema()).DecodeItem(item); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("an item with response_status:\n got %+v, %v\nwant %+v", got, err, rec)
	}

	schema := NewCodec(idempotency.Schema{KeyPrefix: "IDEMPOTENCY#"})
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	cases := []struct {
		name   string
		change func(item map[string]types.AttributeValue)
	}{
		{"no tenant", func(item map[string]types.AttributeValue) { delete(item, "tenant") }},
		{"no claim id", func(item map[string]types.AttributeValue) { delete(item, "claim_id") }},
		{"no state", func(item map[string]types.AttributeValue) { delete(item, "state") }},
		{"no expiry", func(item map[string]types.AttributeValue) { delete(item, "expires_at") }},
		{"no created_at", func(item map[string]types.AttributeValue) { delete(item, "created_at") }},
		{"state a number", func(item map[string]types.AttributeValue) { item["state"] = n("1") }},
		{"created_at a string", func(item map[string]types.AttributeValue) { item["created_at"] = avS("1750000000123") }},
		{"expiry a string", func(item map[string]types.AttributeValue) { item["expires_at"] = avS("1750086400") }},
		{"body a number", func(item map[string]types.AttributeValue) { item["response_body"] = n("1") }},
		{"lease a string", func(item map[string]types.AttributeValue) { item["lease_expires_at"] = avS("1750000030123") }},
		{"expiry not an integer", func(item map[string]types.AttributeValue) { item["expires_at"] = n("1.5") }},
		{"key without the prefix", func(item map[string]types.AttributeValue) { item["pk"] = avS(string(rec.ID)) }},
	}
	for _, tc := range cases {
		item, err := schema.EncodeItem(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schema.DecodeItem(item); err != nil {
			t.Fatalf("%s: the unchanged item is refused: %v", tc.name, err)
		}
		tc.change(item)
		if got, err := schema.DecodeItem(item); err == nil || !strings.Contains(err.Error(), "decode record") {
			t.Errorf("%s: decoded %+v, %v; want it refused", tc.name, got, err)
		}
	}
}
