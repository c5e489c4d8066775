package idempotency_test

import (
	"testing"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

// TestStores holds each of this package's stores to storetest's cases, as
// a Store of one's own would be held: memory, and DynamoDB on dynoxide and
// on dynalite.
func TestStores(t *testing.T) {
	opts := func(c *storetest.Clock) func(*idempotency.Options) {
		return func(o *idempotency.Options) { o.TTL, o.Lease, o.Now = storetest.TTL, storetest.Lease, c.Now }
	}
	stores := map[string]func(t *testing.T, c *storetest.Clock) idempotency.Store{
		"memory": func(t *testing.T, c *storetest.Clock) idempotency.Store { return memorystore.New(opts(c)) },
		"dynoxide": func(t *testing.T, c *storetest.Clock) idempotency.Store {
			client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
			return dynamostore.New(client, testenv.NewTable(t, client), opts(c))
		},
		// dynalite drops the holder a refused claim should bring back: the
		// store reads it instead.
		"dynalite, single-table schema": func(t *testing.T, c *storetest.Clock) idempotency.Store {
			client := testenv.DynamoClient(dynalite.Endpoint(t), nil)
			return dynamostore.New(client, testenv.NewTableWithKey(t, client, "PK", "SK"), opts(c), func(o *idempotency.Options) {
				o.Schema = idempotency.Schema{PartitionKey: "PK", SortKey: "SK", KeyPrefix: "IDEMPOTENCY#", State: "status", ExpiresAt: "expiration"}
			})
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) { storetest.Run(t, newStore) })
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
