package recordstore_test

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// attributeShape is an item's attribute names with their DynamoDB types.
func attributeShape(item map[string]types.AttributeValue) map[string]string {
	shape := map[string]string{}
	for name, v := range item {
		switch v.(type) {
		case *types.AttributeValueMemberS:
			shape[name] = "S"
		case *types.AttributeValueMemberN:
			shape[name] = "N"
		case *types.AttributeValueMemberM:
			shape[name] = "M"
		default:
			shape[name] = "?"
		}
	}
	return shape
}

// TestStoredItems reads back what a claim and an update write, raw. The
// default schema must stay the deployed table's, attribute for attribute:
// the table, its TTL setting and internal/upload rely on it.
func TestStoredItems(t *testing.T) {
	ctx := context.Background()
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	id := idempotency.NewID("tenant-a", "stored-item")
	cases := []struct {
		name      string
		table     string
		opt       func(*idempotency.Options)
		key       map[string]string
		claimed   map[string]string
		completed map[string]string
	}{
		{
			name: "default schema", table: testenv.NewTable(t, client), opt: func(*idempotency.Options) {},
			key: map[string]string{"pk": string(id)},
			claimed: map[string]string{
				"pk": "S", "tenant": "S", "claim_id": "S", "fingerprint": "S", "state": "S", "data": "M",
				"created_at": "N", "updated_at": "N", "expires_at": "N", "lease_expires_at": "N", "group": "S",
			},
			completed: map[string]string{
				"pk": "S", "tenant": "S", "claim_id": "S", "fingerprint": "S", "state": "S", "data": "M",
				"created_at": "N", "updated_at": "N", "expires_at": "N", "response_body": "S",
			},
		},
		{
			name: "single-table schema", table: testenv.NewTableWithKey(t, client, "PK", "SK", singleTableIndex), opt: singleTable,
			key: map[string]string{"PK": "ORDERS", "SK": "IDEMPOTENCY#" + string(id)},
			claimed: map[string]string{
				"PK": "S", "SK": "S", "tenant": "S", "claim_id": "S", "validation": "S", "status": "S", "data": "M",
				"created_at": "N", "updated_at": "N", "expiration": "N", "in_progress_expiration": "N", "GSI1PK": "S",
			},
			completed: map[string]string{
				"PK": "S", "SK": "S", "tenant": "S", "claim_id": "S", "validation": "S", "status": "S", "data": "M",
				"created_at": "N", "updated_at": "N", "expiration": "N", "result": "S",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := dynamostore.New(client, tc.table, tc.opt)
			key := map[string]types.AttributeValue{}
			for k, v := range tc.key {
				key[k] = &types.AttributeValueMemberS{Value: v}
			}
			raw := func() map[string]types.AttributeValue {
				out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tc.table, Key: key, ConsistentRead: ptr(true)})
				if err != nil {
					t.Fatal(err)
				}
				return out.Item
			}
			rec := inGroup(inProgress(id, "c1", "fp"), "tenant-a#orders")
			rec.Data = mustData(struct {
				Order string `dynamodbav:"order"`
				Size  int    `dynamodbav:"size"`
			}{"o-1", 42})
			mustClaim(t, store, rec)
			item := raw()
			if got := attributeShape(item); !maps.Equal(got, tc.claimed) {
				t.Errorf("claimed item = %v,\n want %v", got, tc.claimed)
			}
			wantData := map[string]types.AttributeValue{"order": &types.AttributeValueMemberS{Value: "o-1"}, "size": &types.AttributeValueMemberN{Value: "42"}}
			if data, ok := item["data"].(*types.AttributeValueMemberM); !ok || !reflect.DeepEqual(data.Value, wantData) {
				t.Errorf("claimed data = %#v, want the map %#v", item["data"], wantData)
			}
			if _, err := store.Update(ctx, id, "c1", recordstore.Update{
				State: idempotency.StateCompleted, Response: &idempotency.Response{Body: []byte(`{}`)}, RestartExpiry: true,
			}); err != nil {
				t.Fatal(err)
			}
			if got := attributeShape(raw()); !maps.Equal(got, tc.completed) {
				t.Errorf("completed item = %v,\n want %v", got, tc.completed)
			}
		})
	}
}

func TestSchemaValidate(t *testing.T) {
	cases := []struct {
		name   string
		schema idempotency.Schema
		bad    []string
	}{
		{"default", idempotency.Schema{}, nil},
		{"defaults filled in", idempotency.Schema{PartitionKey: "id", SortKey: "sk"}, nil},
		{"sort key is the partition key", idempotency.Schema{PartitionKey: "id", SortKey: "id"}, []string{"PartitionKey and SortKey"}},
		{"a renamed attribute takes a fixed name", idempotency.Schema{State: "data"}, []string{"State and (fixed) data"}},
		{"renamed onto a default", idempotency.Schema{ResponseBody: "state"}, []string{"State and ResponseBody"}},
		{"a dotted name is a name", idempotency.Schema{State: "record.state"}, nil},
		{"brackets cannot be named", idempotency.Schema{State: "s[1]"}, []string{`State "s[1]"`}},
		{"the group takes a fixed name", idempotency.Schema{Group: "tenant"}, []string{"Group and (fixed) tenant"}},
		{"an index name DynamoDB refuses", idempotency.Schema{GroupIndex: "by group"}, []string{`GroupIndex "by group"`}},
		{"an index name too short", idempotency.Schema{GroupIndex: "ix"}, []string{`GroupIndex "ix"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.schema.Validate()
			if (err != nil) != (len(tc.bad) > 0) {
				t.Fatalf("Validate() = %v, want failure: %v", err, len(tc.bad) > 0)
			}
			for _, b := range tc.bad {
				if !strings.Contains(err.Error(), b) {
					t.Errorf("Validate() = %v, want it to name %q", err, b)
				}
			}
		})
	}
	// A store with a bad schema refuses every operation without a call.
	store := dynamostore.New(fakeDynamo{err: errors.New("called")}, "table", func(o *idempotency.Options) {
		o.Schema = idempotency.Schema{PartitionKey: "pk", SortKey: "pk"}
	})
	ctx, id := context.Background(), idempotency.NewID("t", "k")
	_, claimErr := store.ClaimRecord(ctx, pending(id, "c", "fp", `{}`))
	_, getErr := store.GetRecord(ctx, id)
	_, updErr := store.Update(ctx, id, "c", recordstore.Update{State: idempotency.StateCompleted})
	relErr := store.Release(ctx, id, "c")
	_, countErr := store.CountGroup(ctx, "g", "")
	for i, err := range []error{claimErr, getErr, updErr, relErr, countErr} {
		if err == nil || !strings.Contains(err.Error(), "invalid schema") {
			t.Errorf("operation %d: %v, want the schema error", i, err)
		}
	}
}

func TestDefaultSchema(t *testing.T) {
	d := idempotency.DefaultSchema()
	got := []string{d.PartitionKey, d.SortKey, d.StaticPartitionValue, d.KeyPrefix, d.ExpiresAt, d.LeaseExpiresAt, d.State, d.ResponseBody, d.Fingerprint, d.Group, d.GroupIndex}
	want := []string{"pk", "", "", "", "expires_at", "lease_expires_at", "state", "response_body", "fingerprint", "group", "by_group"}
	if !slices.Equal(got, want) {
		t.Errorf("DefaultSchema() = %q, want %q", got, want)
	}
	if idempotency.DefaultTTL != 24*time.Hour || idempotency.DefaultLease != 30*time.Second {
		t.Errorf("DefaultTTL, DefaultLease = %v, %v", idempotency.DefaultTTL, idempotency.DefaultLease)
	}
}
