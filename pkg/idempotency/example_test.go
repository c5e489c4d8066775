package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// A claim holds the key while its work runs; once the answer is recorded,
// a retry with the same fingerprint gets it back instead of doing the work
// again, and another request under the key is refused.
func ExampleMemoryStore_Claim() {
	store := idempotency.NewMemoryStore()
	ctx := context.Background()
	rec := idempotency.Record{
		ID: idempotency.NewID("tenant-1", "client-key-0001"), Tenant: "tenant-1", ClaimID: "claim-1",
		Fingerprint: "sha256-of-the-request",
	}
	first, _ := store.Claim(ctx, rec)
	rec.ClaimID = "claim-2"
	_, err := store.Claim(ctx, rec)
	fmt.Println(first.Replayed, errors.Is(err, idempotency.ErrInProgress))
	_, _ = store.Complete(ctx, rec.ID, "claim-1", idempotency.Response{Body: []byte(`{"ok":true}`)})
	retry, _ := store.Claim(ctx, rec)
	rec.Fingerprint = "another request"
	_, err = store.Claim(ctx, rec)
	fmt.Println(retry.Replayed, retry.Record.ClaimID, string(retry.Record.Response.Body))
	fmt.Println(errors.Is(err, idempotency.ErrKeyReused))
	// Output:
	// false true
	// true claim-1 {"ok":true}
	// true
}

// MakeIdempotent wraps a handler: the key comes from a header, a retry must
// repeat the body, and the second call is answered from the record without
// charging twice.
func ExampleMakeIdempotent() {
	type request struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	type charge struct {
		ChargeID string `json:"chargeId"`
		Amount   int    `json:"amount"`
	}
	charges := 0
	handle := func(ctx context.Context, req request) (charge, error) {
		charges++
		return charge{ChargeID: fmt.Sprintf("ch_%d", charges), Amount: 1000}, nil
	}
	store := idempotency.NewMemoryStore()
	pay := idempotency.MakeIdempotent(store, handle, func(o *idempotency.HandlerOptions[request, charge]) {
		o.KeyPath = "headers.Idempotency-Key"
		o.FingerprintPaths = []string{"body"}
	})

	ctx := context.Background()
	first, _ := pay(ctx, request{Headers: map[string]string{"Idempotency-Key": "order-42"}, Body: `{"amount":1000}`})
	retry, _ := pay(ctx, request{Headers: map[string]string{"idempotency-key": "order-42"}, Body: `{ "amount": 1000 }`})
	_, err := pay(ctx, request{Headers: map[string]string{"Idempotency-Key": "order-42"}, Body: `{"amount":5000}`})
	fmt.Println(first.ChargeID, retry.ChargeID, charges)
	fmt.Println(errors.Is(err, idempotency.ErrKeyReused))
	// Output:
	// ch_1 ch_1 1
	// true
}

// A table of a single-table design: records live under one partition key
// value, their ids in the sort key behind a prefix, with attribute names of
// the table's own. Names that collide are refused before any call.
func ExampleSchema() {
	schema := idempotency.Schema{
		PartitionKey: "PK", SortKey: "SK", StaticPartitionValue: "ORDERS", KeyPrefix: "IDEMPOTENCY#",
		ExpiresAt: "ttl", State: "status",
	}
	fmt.Println(schema.Validate())
	var cfg aws.Config // config.LoadDefaultConfig(ctx) in a program, as in ExampleNewDynamoStore
	client := dynamodb.NewFromConfig(cfg)
	_ = idempotency.NewDynamoStore(client, "app-table", func(o *idempotency.Options) { o.Schema = schema })

	schema.State = "data" // the caller's fields live in "data"
	fmt.Println(schema.Validate())
	// Output:
	// <nil>
	// idempotency: invalid schema: State and (fixed) data are both "data"
}

// A program passes its own SDK client, with the endpoint, retry and
// middleware settings it chose, straight to the store. (Compiled, not run:
// it needs AWS.)
func ExampleNewDynamoStore() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
	store := idempotency.NewDynamoStore(client, "idempotency", func(o *idempotency.Options) { o.TTL = 48 * time.Hour })

	id := idempotency.NewID("tenant-1", "client-key-0001")
	res, err := store.Claim(ctx, idempotency.Record{ID: id, Tenant: "tenant-1", ClaimID: "claim-1", Fingerprint: "sha256-of-the-request"})
	switch {
	case errors.Is(err, idempotency.ErrKeyReused):
		fmt.Println("the key was used for another request")
		return
	case errors.Is(err, idempotency.ErrInProgress):
		fmt.Println("another request with the key is at work")
		return
	case err != nil:
		log.Fatal(err)
	case res.Replayed:
		fmt.Println("replay:", string(res.Record.Response.Body))
		return
	}
	// The work is done: record its answer, if the claim is still this one.
	_, err = store.Complete(ctx, id, "claim-1", idempotency.Response{Body: []byte(`{"chargeId":"ch_1"}`)})
	if err != nil && !errors.Is(err, idempotency.ErrAlreadyCompleted) {
		log.Fatal(err)
	}
}
