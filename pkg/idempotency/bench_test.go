package idempotency_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
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
// and HTTP. make bench prints both.
func BenchmarkClaim(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) *idempotency.DynamoStore
	}{
		{"store", func(*testing.B) *idempotency.DynamoStore { return idempotency.NewDynamoStore(okDynamo{}, "table") }},
		{"dynoxide", func(b *testing.B) *idempotency.DynamoStore {
			client := testenv.DynamoClient(sharedDynoxide(b), nil)
			return idempotency.NewDynamoStore(client, testenv.NewTable(b, client))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := tc.store(b)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := store.Claim(ctx, pending(idempotency.NewID("tenant-a", fmt.Sprintf("bench-%d", i)), "c", "fp", `{"ok":true}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMakeIdempotent is the wrapper's own cost over an in-memory
// store, for an API Gateway-sized event: a fresh key (claim, run, record)
// and a retry (claim, replay). make bench prints both.
func BenchmarkMakeIdempotent(b *testing.B) {
	type event struct {
		Headers        map[string]string `json:"headers"`
		Body           string            `json:"body"`
		RequestContext map[string]string `json:"requestContext"`
	}
	type result struct {
		ChargeID string `json:"chargeId"`
		Amount   int    `json:"amount"`
	}
	call := idempotency.MakeIdempotent(idempotency.NewMemoryStore(),
		func(context.Context, event) (result, error) { return result{"ch_1", 1000}, nil },
		func(o *idempotency.HandlerOptions[event, result]) {
			o.KeyPath, o.FingerprintPaths, o.Logger = "headers.Idempotency-Key", []string{"body"}, quiet
		})
	ev := func(key string) event {
		return event{
			Headers:        map[string]string{"Idempotency-Key": key, "Content-Type": "application/json", "User-Agent": "bench"},
			Body:           `{"orderId":"o-42","amount":1000,"currency":"EUR","card":"tok_visa"}`,
			RequestContext: map[string]string{"requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef", "stage": "prod"},
		}
	}
	ctx := context.Background()
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := call(ctx, ev(fmt.Sprintf("key-%d", i))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		e := ev("replayed-key")
		if _, err := call(ctx, e); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(ctx, e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
