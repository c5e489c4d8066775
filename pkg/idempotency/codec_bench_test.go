package idempotency

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
)

// avRecord is a Record as feature/dynamodb/attributevalue would store it in
// today's schema, for BenchmarkCodec's comparison with toItem/fromItem.
type avRecord struct {
	PK             string            `dynamodbav:"pk"`
	Tenant         string            `dynamodbav:"tenant"`
	ClaimID        string            `dynamodbav:"claim_id"`
	Fingerprint    string            `dynamodbav:"fingerprint"`
	State          string            `dynamodbav:"state"`
	ResponseStatus int               `dynamodbav:"response_status,omitempty"`
	ResponseBody   string            `dynamodbav:"response_body,omitempty"`
	Data           map[string]string `dynamodbav:"data"`
	CreatedAt      int64             `dynamodbav:"created_at"`
	UpdatedAt      int64             `dynamodbav:"updated_at"`
	ExpiresAt      int64             `dynamodbav:"expires_at"`
	LeaseExpiresAt int64             `dynamodbav:"lease_expires_at,omitempty"`
}

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

// BenchmarkCodec compares the hand-written item mapping with
// feature/dynamodb/attributevalue on the record a claim writes (encode) and
// a replay reads (decode). make bench prints these figures.
func BenchmarkCodec(b *testing.B) {
	rec := benchRecord()
	schema := newSchema(DefaultSchema())
	item := schema.toItem(rec)
	b.Run("encode/handwritten", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = schema.toItem(rec)
		}
	})
	b.Run("encode/attributevalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			av := avRecord{
				PK: string(rec.ID), Tenant: rec.Tenant, ClaimID: rec.ClaimID, Fingerprint: rec.Fingerprint,
				State: string(rec.State), ResponseStatus: rec.Response.Status, ResponseBody: string(rec.Response.Body),
				Data: rec.Data, CreatedAt: rec.CreatedAt.UnixMilli(), UpdatedAt: rec.UpdatedAt.UnixMilli(),
				ExpiresAt: rec.ExpiresAt.Unix(),
			}
			if _, err := attributevalue.MarshalMap(av); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/handwritten", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schema.fromItem(item); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/attributevalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var av avRecord
			if err := attributevalue.UnmarshalMap(item, &av); err != nil {
				b.Fatal(err)
			}
			_ = Record{
				ID: ID(av.PK), Tenant: av.Tenant, ClaimID: av.ClaimID, Fingerprint: av.Fingerprint, State: State(av.State),
				Response: Response{Status: av.ResponseStatus, Body: []byte(av.ResponseBody)}, Data: av.Data,
				CreatedAt: time.UnixMilli(av.CreatedAt), UpdatedAt: time.UnixMilli(av.UpdatedAt), ExpiresAt: time.Unix(av.ExpiresAt, 0),
			}
		}
	})
}
