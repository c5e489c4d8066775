package idempotency

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/awslite"
)

func benchRecord() Record {
	now := time.UnixMilli(1_750_000_000_123)
	return Record{
		ID: NewID("tenant-a", "client-key-0001"), Tenant: "tenant-a", ClaimID: "0123456789abcdef0123456789abcdef",
		Fingerprint: "8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f", State: StatePending,
		Response:  Response{Status: 201, Body: []byte(`{"uploadId":"u-1","status":"pending","upload":{"method":"PUT"}}`)},
		Data:      map[string]string{"object": "uploads/tenant-a/u-1", "size": "1048576", "content_type": "image/png"},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: time.Unix(now.Add(24*time.Hour).Unix(), 0),
	}
}

// BenchmarkCodec is the record a claim writes (encode: the item, then the
// JSON the request carries) and a replay reads (decode: the JSON of the
// answer, then the record). make bench prints these figures.
func BenchmarkCodec(b *testing.B) {
	rec := benchRecord()
	schema := newSchema(DefaultSchema())
	wire, err := json.Marshal(awslite.GetItemOutput{Item: schema.toItem(rec)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(awslite.PutItemInput{TableName: "t", Item: schema.toItem(rec)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out awslite.GetItemOutput
			if err := json.Unmarshal(wire, &out); err != nil {
				b.Fatal(err)
			}
			if _, err := schema.fromItem(out.Item); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The JSON an item travels in is DynamoDB's: one type member per value,
// numbers as text, and an empty data map written as {} (never left out,
// so that updates can SET data.x).
func TestItemWireForm(t *testing.T) {
	rec := benchRecord()
	rec.Data = map[string]string{}
	b, err := json.Marshal(newSchema(DefaultSchema()).toItem(rec))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		"pk": {"S": string(rec.ID)}, "tenant": {"S": "tenant-a"}, "claim_id": {"S": rec.ClaimID},
		"fingerprint": {"S": rec.Fingerprint}, "state": {"S": "pending"}, "data": {"M": map[string]any{}},
		"created_at": {"N": "1750000000123"}, "updated_at": {"N": "1750000000123"}, "expires_at": {"N": "1750086400"},
		"response_status": {"N": "201"}, "response_body": {"S": string(rec.Response.Body)},
	}
	if gb, wb := mustJSON(t, got), mustJSON(t, want); gb != wb {
		t.Errorf("item\n got %s\nwant %s", gb, wb)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
