package idempotency_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/redisstore"
)

// BenchmarkStore is a claim of a fresh key and a replay (a claim of a
// completed one) through the public Store, on a local DynamoDB (dynoxide,
// through the SDK) and on redis-server (through go-redis), side by side:
// each figure is one round trip and the server's work. make bench prints
// all four.
func BenchmarkStore(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) idempotency.Store
	}{
		{"dynoxide", func(b *testing.B) idempotency.Store {
			client := testenv.DynamoClient(dynoxide.Endpoint(b), nil)
			return dynamostore.New(client, testenv.NewTable(b, client))
		}},
		{"redis", func(b *testing.B) idempotency.Store {
			// A prefix of its own, as each dynoxide store has a table.
			prefix := fmt.Sprintf("%s-%d:", b.Name(), time.Now().UnixNano())
			return redisstore.New(testenv.RedisClient(b, redis.Endpoint(b)), func(o *redisstore.Options) { o.KeyPrefix = prefix })
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st, ctx := tc.store(b), context.Background()
			rec := func(key string) idempotency.Record {
				return idempotency.Record{ID: idempotency.NewID("bench", key), Tenant: "bench", ClaimID: "c-" + key, Fingerprint: "fp"}
			}
			// Go runs each of the -count times on the same store: keys
			// are numbered across runs, and the replay's record is made once.
			i := 0
			b.Run("claim", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					i++
					if _, err := st.Claim(ctx, rec(fmt.Sprintf("key-%d", i))); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("replay", func(b *testing.B) {
				done := rec("replayed")
				res, err := st.Claim(ctx, done)
				if err != nil {
					b.Fatal(err)
				}
				if res.Record.State == idempotency.StateInProgress {
					if _, err := st.Complete(ctx, done.ID, done.ClaimID, idempotency.Response{Body: []byte(`{"chargeId":"ch_1","amount":1000}`)}); err != nil {
						b.Fatal(err)
					}
				}
				retry := done
				retry.ClaimID = "retry"
				b.ReportAllocs()
				for b.Loop() {
					if res, err := st.Claim(ctx, retry); err != nil || !res.Replayed {
						b.Fatalf("replay = %+v, %v", res, err)
					}
				}
			})
		})
	}
}
