package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/onceupload/onceupload/internal/sqsdrain"
)

// InvokeAPI is the part of *lambda.Client the replay uses.
type InvokeAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ InvokeAPI = (*lambda.Client)(nil)

type replayer struct {
	// queue is the failure queue, read with visibility.
	queue    *sqsdrain.Reader
	fn       InvokeAPI
	function string
	dryRun   bool
	log      io.Writer
}

type result struct{ replayed, failed, unreadable int }

// destinationRecord is what Lambda sends to an on-failure destination for
// an asynchronous invocation: the original event is requestPayload.
type destinationRecord struct {
	RequestContext struct {
		Condition   string `json:"condition"`
		RequestID   string `json:"requestId"`
		RetryCount  int    `json:"approximateInvokeCount"`
		FunctionARN string `json:"functionArn"`
	} `json:"requestContext"`
	RequestPayload json.RawMessage `json:"requestPayload"`
}

// visibility hides the messages of one receive (up to 10) while each is
// replayed in turn: one finalize invocation each, of up to its 30 s timeout.
const visibility = 10 * 30 * time.Second

// run replays up to limit events, each as it is received, until the queue
// answers empty.
func (r *replayer) run(ctx context.Context, limit int) (result, error) {
	var res result
	for m, err := range r.queue.Messages(ctx, limit) {
		if err != nil {
			return res, fmt.Errorf("receive from the failure queue: %w", err)
		}
		id := aws.ToString(m.MessageId)
		var rec destinationRecord
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil || len(rec.RequestPayload) == 0 || rec.RequestPayload[0] != '{' {
			res.unreadable++
			fmt.Fprintf(r.log, "message %s: not a Lambda destination record with an event; left in the queue\n", id)
			continue
		}
		if r.dryRun {
			fmt.Fprintf(r.log, "would replay message %s (failed %s after %d attempts)\n", id, rec.RequestContext.Condition, rec.RequestContext.RetryCount)
			res.replayed++
			continue
		}
		inv, err := r.fn.Invoke(ctx, &lambda.InvokeInput{FunctionName: &r.function, Payload: rec.RequestPayload})
		switch {
		case err != nil:
			err = fmt.Errorf("invoke: %w", err)
		case inv.FunctionError != nil:
			err = fmt.Errorf("finalize failed again: %s %s", aws.ToString(inv.FunctionError), inv.Payload)
		}
		if err != nil {
			res.failed++
			fmt.Fprintf(r.log, "message %s: %v; left in the queue\n", id, err)
			continue
		}
		if err := r.queue.Delete(ctx, m); err != nil {
			return res, fmt.Errorf("delete replayed message %s: %w", id, err)
		}
		res.replayed++
		fmt.Fprintf(r.log, "replayed message %s\n", id)
	}
	return res, nil
}
