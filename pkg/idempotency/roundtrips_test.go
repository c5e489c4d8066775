package idempotency_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// TestMakeIdempotentRoundTrips counts the calls the wrapper sends to a real
// local DynamoDB, as docs/idempotency.md states them: two writes for a
// fresh request, one for a replay, two for a failure.
func TestMakeIdempotentRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	store := idempotency.NewDynamoStore(testenv.DynamoClient(dynoxide.Endpoint(t), &counter), testenv.NewTable(t, client))
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
		if _, err := call(ctx, step.req); !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: err = %v, want %v", step.name, err, step.wantErr)
		}
		if got := counter.Ops(); !maps.Equal(got, step.want) {
			t.Errorf("%s sent %v, want %v", step.name, got, step.want)
		}
	}
}
