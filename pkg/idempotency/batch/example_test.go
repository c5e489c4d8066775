package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/batch"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// An SQS consumer: each message runs once, only the messages that failed
// are reported (the event source mapping needs ReportBatchItemFailures),
// and when SQS delivers those again the others are not redone.
func ExampleSQS() {
	shipped, warehouseDown := map[string]int{}, true
	ship := func(ctx context.Context, msg events.SQSMessage) (string, error) {
		var order struct {
			OrderID string `json:"orderId"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &order); err != nil {
			return "", err
		}
		if order.OrderID == "o-2" && warehouseDown {
			warehouseDown = false // back up for the next delivery
			return "", errors.New("warehouse unavailable")
		}
		shipped[order.OrderID]++
		return "shipment-" + order.OrderID, nil
	}
	store := memorystore.New() // in Lambda: dynamostore.New(client, table)
	handler := batch.SQS(store, ship)
	// In main: lambda.Start(handler)

	delivery := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"o-1"}`, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"},
		{MessageId: "m-2", Body: `{"orderId":"o-2"}`, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"},
		{MessageId: "m-3", Body: `{"orderId":"o-3"}`, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"},
	}}
	first, _ := handler(context.Background(), delivery)
	again, _ := handler(context.Background(), delivery) // SQS delivers the batch again, m-1 and m-3 with it
	fmt.Println(first.BatchItemFailures, again.BatchItemFailures, shipped)
	// Output: [{m-2}] [] map[o-1:1 o-2:1 o-3:1]
}

// From a FIFO queue, the batch stops at its first failure: the messages
// after it are reported too, unprocessed, so that none overtakes it.
func ExampleSQS_fifo() {
	var processed []string
	handler := batch.SQS(memorystore.New(), func(ctx context.Context, msg events.SQSMessage) (struct{}, error) {
		if msg.Body == "poison" {
			return struct{}{}, errors.New("cannot parse")
		}
		processed = append(processed, msg.MessageId)
		return struct{}{}, nil
	})
	queue := "arn:aws:sqs:eu-west-1:123456789012:orders.fifo" // or Options.FIFO
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: "a", EventSourceARN: queue},
		{MessageId: "m-2", Body: "poison", EventSourceARN: queue},
		{MessageId: "m-3", Body: "b", EventSourceARN: queue},
	}})
	fmt.Println(processed, resp.BatchItemFailures)
	// Output: [m-1] [{m-2} {m-3}]
}

// Keyed on the message body instead of the messageId, a producer's second
// send of an order (a new message, with a new messageId) is a replay too.
func ExampleOptions_keyOnTheBody() {
	charges := 0
	charge := func(ctx context.Context, msg events.SQSMessage) (string, error) {
		charges++
		return fmt.Sprintf("ch_%d", charges), nil
	}
	handler := batch.SQS(memorystore.New(), charge, func(o *batch.Options[events.SQSMessage, string]) {
		o.Idempotency = func(h *idempotency.HandlerOptions[events.SQSMessage, string]) {
			h.KeyPath = "body.orderId" // a message without one fails with idempotency.ErrMissingKey
		}
	})
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"o-1","amount":10}`},
		{MessageId: "m-2", Body: `{"amount":10,"orderId":"o-1"}`}, // sent again by the producer
	}})
	fmt.Println(charges, resp.BatchItemFailures)
	// Output: 1 []
}

// A DynamoDB stream (or, with batch.Kinesis, a Kinesis stream): records
// run in order, the first failure stops the batch, and it is reported with
// every later record by sequence number, from which Lambda retries.
func ExampleDynamoDB() {
	handler := batch.DynamoDB(memorystore.New(), func(ctx context.Context, r events.DynamoDBEventRecord) (struct{}, error) {
		if r.Change.Keys["pk"].String() == "bad" {
			return struct{}{}, errors.New("cannot index")
		}
		return struct{}{}, nil
	})
	record := func(seq, pk string) events.DynamoDBEventRecord {
		r := events.DynamoDBEventRecord{EventID: "event-" + seq, EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"}
		r.Change.SequenceNumber = seq
		r.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk)}
		return r
	}
	resp, _ := handler(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("101", "a"), record("102", "bad"), record("103", "c"),
	}})
	fmt.Println(resp.BatchItemFailures)
	// Output: [{102} {103}]
}
