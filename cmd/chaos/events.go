package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/examples/upload-events/consumer"
	"github.com/onceupload/onceupload/internal/tooling/faults"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// eventCheck is the application side of the run: the example consumer
// (examples/upload-events) behind a fault-injecting proxy, with its own
// table on the stack's DynamoDB. Its side effect is counted per upload:
// every completed upload must have exactly one, however many times its
// event arrives (the bus's retries after lost answers, the proxy's faults,
// the stream's retries after a failed PutEvents).
type eventCheck struct {
	server    *httptest.Server
	proxy     *faults.Proxy // between the bus and the consumer
	dynamo    *faults.Proxy // between the consumer and its table
	handler   atomic.Pointer[consumer.Consumer]
	delivered atomic.Int64 // POSTs that reached the consumer
	sinkFails atomic.Int64

	mu      sync.Mutex
	effects map[string]int // upload id → side effects
}

// startEventCheck starts the endpoint before the stack, which needs its URL;
// until connect gives it the consumer it answers 503, which the stack's bus
// retries.
func startEventCheck() (*eventCheck, error) {
	e := &eventCheck{effects: map[string]int{}}
	e.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := e.handler.Load()
		if c == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		e.delivered.Add(1)
		c.ServeHTTP(w, r)
	}))
	p, err := faults.Start(e.server.URL)
	if err != nil {
		e.server.Close()
		return nil, err
	}
	e.proxy = p
	return e, nil
}

// connect gives the endpoint its consumer, on a table of its own on the
// stack's DynamoDB, reached through a fault-injecting proxy (e.dynamo).
// The sink fails now and then before its effect, as an indexer that times
// out does: the consumer releases the upload id and the delivery is
// retried.
func (e *eventCheck) connect(ctx context.Context, dynamoURL string, failRate float64, rnd func() float64) error {
	const table = "upload-events-chaos"
	cfg := services.AWSConfig()
	p, err := faults.Start(dynamoURL)
	if err != nil {
		return err
	}
	e.dynamo = p
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.URL) })
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
		BillingMode:          dbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("consumer table: %w", err)
	}
	store := dynamostore.New(ddb, table)
	sink := consumer.SinkFunc(func(_ context.Context, u api.EventDetail) error {
		if rnd() < failRate {
			e.sinkFails.Add(1)
			return errors.New("indexer timed out")
		}
		e.mu.Lock()
		e.effects[u.UploadID]++
		e.mu.Unlock()
		return nil
	})
	e.handler.Store(consumer.New(store, sink, func(o *consumer.Options) { o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) }))
	return nil
}

// settle waits until every upload in want has its side effect (or timeout),
// then a little longer for late duplicates, and counts the uploads with
// none (missing) and with more than one (doubled), and effects for uploads
// that are not in want (unexpected).
func (e *eventCheck) settle(want map[string]bool, timeout time.Duration) (missing, doubled, unexpected int) {
	done := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for id := range want {
			if e.effects[id] == 0 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(timeout); !done() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	e.mu.Lock()
	defer e.mu.Unlock()
	for id := range want {
		switch n := e.effects[id]; {
		case n == 0:
			missing++
		case n > 1:
			doubled++
		}
	}
	for id := range e.effects {
		if !want[id] {
			unexpected++
		}
	}
	return missing, doubled, unexpected
}

func (e *eventCheck) close() {
	if e.dynamo != nil {
		e.dynamo.Close()
	}
	e.proxy.Close()
	e.server.Close()
}
