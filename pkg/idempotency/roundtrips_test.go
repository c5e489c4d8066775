package idempotency_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// TestMakeIdempotentRoundTrips counts the calls the wrapper sends to a real
// local DynamoDB, as docs/idempotency.md states them: two writes for a
// fresh request, one for a replay, two for a failure.
func TestMakeIdempotentRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	store := dynamostore.New(testenv.DynamoClient(dynoxide.Endpoint(t), &counter), testenv.NewTable(t, client))
	fail := errors.New("declined")
	call := idempotency.MakeIdempotent(store, func(_ context.Context, req map[string]string) (string, error) {
		if req["fail"] != "" {
			return "", fail
		}
		return "ok", nil
	}, func(o *idempotency.HandlerOptions[map[string]string, string]) { o.KeyPath = "key" })

	steps := []struct {
		name    string
		req     map[string]string
		wantErr error
		want    map[string]int
	}{
		{"fresh", map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{"replay", map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1}},
		{"reuse", map[string]string{"key": "k-1", "other": "x"}, idempotency.ErrKeyReused, map[string]int{"PutItem": 1}},
		{"failure", map[string]string{"key": "k-2", "fail": "y"}, fail, map[string]int{"PutItem": 1, "DeleteItem": 1}},
	}
	for _, step := range steps {
		counter.Reset()
		if got, err := call(ctx, step.req); !errors.Is(err, step.wantErr) || (err == nil && got != "ok") {
			t.Fatalf("%s: %q, %v; want %v", step.name, got, err, step.wantErr)
		}
		if got := counter.Ops(); !maps.Equal(got, step.want) {
			t.Errorf("%s sent %v, want %v", step.name, got, step.want)
		}
	}
}

// TestLocalCacheRoundTrips counts the calls a wrapper with a local cache
// sends to a real local DynamoDB: a retry, or another request under the
// key, that finds the record in the cache sends none.
func TestLocalCacheRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	store := dynamostore.New(testenv.DynamoClient(dynoxide.Endpoint(t), &counter), testenv.NewTable(t, client))
	handler := func(context.Context, map[string]string) (string, error) { return "ok", nil }
	opts := func(o *idempotency.HandlerOptions[map[string]string, string]) {
		o.KeyPath, o.UseLocalCache = "key", true
	}
	call, other := idempotency.MakeIdempotent(store, handler, opts), idempotency.MakeIdempotent(store, handler, opts)

	steps := []struct {
		name    string
		call    func(context.Context, map[string]string) (string, error)
		req     map[string]string
		wantErr error
		want    map[string]int
	}{
		{"fresh", call, map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{"replay from the cache", call, map[string]string{"key": "k-1"}, nil, map[string]int{}},
		{"reuse refused by the cache", call, map[string]string{"key": "k-1", "other": "x"}, idempotency.ErrKeyReused, map[string]int{}},
		{"replay on another instance", other, map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1}},
		{"then from its cache", other, map[string]string{"key": "k-1"}, nil, map[string]int{}},
	}
	for _, step := range steps {
		counter.Reset()
		if got, err := step.call(ctx, step.req); !errors.Is(err, step.wantErr) || (err == nil && got != "ok") {
			t.Fatalf("%s: %q, %v; want %v", step.name, got, err, step.wantErr)
		}
		if got := counter.Ops(); !maps.Equal(got, step.want) {
			t.Errorf("%s sent %v, want %v", step.name, got, step.want)
		}
	}
}
