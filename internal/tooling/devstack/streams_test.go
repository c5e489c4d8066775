package devstack

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// answering is a function that gives the same answer to every invocation
// and counts them.
type answering struct {
	answer []byte
	calls  atomic.Int32
}

func (a *answering) Invoke(context.Context, []byte) ([]byte, error) {
	a.calls.Add(1)
	return a.answer, nil
}

// An answer that is not a batch response is success unless the mapping
// has ReportBatchItemFailures, as on Lambda; with it, the batch is retried.
func TestDeliverUnreadableAnswer(t *testing.T) {
	t.Parallel()
	for _, report := range []bool{false, true} {
		fn := &answering{answer: []byte("not json")}
		st := &Stack{
			cfg:      Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
			spec:     &Spec{},
			invokers: map[string]*functionPool{"Events": newFunctionPool("Events", 1, func(context.Context) (Invoker, error) { return fn, nil })},
		}
		p := &streamPoller{st: st, spec: StreamSpec{Function: "Events", MaxRetries: 1, ReportBatchItemFailures: report}}
		p.deliver(context.Background(), []events.DynamoDBEventRecord{{Change: events.DynamoDBStreamRecord{SequenceNumber: "1"}}})
		want := int32(1)
		if report {
			want = 2 // the first try and its one retry
		}
		if got := fn.calls.Load(); got != want {
			t.Errorf("ReportBatchItemFailures %v: %d invocations, want %d", report, got, want)
		}
	}
}
