package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
)

// Schema is the example's table (template.yaml): the partition key and TTL
// attribute names of the table Powertools' documentation declares, so that
// definition works unchanged. The other attributes keep their defaults.
var Schema = idempotency.Schema{PartitionKey: "id", ExpiresAt: "expiration"}

// PaymentRequest is the body of POST /payments.
type PaymentRequest struct {
	OrderID  string `json:"orderId"`
	Amount   int64  `json:"amount"` // in the currency's minor unit
	Currency string `json:"currency"`
}

// Payment is the body of a 201 answer.
type Payment struct {
	ChargeID string `json:"chargeId"`
	OrderID  string `json:"orderId"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Charger is the payment provider: the side effect that must happen once
// per idempotency key.
type Charger interface {
	Charge(ctx context.Context, req PaymentRequest) (chargeID string, err error)
}

type (
	request  = events.APIGatewayV2HTTPRequest
	response = events.APIGatewayV2HTTPResponse
)

// Handler answers POST /payments behind an API Gateway HTTP API.
type Handler struct {
	pay func(context.Context, request) (response, error)
}

// NewHandler returns a handler that charges through charger at most once
// per Idempotency-Key, recording its answers in store.
// apigateway.MakeIdempotentV2 answers what concerns the key, as
// application/problem+json: 400 without one, 409 with Retry-After while
// the first request runs, 422 for another body under it; and replays the
// recorded answer marked Idempotent-Replay: true.
func NewHandler(store idempotency.Store, charger Charger, logger *slog.Logger) *Handler {
	charge := func(ctx context.Context, req request) (response, error) {
		var p PaymentRequest
		_ = json.Unmarshal([]byte(req.Body), &p) // Handle validated it
		id, err := charger.Charge(ctx, p)
		if err != nil {
			// A 5xx is not recorded: the key is released, and the client
			// may retry with it. Never echo the error, it may name
			// internals.
			logger.ErrorContext(ctx, "payment failed", "order", p.OrderID, "error", err)
			return problem(http.StatusBadGateway, "the payment could not be made; retry with the same Idempotency-Key"), nil
		}
		return jsonResponse(http.StatusCreated, Payment{ChargeID: id, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency}), nil
	}
	pay := apigateway.MakeIdempotentV2(store, charge, func(o *apigateway.Options) {
		o.Logger = logger
		// This example's API has no authorizer, so its callers have no
		// principal: they share one key space, and a key sent by two
		// clients is one record. Put an authorizer in front of a real
		// payments API and leave RequirePrincipal on.
		o.RequirePrincipal = false
	})
	return &Handler{pay: pay}
}

// Handle validates the request, then charges idempotently. A request that
// fails validation is refused before the key is claimed, so the client can
// correct it and send it again under the same key.
func (h *Handler) Handle(ctx context.Context, req request) (response, error) {
	if _, err := decodePayment(req.Body); err != nil {
		return problem(http.StatusBadRequest, err.Error()), nil
	}
	return h.pay(ctx, req)
}

func decodePayment(body string) (PaymentRequest, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var p PaymentRequest
	if err := dec.Decode(&p); err != nil {
		return p, errors.New("the body must be a JSON object with orderId, amount and currency")
	}
	switch {
	case p.OrderID == "":
		return p, errors.New("orderId is required")
	case p.Amount <= 0:
		return p, errors.New("amount must be a positive number of minor units")
	case len(p.Currency) != 3:
		return p, errors.New("currency must be an ISO 4217 code")
	}
	return p, nil
}

func jsonResponse(status int, v any) response {
	body, _ := json.Marshal(v) // plain structs of strings and numbers
	return response{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)}
}

func problem(status int, detail string) response {
	r := jsonResponse(status, map[string]any{"status": status, "detail": detail})
	r.Headers["Content-Type"] = "application/problem+json"
	return r
}
