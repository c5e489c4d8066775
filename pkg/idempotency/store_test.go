package idempotency_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

// TestStores holds each of this module's stores on the engine to
// storetest's cases, as a Store of one's own would be held: memory, and
// DynamoDB on dynoxide and on dynalite. Put writes a record as it is: in
// memory, and as the table's item.
func TestStores(t *testing.T) {
	opts := func(c *storetest.Clock) func(*idempotency.Options) {
		return func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = storetest.TTL, storetest.Lease, c.Now }
	}
	onTable := func(t *testing.T, client *dynamodb.Client, table string, schema idempotency.Schema) storetest.Put {
		return func(t *testing.T, rec idempotency.Record) {
			item, err := recordstore.NewCodec(schema).EncodeItem(recordstore.Record{Record: rec})
			if err == nil {
				_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	singleTable := idempotency.Schema{PartitionKey: "PK", SortKey: "SK", KeyPrefix: "IDEMPOTENCY#", State: "status", ExpiresAt: "expiration"}
	stores := map[string]func(t *testing.T, c *storetest.Clock) (idempotency.Store, storetest.Put){
		"memory": func(t *testing.T, c *storetest.Clock) (idempotency.Store, storetest.Put) {
			st := memorystore.New(opts(c))
			return st, func(_ *testing.T, rec idempotency.Record) { st.Put(recordstore.Record{Record: rec}) }
		},
		"dynoxide": func(t *testing.T, c *storetest.Clock) (idempotency.Store, storetest.Put) {
			client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
			table := testenv.NewTable(t, client)
			return dynamostore.New(client, table, opts(c)), onTable(t, client, table, idempotency.Schema{})
		},
		// dynalite drops the holder a refused claim should bring back: the
		// store reads it instead.
		"dynalite, single-table schema": func(t *testing.T, c *storetest.Clock) (idempotency.Store, storetest.Put) {
			client := testenv.DynamoClient(dynalite.Endpoint(t), nil)
			table := testenv.NewTableWithKey(t, client, "PK", "SK")
			return dynamostore.New(client, table, opts(c), func(o *idempotency.Options) { o.Schema = singleTable }), onTable(t, client, table, singleTable)
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, c *storetest.Clock) idempotency.Store {
				st, _ := newStore(t, c)
				return st
			})
			storetest.RunForeignRecords(t, newStore)
		})
	}
}

func TestDefaultSchema(t *testing.T) {
	want := idempotency.Schema{
		PartitionKey: "pk", ExpiresAt: "expires_at", LeaseExpiresAt: "lease_expires_at",
		State: "state", ResponseBody: "response_body", Fingerprint: "fingerprint",
		Group: "group", GroupIndex: "by_group",
	}
	if got := idempotency.DefaultSchema(); got != want {
		t.Errorf("DefaultSchema() = %+v, want %+v", got, want)
	}
	if err := (idempotency.Schema{State: "fingerprint"}).Validate(); err == nil {
		t.Error("a schema whose state is its fingerprint was accepted")
	}
}
