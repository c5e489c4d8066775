package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// QueueAPI is the part of *sqs.Client the replay uses.
type QueueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// InvokeAPI is the part of *lambda.Client the replay uses.
type InvokeAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var (
	_ QueueAPI  = (*sqs.Client)(nil)
	_ InvokeAPI = (*lambda.Client)(nil)
)

type replayer struct {
	queue              QueueAPI
	fn                 InvokeAPI
	queueURL, function string
	dryRun             bool
	log                io.Writer
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

// run replays up to limit events, until the queue answers empty.
func (r *replayer) run(ctx context.Context, limit int) (result, error) {
	var res result
	seen := map[string]bool{} // a message left in the queue is not retried in one run
	for res.replayed+res.failed+res.unreadable < limit {
		out, err := r.queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &r.queueURL, MaxNumberOfMessages: int32(min(10, limit-res.replayed-res.failed-res.unreadable)),
			WaitTimeSeconds: 1, VisibilityTimeout: 60,
		})
		if err != nil {
			return res, fmt.Errorf("receive from the failure queue: %w", err)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id], fresh = true, fresh+1
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
			if _, err := r.queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &r.queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				return res, fmt.Errorf("delete replayed message %s: %w", id, err)
			}
			res.replayed++
			fmt.Fprintf(r.log, "replayed message %s\n", id)
		}
		if fresh == 0 {
			return res, nil
		}
	}
	return res, nil
}
