package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// MakeIdempotent wraps a handler: the key comes from a header, a retry must
// repeat the body, and the second call is answered from the record without
// charging twice.
func ExampleMakeIdempotent() {
	type request struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	type charge struct {
		ChargeID string `json:"chargeId"`
		Amount   int    `json:"amount"`
	}
	charges := 0
	handle := func(ctx context.Context, req request) (charge, error) {
		charges++
		return charge{ChargeID: fmt.Sprintf("ch_%d", charges), Amount: 1000}, nil
	}
	store := memorystore.New()
	pay := idempotency.MakeIdempotent(store, handle, func(o *idempotency.HandlerOptions[request, charge]) {
		o.KeyPath = "headers.Idempotency-Key"
		o.FingerprintPaths = []string{"body"}
	})

	ctx := context.Background()
	first, _ := pay(ctx, request{Headers: map[string]string{"Idempotency-Key": "order-42"}, Body: `{"amount":1000}`})
	retry, _ := pay(ctx, request{Headers: map[string]string{"idempotency-key": "order-42"}, Body: `{ "amount": 1000 }`})
	_, err := pay(ctx, request{Headers: map[string]string{"Idempotency-Key": "order-42"}, Body: `{"amount":5000}`})
	fmt.Println(first.ChargeID, retry.ChargeID, charges)
	fmt.Println(errors.Is(err, idempotency.ErrKeyReused))
	// Output:
	// ch_1 ch_1 1
	// true
}

// An API Gateway handler (an HTTP API, payload 2.0), as Powertools users
// write it with eventKeyJmesPath 'headers."idempotency-key"' and
// payloadValidationJmesPath 'powertools_json(body)': the key from the
// header, a retry must repeat the body (never the request id API Gateway
// adds to each delivery), a replay is marked, and the wrapper's errors
// become HTTP statuses.
func ExampleMakeIdempotent_apiGateway() {
	type (
		request  = events.APIGatewayV2HTTPRequest
		response = events.APIGatewayV2HTTPResponse
	)
	charge := func(ctx context.Context, req request) (response, error) {
		return response{StatusCode: 201, Body: `{"chargeId":"ch_1"}`}, nil // charge the card once
	}
	store := memorystore.New() // in Lambda: dynamostore.New(client, table)
	pay := idempotency.MakeIdempotent(store, charge, func(o *idempotency.HandlerOptions[request, response]) {
		o.KeyPath = "headers.idempotency-key" // in any case
		o.FingerprintPaths = []string{"body"}
		o.UseLocalCache = true
		o.OnReplay = func(_ context.Context, resp response, _ idempotency.Record) response {
			resp.Headers = map[string]string{"Idempotent-Replay": "true"}
			return resp
		}
	})
	handler := func(ctx context.Context, req request) (response, error) {
		resp, err := pay(ctx, req)
		var inProgress *idempotency.InProgressError
		switch {
		case errors.Is(err, idempotency.ErrMissingKey):
			return response{StatusCode: 400}, nil
		case errors.As(err, &inProgress):
			retryAfter := strconv.Itoa(inProgress.RetryAfterSeconds())
			return response{StatusCode: 409, Headers: map[string]string{"Retry-After": retryAfter}}, nil
		case errors.Is(err, idempotency.ErrKeyReused):
			return response{StatusCode: 422}, nil
		}
		return resp, err // any other error: the key was released, and a retry runs again
	}
	// In main: lambda.Start(handler)

	ctx := context.Background()
	req := request{Headers: map[string]string{"idempotency-key": "order-42"}, Body: `{"amount":1000}`}
	req.RequestContext.RequestID = "delivery-1"
	first, _ := handler(ctx, req)
	req.RequestContext.RequestID = "delivery-2"
	retry, _ := handler(ctx, req)
	req.Body = `{"amount":5000}`
	reused, _ := handler(ctx, req)
	fmt.Println(first.StatusCode, retry.StatusCode, retry.Headers["Idempotent-Replay"], reused.StatusCode)
	// Output: 201 201 true 422
}

// An SQS consumer: each message is processed at most once per order, the
// key taken from the body so that a producer's resend under a new
// messageId is caught too, and only the messages that failed are reported
// (the event source mapping needs ReportBatchItemFailures), so that SQS
// delivers those again and not the whole batch.
func ExampleMakeIdempotent_sqs() {
	type order struct {
		OrderID string `json:"orderId"`
		Amount  int    `json:"amount"`
	}
	shipped := 0
	ship := func(ctx context.Context, msg events.SQSMessage) (string, error) {
		var o order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
			return "", err
		}
		shipped++
		return "shipment-" + o.OrderID, nil
	}
	store := memorystore.New() // in Lambda: dynamostore.New(client, table)
	shipOnce := idempotency.MakeIdempotent(store, ship, func(o *idempotency.HandlerOptions[events.SQSMessage, string]) {
		o.KeyPath = "body.orderId"
		o.FingerprintPaths = []string{"body"} // not the receipt handle nor the attributes, new on every delivery
	})
	handler := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, msg := range ev.Records {
			// A message that failed, or is in progress in another
			// invocation, comes again. (From a FIFO queue, stop at the first
			// failure and report it and every message after it.)
			if _, err := shipOnce(ctx, msg); err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			}
		}
		return resp, nil
	}
	// In main: lambda.Start(handler)

	message := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, ReceiptHandle: "handle-" + id, Body: body}
	}
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("m-1", `{"orderId":"o-1","amount":10}`),
		message("m-2", `{"amount":10,"orderId":"o-1"}`), // the producer sent it again
		message("m-3", `{"amount":10}`),                 // no orderId: ErrMissingKey
	}})
	fmt.Println(shipped, resp.BatchItemFailures)
	// Output: 1 [{m-3}]
}

// A function that is not a handler, as Powertools' idempotent_function
// (Python) or makeIdempotent around any function (TypeScript) wraps one:
// any func(ctx, Req) (Resp, error) goes, here with a key of two fields
// (JMESPath's [customerId, orderId]) and the whole argument as its
// fingerprint.
func ExampleMakeIdempotent_function() {
	type refund struct {
		CustomerID, OrderID string
		Cents               int
	}
	refunds := 0
	issueRefund := func(ctx context.Context, r refund) (string, error) {
		refunds++
		return fmt.Sprintf("rf_%d", refunds), nil
	}
	store := memorystore.New() // in Lambda: dynamostore.New(client, table)
	refundOnce := idempotency.MakeIdempotent(store, issueRefund, func(o *idempotency.HandlerOptions[refund, string]) {
		o.Scope = "refunds" // apart from the keys of the function's other wrapped calls
		o.Key = func(_ context.Context, r refund) (string, error) {
			key, err := json.Marshal([]string{r.CustomerID, r.OrderID}) // no two pairs give one key
			return string(key), err
		}
	})

	ctx := context.Background()
	r := refund{CustomerID: "c-7", OrderID: "o-42", Cents: 500}
	first, _ := refundOnce(ctx, r)
	again, _ := refundOnce(ctx, r)
	r.Cents = 900
	_, err := refundOnce(ctx, r)
	fmt.Println(first, again, refunds, errors.Is(err, idempotency.ErrKeyReused))
	// Output: rf_1 rf_1 1 true
}

// A table of a single-table design: records live under one partition key
// value, their ids in the sort key behind a prefix, with attribute names of
// the table's own. Names that collide are refused before any call.
func ExampleSchema() {
	schema := idempotency.Schema{
		PartitionKey: "PK", SortKey: "SK", StaticPartitionValue: "ORDERS", KeyPrefix: "IDEMPOTENCY#",
		ExpiresAt: "ttl", State: "status",
	}
	fmt.Println(schema.Validate())
	var cfg aws.Config // config.LoadDefaultConfig(ctx) in a program, as in dynamostore's ExampleNew
	client := dynamodb.NewFromConfig(cfg)
	_ = dynamostore.New(client, "app-table", func(o *idempotency.Options) { o.Schema = schema })

	schema.State = "data" // the caller's fields live in "data"
	fmt.Println(schema.Validate())
	// Output:
	// <nil>
	// idempotency: invalid schema: State and (fixed) data are both "data"
}
