package memorystore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// A claim holds the key while its work runs; once the answer is recorded,
// a retry with the same fingerprint gets it back instead of doing the work
// again, and another request under the key is refused.
func ExampleStore_Claim() {
	store := memorystore.New()
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
