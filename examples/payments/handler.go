package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
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
	pay    func(context.Context, request) (response, error)
	logger *slog.Logger
}

// NewHandler returns a handler that charges through charger at most once
// per Idempotency-Key, recording its answers in store.
func NewHandler(store idempotency.Store, charger Charger, logger *slog.Logger) *Handler {
	charge := func(ctx context.Context, req request) (response, error) {
		var p PaymentRequest
		_ = json.Unmarshal([]byte(req.Body), &p) // Handle validated it
		id, err := charger.Charge(ctx, p)
		if err != nil {
			return response{}, fmt.Errorf("charge order %s: %w", p.OrderID, err)
		}
		return jsonResponse(http.StatusCreated, Payment{ChargeID: id, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency}), nil
	}
	pay := idempotency.MakeIdempotent(store, charge, func(o *idempotency.HandlerOptions[request, response]) {
		// HTTP APIs deliver header names in lower case.
		o.KeyPath = "headers.idempotency-key"
		// A retry must repeat the body; the rest of the event (request id,
		// time) differs on every delivery.
		o.FingerprintPaths = []string{"body"}
		o.OnReplay = func(_ context.Context, resp response, _ idempotency.Record) response {
			if resp.Headers == nil {
				resp.Headers = map[string]string{}
			}
			resp.Headers["Idempotent-Replay"] = "true"
			return resp
		}
		o.Logger = logger
	})
	return &Handler{pay: pay, logger: logger}
}

// Handle validates the request, then charges idempotently. A request that
// fails validation is refused before the key is claimed, so the client can
// correct it and send it again under the same key.
func (h *Handler) Handle(ctx context.Context, req request) (response, error) {
	if _, err := decodePayment(req.Body); err != nil {
		return problem(http.StatusBadRequest, err.Error()), nil
	}
	resp, err := h.pay(ctx, req)
	var inProgress *idempotency.InProgressError
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, idempotency.ErrMissingKey):
		return problem(http.StatusBadRequest, "an Idempotency-Key header is required"), nil
	case errors.As(err, &inProgress):
		r := problem(http.StatusConflict, "a request with this Idempotency-Key is in progress")
		r.Headers["Retry-After"] = strconv.Itoa(int(math.Ceil(inProgress.RetryAfter.Seconds())))
		return r, nil
	case errors.Is(err, idempotency.ErrKeyReused):
		return problem(http.StatusUnprocessableEntity, "this Idempotency-Key was used with another request"), nil
	default:
		// The key was released (or never claimed): the client may retry
		// with the same key. Never echo the error, it may name internals.
		h.logger.ErrorContext(ctx, "payment failed", "error", err)
		return problem(http.StatusBadGateway, "the payment could not be made; retry with the same Idempotency-Key"), nil
	}
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
