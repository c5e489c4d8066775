package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/batch"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

var dynoxide = testenv.SharedDynoxide()

func TestMain(m *testing.M) { testenv.Main(m, dynoxide) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const (
	standardQueue = "arn:aws:sqs:eu-west-1:123456789012:orders"
	fifoQueue     = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
)

// counter is a record handler that counts its runs per item and fails the
// items in fail.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
	fail map[string]bool
}

func newCounter(fail ...string) *counter {
	c := &counter{runs: map[string]int{}, fail: map[string]bool{}}
	for _, id := range fail {
		c.fail[id] = true
	}
	return c
}

func (c *counter) run(id string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[id]++
	if c.fail[id] {
		return "", errors.New("declined " + id)
	}
	return "done " + id, nil
}

func (c *counter) sqs(_ context.Context, m events.SQSMessage) (string, error) {
	return c.run(m.MessageId)
}

func (c *counter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.runs)
}

// sqsEvent is a batch of messages from queue, delivered for the n-th time:
// the receipt handle and the receive count differ on every delivery.
func sqsEvent(queue string, n int, ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: id, ReceiptHandle: id + "-handle-" + string(rune('0'+n)), Body: `{"orderId":"` + id + `"}`,
			Attributes:     map[string]string{"ApproximateReceiveCount": string(rune('0' + n))},
			EventSourceARN: queue,
		})
	}
	return ev
}

// failures are the item identifiers resp reports, as Lambda reads them
// from its JSON.
func failures(t *testing.T, resp any) []string {
	t.Helper()
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range wire.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func sqsHandler(store idempotency.Store, c *counter, optFns ...func(*batch.Options[events.SQSMessage, string])) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return batch.SQS(store, c.sqs, append([]func(*batch.Options[events.SQSMessage, string]){
		func(o *batch.Options[events.SQSMessage, string]) { o.Logger = quiet },
	}, optFns...)...)
}

// stores are the stores the redelivery case runs on.
func stores(t *testing.T) map[string]idempotency.Store {
	return map[string]idempotency.Store{
		"memory": memorystore.New(),
		"dynoxide": func() idempotency.Store {
			client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
			return dynamostore.New(client, testenv.NewTable(t, client))
		}(),
	}
}

// A failed message is reported alone; delivered again with the good ones
// (new receipt handles and receive counts), it runs again and they are
// replays.
func TestSQSRedelivery(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newCounter("m-2")
			handle := sqsHandler(store, c)
			resp, err := handle(ctx, sqsEvent(standardQueue, 1, "m-1", "m-2", "m-3"))
			if got, want := failures(t, resp), []string{"m-2"}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("first delivery: failures %v, %v; want %v, nil", got, err, want)
			}
			c.mu.Lock()
			c.fail = map[string]bool{}
			c.mu.Unlock()
			resp, err = handle(ctx, sqsEvent(standardQueue, 2, "m-1", "m-2", "m-3"))
			if got := failures(t, resp); err != nil || len(got) != 0 {
				t.Fatalf("redelivery: failures %v, %v; want none", got, err)
			}
			if got, want := c.counts(), map[string]int{"m-1": 1, "m-2": 2, "m-3": 1}; !maps.Equal(got, want) {
				t.Errorf("runs = %v, want %v: the failed message again, the others replayed", got, want)
			}
		})
	}
}

func TestSQSFailures(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name         string
		queue        string
		opts         func(*batch.Options[events.SQSMessage, string])
		fail         []string
		wantFailures []string
		wantRuns     map[string]int
		wantAll      bool // ErrAllFailed
	}{
		{
			name: "standard queue: only the failed message", queue: standardQueue, fail: []string{"m-2"},
			wantFailures: []string{"m-2"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1},
		},
		{
			name: "standard queue, in parallel: only the failed messages, in order", queue: standardQueue, fail: []string{"m-3", "m-1"},
			opts:         func(o *batch.Options[events.SQSMessage, string]) { o.Parallelism = 3 },
			wantFailures: []string{"m-1", "m-3"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1},
		},
		{
			name: "FIFO queue: stops at the first failure, the rest reported", queue: fifoQueue, fail: []string{"m-2"},
			wantFailures: []string{"m-2", "m-3", "m-4"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1},
		},
		{
			name: "FIFO by option", queue: standardQueue, fail: []string{"m-2"},
			opts:         func(o *batch.Options[events.SQSMessage, string]) { o.FIFO = true },
			wantFailures: []string{"m-2", "m-3", "m-4"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1},
		},
		{
			name: "FIFO queue ignores Parallelism", queue: fifoQueue, fail: []string{"m-3"},
			opts:         func(o *batch.Options[events.SQSMessage, string]) { o.Parallelism = 4 },
			wantFailures: []string{"m-3", "m-4"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1, "m-3": 1},
		},
		{
			name: "FIFO queue, first message fails: all failed", queue: fifoQueue, fail: []string{"m-1"},
			wantFailures: []string{"m-1", "m-2", "m-3", "m-4"}, wantRuns: map[string]int{"m-1": 1}, wantAll: true,
		},
		{
			name: "every message fails", queue: standardQueue, fail: []string{"m-1", "m-2", "m-3", "m-4"},
			wantFailures: []string{"m-1", "m-2", "m-3", "m-4"}, wantRuns: map[string]int{"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1}, wantAll: true,
		},
		{
			name: "none fails", queue: fifoQueue,
			wantRuns: map[string]int{"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter(tc.fail...)
			var opts []func(*batch.Options[events.SQSMessage, string])
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			resp, err := sqsHandler(memorystore.New(), c, opts...)(ctx, sqsEvent(tc.queue, 1, "m-1", "m-2", "m-3", "m-4"))
			if got := failures(t, resp); !slices.Equal(got, tc.wantFailures) {
				t.Errorf("failures = %v, want %v", got, tc.wantFailures)
			}
			if got := c.counts(); !maps.Equal(got, tc.wantRuns) {
				t.Errorf("runs = %v, want %v", got, tc.wantRuns)
			}
			if errors.Is(err, batch.ErrAllFailed) != tc.wantAll || (err != nil && !tc.wantAll) {
				t.Errorf("err = %v, want ErrAllFailed: %v", err, tc.wantAll)
			}
		})
	}
	t.Run("an empty batch", func(t *testing.T) {
		resp, err := sqsHandler(memorystore.New(), newCounter())(ctx, events.SQSEvent{})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%+v, %v; want no failures and no error", resp, err)
		}
	})
}

// A message another invocation is processing is a failure, so that it
// comes again, not a success that would delete it before it is done.
func TestSQSInProgressIsAFailure(t *testing.T) {
	ctx := context.Background()
	store := memorystore.New()
	entered, finish := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	handle := batch.SQS(store, func(_ context.Context, m events.SQSMessage) (string, error) {
		mu.Lock()
		runs[m.MessageId]++
		mu.Unlock()
		if m.Attributes["block"] == "yes" {
			close(entered)
			<-finish
		}
		return "done", nil
	}, func(o *batch.Options[events.SQSMessage, string]) { o.Logger = quiet })

	slow := sqsEvent(standardQueue, 1, "m-1")
	slow.Records[0].Attributes["block"] = "yes"
	done := make(chan error, 1)
	go func() { _, err := handle(ctx, slow); done <- err }()
	<-entered
	// The visibility timeout ran out while m-1 was still at work: SQS
	// delivers it again, in another batch.
	resp, err := handle(ctx, sqsEvent(standardQueue, 2, "m-1", "m-2"))
	close(finish)
	if got, want := failures(t, resp), []string{"m-1"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("while m-1 is in progress: failures %v, %v; want %v, nil", got, err, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := runs, map[string]int{"m-1": 1, "m-2": 1}; !maps.Equal(got, want) {
		t.Errorf("runs = %v, want %v", got, want)
	}
}

// Parallelism runs that many messages of a standard queue at once: each
// waits until all of them have started, and none starts while that many
// run. (A FIFO queue's run one at a time: "FIFO queue ignores
// Parallelism" in TestSQSFailures.)
func TestSQSParallelism(t *testing.T) {
	const parallelism = 3
	var mu sync.Mutex
	inFlight, most := 0, 0
	started, release := make(chan string, 4), make(chan struct{})
	handle := batch.SQS(memorystore.New(), func(ctx context.Context, m events.SQSMessage) (string, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		started <- m.MessageId
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return "ok", nil
	}, func(o *batch.Options[events.SQSMessage, string]) { o.Logger, o.Parallelism = quiet, parallelism })
	done := make(chan events.SQSEventResponse, 1)
	go func() {
		resp, _ := handle(context.Background(), sqsEvent(standardQueue, 1, "m-1", "m-2", "m-3", "m-4"))
		done <- resp
	}()
	var together []string
	for len(together) < parallelism {
		select {
		case id := <-started:
			together = append(together, id)
		case <-time.After(10 * time.Second): // rather than hang
			t.Fatalf("Parallelism %d: only %v started together", parallelism, together)
		}
	}
	for range 4 {
		release <- struct{}{}
	}
	if resp := <-done; len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if most != parallelism {
		t.Errorf("%d messages ran at once, want Parallelism, %d", most, parallelism)
	}
}

// The default key is the messageId: a producer's second send of a body is
// another message, and runs. Keyed on the body, it is a replay.
func TestSQSKey(t *testing.T) {
	ctx := context.Background()
	resend := sqsEvent(standardQueue, 1, "m-1", "m-2")
	resend.Records[1].Body = resend.Records[0].Body
	for _, tc := range []struct {
		name    string
		keyPath string
		want    int
	}{
		{"messageId", "", 2},
		{"body.orderId", "body.orderId", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			handle := batch.SQS(memorystore.New(), func(context.Context, events.SQSMessage) (string, error) {
				runs++
				return "ok", nil
			}, func(o *batch.Options[events.SQSMessage, string]) {
				o.Logger = quiet
				if tc.keyPath != "" {
					o.Idempotency = func(h *idempotency.HandlerOptions[events.SQSMessage, string]) { h.KeyPath = tc.keyPath }
				}
			})
			if resp, err := handle(ctx, resend); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("%+v, %v", resp, err)
			}
			if runs != tc.want {
				t.Errorf("a body sent twice ran %d times, want %d", runs, tc.want)
			}
		})
	}
}

func kinesisEvent(seqs ...string) events.KinesisEvent {
	var ev events.KinesisEvent
	for _, s := range seqs {
		var r events.KinesisEventRecord
		r.EventSourceArn = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
		r.EventID = "shardId-000000000000:" + s
		r.Kinesis.SequenceNumber = s
		r.Kinesis.Data = []byte(`{"seq":"` + s + `"}`)
		ev.Records = append(ev.Records, r)
	}
	return ev
}

func dynamoEvent(seqs ...string) events.DynamoDBEvent {
	var ev events.DynamoDBEvent
	for _, s := range seqs {
		var r events.DynamoDBEventRecord
		r.EventSourceArn = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"
		r.EventID = "event-" + s
		r.Change.SequenceNumber = s
		r.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(s)}
		ev.Records = append(ev.Records, r)
	}
	return ev
}

// Stream records stop at the first failure, which is reported with every
// later record by sequence number; retried, the records before it are
// replays.
func TestStreams(t *testing.T) {
	ctx := context.Background()
	streams := map[string]func(c *counter) func(seqs ...string) (any, error){
		"Kinesis": func(c *counter) func(seqs ...string) (any, error) {
			h := batch.Kinesis(memorystore.New(), func(_ context.Context, r events.KinesisEventRecord) (string, error) {
				return c.run(r.Kinesis.SequenceNumber)
			}, func(o *batch.Options[events.KinesisEventRecord, string]) { o.Logger = quiet })
			return func(seqs ...string) (any, error) { return h(ctx, kinesisEvent(seqs...)) }
		},
		"DynamoDB": func(c *counter) func(seqs ...string) (any, error) {
			h := batch.DynamoDB(memorystore.New(), func(_ context.Context, r events.DynamoDBEventRecord) (string, error) {
				return c.run(r.Change.SequenceNumber)
			}, func(o *batch.Options[events.DynamoDBEventRecord, string]) { o.Logger = quiet })
			return func(seqs ...string) (any, error) { return h(ctx, dynamoEvent(seqs...)) }
		},
	}
	for name, newHandler := range streams {
		t.Run(name, func(t *testing.T) {
			c := newCounter("102")
			handle := newHandler(c)
			resp, err := handle("101", "102", "103")
			if got, want := failures(t, resp), []string{"102", "103"}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("failures %v, %v; want %v, nil", got, err, want)
			}
			c.mu.Lock()
			c.fail = map[string]bool{}
			c.mu.Unlock()
			// Lambda retries from the lowest sequence number reported; a
			// bisected or replayed batch may bring 101 again too.
			if resp, err := handle("101", "102", "103"); err != nil || len(failures(t, resp)) != 0 {
				t.Fatalf("retry: failures %v, %v; want none", failures(t, resp), err)
			}
			if got, want := c.counts(), map[string]int{"101": 1, "102": 2, "103": 1}; !maps.Equal(got, want) {
				t.Errorf("runs = %v, want %v", got, want)
			}
		})
	}
}

// With POWERTOOLS_IDEMPOTENCY_DISABLED, every delivery runs every message,
// and failures are still reported.
func TestDisabled(t *testing.T) {
	t.Setenv(idempotency.DisabledEnv, "true")
	ctx := context.Background()
	c := newCounter("m-2")
	handle := sqsHandler(memorystore.New(), c)
	for n := 1; n <= 2; n++ {
		resp, err := handle(ctx, sqsEvent(standardQueue, n, "m-1", "m-2"))
		if got, want := failures(t, resp), []string{"m-2"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("delivery %d: failures %v, %v; want %v, nil", n, got, err, want)
		}
	}
	if got, want := c.counts(), map[string]int{"m-1": 2, "m-2": 2}; !maps.Equal(got, want) {
		t.Errorf("runs = %v, want %v", got, want)
	}
}
