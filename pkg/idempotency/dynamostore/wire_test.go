package dynamostore_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// The JSON an item travels in is DynamoDB's: one type member per value,
// numbers as text, and an empty data map written as {} (never left out,
// so that updates can SET data.x). It is read here off the wire, as the
// SDK's client sends a claim's PutItem.
func TestItemWireForm(t *testing.T) {
	now := time.UnixMilli(1_750_000_000_123)
	rec := recordstore.Record{Record: idempotency.Record{ID: idempotency.NewID("tenant-a", "client-key-0001"), Tenant: "tenant-a", ClaimID: "0123456789abcdef0123456789abcdef", Fingerprint: "8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f8c2e1f0a6b3d4e5f", State: recordstore.StatePending, Response: idempotency.Response{Body: []byte(`{"uploadId":"u-1","status":"pending","upload":{"method":"PUT"}}`)}, CreatedAt: now, UpdatedAt: now}}
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
	store := dynamostore.New(client, "t", func(o *idempotency.Options) { o.Now = func() time.Time { return rec.CreatedAt } })
	if res, err := store.ClaimRecord(context.Background(), rec); err != nil || res.Replayed {
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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
