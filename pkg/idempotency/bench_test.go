package idempotency_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// BenchmarkMakeIdempotent is the wrapper's own cost over an in-memory
// store, for an API Gateway-sized event: a fresh key (claim, run, record),
// a retry (claim, replay) and a retry with UseLocalCache (replayed from the
// cache, no store call). make bench prints all three.
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
	handler := func(context.Context, event) (result, error) { return result{"ch_1", 1000}, nil }
	opts := func(o *idempotency.HandlerOptions[event, result]) {
		o.KeyPath, o.FingerprintPaths, o.Logger = "headers.Idempotency-Key", []string{"body"}, quiet
	}
	call := idempotency.MakeIdempotent(memorystore.New(), handler, opts)
	cached := idempotency.MakeIdempotent(memorystore.New(), handler, opts,
		func(o *idempotency.HandlerOptions[event, result]) { o.UseLocalCache = true })
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
	replay := func(call func(context.Context, event) (result, error)) func(b *testing.B) {
		return func(b *testing.B) {
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
		}
	}
	b.Run("replay", replay(call))
	// cached_replay, not cached-replay: make bench reads names as \w+.
	b.Run("cached_replay", replay(cached))
}
