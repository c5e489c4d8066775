package idempotency_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/internal/tooling/faults"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// On a real DynamoDB behind a fault proxy: the UpdateItem that records the
// response lands but its answer is lost, and the next five UpdateItems get
// a 500, more than the SDK's four attempts can outlast. The wrapper asks
// again after a wait, its write meets its own completed record, and that
// is a success: the handler ran once, the key is completed, and a retry is
// a replay.
func TestRecordOutlastsALostAnswerAndAnOutage(t *testing.T) {
	ctx := context.Background()
	endpoint := dynoxide.Endpoint(t)
	proxy, err := faults.Start(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	var updates atomic.Int64
	proxy.SetRule(func(op string, _ *http.Request) faults.Kind {
		if op != "UpdateItem" {
			return faults.None
		}
		switch n := updates.Add(1); {
		case n == 1:
			return faults.DropResponse
		case n <= 6:
			return faults.ServerError
		}
		return faults.None
	})
	direct := testenv.DynamoClient(endpoint, nil)
	table := testenv.NewTable(t, direct)
	viaProxy := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(proxy.URL)
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 4
			so.MaxBackoff = 20 * time.Millisecond
			so.RateLimiter = ratelimit.None
		})
		o.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	})
	var runs atomic.Int64
	call := idempotency.MakeIdempotent(dynamostore.New(viaProxy, table),
		func(context.Context, order) (receipt, error) { return receipt{OrderID: "o-1", Run: runs.Add(1)}, nil },
		func(o *idempotency.HandlerOptions[order, receipt]) {
			o.KeyPath, o.FingerprintPaths, o.Logger = "headers.idempotency-key", []string{"body"}, quiet
		})

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if got, err := call(dctx, newOrder("k-1", "{}")); err != nil || got.Run != 1 {
		t.Fatalf("got %+v, %v; want run 1's response recorded", got, err)
	}
	if n := updates.Load(); n < 7 {
		t.Fatalf("%d UpdateItems reached the proxy, want at least 7 (the faults were not all met)", n)
	}
	rec, err := dynamostore.New(direct, table).Get(ctx, idempotency.NewID("", "k-1"))
	if err != nil || rec.State != idempotency.StateCompleted {
		t.Fatalf("record: %+v, %v; want it completed", rec, err)
	}
	if got, err := call(ctx, newOrder("k-1", "{}")); err != nil || got.Run != 1 || runs.Load() != 1 {
		t.Fatalf("retry: %+v, %v after %d runs; want run 1's recorded response", got, err, runs.Load())
	}
}
