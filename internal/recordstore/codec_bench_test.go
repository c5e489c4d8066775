package recordstore

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// avS is a string attribute value.
func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func benchRecord() Record {
	now := time.UnixMilli(1_750_000_000_123)
	return Record{
		ID: NewID("tenant-a", "client-key-0001"), Tenant: "tenant-a", ClaimID: "0123456789abcdef0123456789abcdef",
		Fingerprint: "8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f", State: StatePending,
		Response: Response{Body: []byte(`{"uploadId":"u-1","status":"pending","upload":{"method":"PUT"}}`)},
		Data: Data{m: map[string]types.AttributeValue{
			"object": avS("uploads/tenant-a/u-1"), "size": &types.AttributeValueMemberN{Value: "1048576"}, "content_type": avS("image/png"),
		}},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: time.Unix(now.Add(24*time.Hour).Unix(), 0),
	}
}

// BenchmarkCodec is the record a claim writes (encode: its item) and a
// replay reads (decode: the record from the item). The JSON the item
// travels in is the SDK's own serialisation, which this package does not
// reach; Claim/dynoxide includes it. make bench prints these figures.
func BenchmarkCodec(b *testing.B) {
	rec := benchRecord()
	schema := newSchema(DefaultSchema())
	item, err := schema.toItem(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schema.toItem(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schema.fromItem(item); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The JSON an item travels in is DynamoDB's: one type member per value,
// numbers as text, and an empty data map written as {} (never left out,
// so that updates can SET data.x). It is read here off the wire, as the
// SDK's client sends a claim's PutItem.
func TestItemWireForm(t *testing.T) {
	rec := benchRecord()
	rec.Data = Data{}
	var sent []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if target := r.Header.Get("X-Amz-Target"); target != "DynamoDB_20120810.PutItem" {
			t.Errorf("X-Amz-Target = %q, want a PutItem", target)
		}
		sent, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	client := dynamodb.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	// The clock and TTL make the claim stamp rec's own times.
	store := NewDynamoStore(client, "t", func(o *Options) { o.Now = func() time.Time { return rec.CreatedAt } })
	if res, err := store.Claim(context.Background(), rec); err != nil || res.Replayed {
		t.Fatalf("claim = %+v, %v", res, err)
	}

	var in struct {
		TableName                           string
		Item                                map[string]map[string]any
		ReturnValuesOnConditionCheckFailure string
	}
	if err := json.Unmarshal(sent, &in); err != nil {
		t.Fatalf("request %s: %v", sent, err)
	}
	want := map[string]map[string]any{
		"pk": {"S": string(rec.ID)}, "tenant": {"S": "tenant-a"}, "claim_id": {"S": rec.ClaimID},
		"fingerprint": {"S": rec.Fingerprint}, "state": {"S": "pending"}, "data": {"M": map[string]any{}},
		"created_at": {"N": "1750000000123"}, "updated_at": {"N": "1750000000123"}, "expires_at": {"N": "1750086400"},
		"response_body": {"S": string(rec.Response.Body)},
	}
	if gb, wb := mustJSON(t, in.Item), mustJSON(t, want); gb != wb {
		t.Errorf("item\n got %s\nwant %s", gb, wb)
	}
	// One round trip for a replay too: the refusal brings the holder back.
	if in.TableName != "t" || in.ReturnValuesOnConditionCheckFailure != "ALL_OLD" {
		t.Errorf("TableName %q, ReturnValuesOnConditionCheckFailure %q; want t, ALL_OLD", in.TableName, in.ReturnValuesOnConditionCheckFailure)
	}
}

// fromItem gives back the record toItem wrote, and refuses an item of
// another shape rather than guess.
func TestItemDecoding(t *testing.T) {
	rec := benchRecord()
	rec.LeaseExpiresAt = time.UnixMilli(1_750_000_030_123)
	for _, sc := range []Schema{DefaultSchema(), {PartitionKey: "PK", SortKey: "SK", KeyPrefix: "IDEMPOTENCY#", State: "status"}} {
		schema := newSchema(sc)
		item, err := schema.toItem(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := schema.fromItem(item)
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Errorf("round trip with %+v:\n got %+v, %v\nwant %+v", sc, got, err, rec)
		}
	}

	// response_status is reserved and never read: an item that holds one
	// decodes as it would without it.
	item, err := newSchema(DefaultSchema()).toItem(rec)
	if err != nil {
		t.Fatal(err)
	}
	item["response_status"] = &types.AttributeValueMemberN{Value: "201"}
	if got, err := newSchema(DefaultSchema()).fromItem(item); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("an item with response_status:\n got %+v, %v\nwant %+v", got, err, rec)
	}

	schema := newSchema(Schema{KeyPrefix: "IDEMPOTENCY#"})
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
		item, err := schema.toItem(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schema.fromItem(item); err != nil {
			t.Fatalf("%s: the unchanged item is refused: %v", tc.name, err)
		}
		tc.change(item)
		if got, err := schema.fromItem(item); err == nil || !strings.Contains(err.Error(), "decode record") {
			t.Errorf("%s: decoded %+v, %v; want it refused", tc.name, got, err)
		}
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
