package redisstore_test

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/redisstore"
)

type charge struct {
	OrderID string `json:"orderId"`
	Amount  int    `json:"amount"`
}

// A handler made idempotent on Redis, as docs/idempotency.md shows it (go
// test compiles it; it runs against no server).
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "my-cache:6379"}) // or redis.NewClusterClient
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = "payments:" })
	handler := idempotency.MakeIdempotent(store, func(ctx context.Context, c charge) (string, error) { return "ch_1", nil },
		func(o *idempotency.HandlerOptions[charge, string]) { o.KeyPath = "orderId" })
	_ = handler
}
