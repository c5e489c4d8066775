package idempotency_test

import (
	"context"
	"fmt"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// A claim records the answer with the claim itself; a retry with the same
// fingerprint gets that answer back instead of doing the work again.
func ExampleMemoryStore_Claim() {
	store := idempotency.NewMemoryStore()
	ctx := context.Background()
	rec := idempotency.Record{
		ID: idempotency.NewID("tenant-1", "client-key-0001"), Tenant: "tenant-1", ClaimID: "claim-1",
		Fingerprint: "sha256-of-the-request", State: idempotency.StatePending,
		Response: idempotency.Response{Status: 201, Body: []byte(`{"ok":true}`)},
	}
	first, _ := store.Claim(ctx, rec)
	rec.ClaimID = "claim-2"
	retry, _ := store.Claim(ctx, rec)
	rec.Fingerprint = "another request"
	_, err := store.Claim(ctx, rec)
	fmt.Println(first.Replayed, retry.Replayed, retry.Record.ClaimID, string(retry.Record.Response.Body))
	fmt.Println(err != nil)
	// Output:
	// false true claim-1 {"ok":true}
	// true
}
