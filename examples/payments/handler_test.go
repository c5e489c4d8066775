package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

var dynoxide = testenv.SharedDynoxide()

func TestMain(m *testing.M) { testenv.Main(m, dynoxide) }

// fakeCharger counts charges; block, when set, holds each charge until it
// is closed, and fail makes the n-th charge fail.
type fakeCharger struct {
	n       atomic.Int64
	entered chan struct{}
	block   chan struct{}
	fail    func(n int64) error
}

func (f *fakeCharger) Charge(_ context.Context, p PaymentRequest) (string, error) {
	n := f.n.Add(1)
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	if f.fail != nil {
		if err := f.fail(n); err != nil {
			return "", err
		}
	}
	return "ch_" + p.OrderID + "_" + string(rune('0'+n)), nil
}

type env struct {
	handler *Handler
	charger *fakeCharger
	client  *dynamodb.Client
	table   string
}

// newEnv is the function as deployed: the real store on a table shaped as
// template.yaml declares it, on a local DynamoDB.
func newEnv(t *testing.T) *env {
	t.Helper()
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	table := testenv.NewTableWithKey(t, client, Schema.PartitionKey, "")
	store := dynamostore.New(client, table, func(o *idempotency.Options) { o.Schema = Schema })
	charger := &fakeCharger{}
	return &env{handler: NewHandler(store, charger, slog.New(slog.NewTextHandler(io.Discard, nil))), charger: charger, client: client, table: table}
}

// invoke delivers a request as API Gateway would: a fresh request id every
// time, and an invocation deadline.
func (e *env) invoke(t *testing.T, key, body string) response {
	t.Helper()
	req := request{RawPath: "/payments", Headers: map[string]string{"content-type": "application/json"}, Body: body}
	if key != "" {
		req.Headers["idempotency-key"] = key
	}
	req.RequestContext.RequestID = time.Now().Format(time.RFC3339Nano)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.handler.Handle(ctx, req)
	if err != nil {
		t.Fatalf("Handle returned an error to Lambda: %v", err)
	}
	return resp
}

// items counts the records in the table.
func (e *env) items(t *testing.T) int32 {
	t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table, Select: types.SelectCount, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Count
}

func ptr[T any](v T) *T { return &v }

func payment(t *testing.T, r response) Payment {
	t.Helper()
	var p Payment
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return p
}

const body = `{"orderId":"o-42","amount":1999,"currency":"EUR"}`

func TestPayments(t *testing.T) {
	t.Run("a retried request is answered from the record", func(t *testing.T) {
		e := newEnv(t)
		first := e.invoke(t, "key-1", body)
		retry := e.invoke(t, "key-1", `{ "currency": "EUR", "amount": 1999, "orderId": "o-42" }`)
		if first.StatusCode != 201 || retry.StatusCode != 201 {
			t.Fatalf("statuses %d, %d; want 201 twice", first.StatusCode, retry.StatusCode)
		}
		if p, q := payment(t, first), payment(t, retry); p.ChargeID == "" || p != q {
			t.Fatalf("first %+v, retry %+v; want the same charge", p, q)
		}
		if first.Headers["Idempotent-Replay"] != "" || retry.Headers["Idempotent-Replay"] != "true" {
			t.Errorf("Idempotent-Replay = %q, %q; want only the retry marked", first.Headers["Idempotent-Replay"], retry.Headers["Idempotent-Replay"])
		}
		if n := e.charger.n.Load(); n != 1 {
			t.Errorf("%d charges, want 1", n)
		}
		if n := e.items(t); n != 1 {
			t.Errorf("%d records, want 1", n)
		}
	})
	t.Run("another body under the same key is refused", func(t *testing.T) {
		e := newEnv(t)
		e.invoke(t, "key-1", body)
		got := e.invoke(t, "key-1", `{"orderId":"o-42","amount":99999,"currency":"EUR"}`)
		if got.StatusCode != 422 || e.charger.n.Load() != 1 {
			t.Fatalf("status %d after %d charges; want 422 after 1", got.StatusCode, e.charger.n.Load())
		}
		var p struct{ Type string }
		_ = json.Unmarshal([]byte(got.Body), &p)
		if ct := got.Headers["Content-Type"]; ct != "application/problem+json" || !strings.HasSuffix(p.Type, "#"+apigateway.TypeKeyReused) {
			t.Errorf("422 as %q with type %q; want an RFC 9457 problem of type %s", ct, p.Type, apigateway.TypeKeyReused)
		}
	})
	t.Run("a concurrent request is in progress", func(t *testing.T) {
		e := newEnv(t)
		e.charger.entered, e.charger.block = make(chan struct{}, 1), make(chan struct{})
		var first response
		done := make(chan struct{})
		go func() { defer close(done); first = e.invoke(t, "key-1", body) }()
		select {
		case <-e.charger.entered:
		case <-done:
			t.Fatalf("the first request ended without charging: %d %s", first.StatusCode, first.Body)
		}
		second := e.invoke(t, "key-1", body)
		close(e.charger.block)
		<-done
		if second.StatusCode != 409 || second.Headers["Retry-After"] == "" {
			t.Fatalf("second: %d %v; want 409 with Retry-After", second.StatusCode, second.Headers)
		}
		if ra, _ := time.ParseDuration(second.Headers["Retry-After"] + "s"); ra < 9*time.Second || ra > 10*time.Second {
			t.Errorf("Retry-After %q, want the first invocation's remaining time (10 s)", second.Headers["Retry-After"])
		}
		if first.StatusCode != 201 || e.charger.n.Load() != 1 {
			t.Fatalf("first: %d after %d charges; want 201 after 1", first.StatusCode, e.charger.n.Load())
		}
	})
	t.Run("a failing charge releases the key", func(t *testing.T) {
		e := newEnv(t)
		e.charger.fail = func(n int64) error {
			if n == 1 {
				return errors.New("provider timeout")
			}
			return nil
		}
		failed := e.invoke(t, "key-1", body)
		if failed.StatusCode != 502 {
			t.Fatalf("first: %d, want 502", failed.StatusCode)
		}
		if n := e.items(t); n != 0 {
			t.Fatalf("%d records after the failure, want 0", n)
		}
		retry := e.invoke(t, "key-1", body)
		if retry.StatusCode != 201 || retry.Headers["Idempotent-Replay"] != "" || e.charger.n.Load() != 2 {
			t.Fatalf("retry: %d %v after %d charges; want a fresh 201 after 2", retry.StatusCode, retry.Headers, e.charger.n.Load())
		}
	})
	t.Run("requests without a key or with a bad body are refused, unrecorded", func(t *testing.T) {
		e := newEnv(t)
		if got := e.invoke(t, "", body); got.StatusCode != 400 {
			t.Errorf("no key: %d, want 400", got.StatusCode)
		}
		if got := e.invoke(t, "key-1", `{"orderId":"o-42","amount":-1,"currency":"EUR"}`); got.StatusCode != 400 {
			t.Errorf("bad body: %d, want 400", got.StatusCode)
		}
		if got := e.invoke(t, "key-1", body); got.StatusCode != 201 {
			t.Errorf("the corrected body under the same key: %d, want 201", got.StatusCode)
		}
		if n := e.charger.n.Load(); n != 1 {
			t.Errorf("%d charges, want 1", n)
		}
	})
}
