package recordstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// okDynamo accepts every write, so BenchmarkClaim/store measures the
// store's own work: building the item and the conditional PutItem.
type okDynamo struct{ fakeDynamo }

func (okDynamo) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

// BenchmarkClaim is one fresh claim of the record internal/upload writes: the
// store's own allocations (store), and the whole call through the SDK to a
// local DynamoDB (dynoxide), whose figure includes the SDK's serialisation
// and HTTP. make bench prints both. The record is built once, outside the
// loop: encoding its Data (NewData) is the caller's work, which
// internal/upload's BenchmarkCreate counts, not the store's.
func BenchmarkClaim(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) *dynamostore.Store
	}{
		{"store", func(*testing.B) *dynamostore.Store { return dynamostore.New(okDynamo{}, "table") }},
		{"dynoxide", func(b *testing.B) *dynamostore.Store {
			client := testenv.DynamoClient(sharedDynoxide(b), nil)
			return dynamostore.New(client, testenv.NewTable(b, client))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := tc.store(b)
			ctx := context.Background()
			rec := pending("", "c", "fp", `{"ok":true}`)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				rec.ID = idempotency.NewID("tenant-a", fmt.Sprintf("bench-%d", i))
				if _, err := store.ClaimRecord(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
