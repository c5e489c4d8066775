package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// A program passes its own SDK client, with the endpoint, retry and
// middleware settings it chose, straight to the store. (Compiled, not run:
// it needs AWS.)
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
	store := dynamostore.New(client, "idempotency", func(o *idempotency.Options) { o.TTL = 48 * time.Hour })

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
