// Package presign adapts API Gateway HTTP API (payload v2) requests to the
// upload service: POST /uploads and GET /uploads/{uploadId}. It is the
// presign function's handler, importable so that the local stack can run it
// in-process.
package presign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/onceupload/onceupload/pkg/api"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/upload"
)

// AnonymousTenant is the tenant of requests without a principal when the
// deployment allows anonymous use.
const AnonymousTenant = "anonymous"

// Service is what the handler needs of *upload.Service.
type Service interface {
	Create(ctx context.Context, tenant, key string, req api.CreateRequest) (upload.Reply, error)
	Status(ctx context.Context, tenant, uploadID string) (upload.Reply, error)
}

var _ Service = (*upload.Service)(nil)

// Handler turns API Gateway HTTP API (payload v2) requests into calls on
// the upload service, and its results and errors into responses.
type Handler struct {
	Service        Service
	AllowAnonymous bool
	Logger         *slog.Logger
}

// Handle serves POST /uploads and GET /uploads/{uploadId}.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	method := req.RequestContext.HTTP.Method
	switch {
	case req.RouteKey == "POST /uploads" || method == http.MethodPost && req.RawPath == "/uploads":
		return h.create(ctx, req), nil
	case req.RouteKey == "GET /uploads/{uploadId}":
		return h.status(ctx, req, req.PathParameters["uploadId"]), nil
	case method == http.MethodGet && strings.HasPrefix(req.RawPath, "/uploads/"):
		return h.status(ctx, req, strings.TrimPrefix(req.RawPath, "/uploads/")), nil
	}
	return errorResponse(http.StatusNotFound, "not_found", "There is no such route."), nil
}

func (h *Handler) create(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	tenant, ok := h.tenant(req)
	if !ok {
		return errorResponse(http.StatusUnauthorized, "unauthenticated", "This API needs an authenticated principal.")
	}
	key, err := api.ParseIdempotencyKey(header(req.Headers, "idempotency-key"))
	if err != nil {
		return h.fail(ctx, err)
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		if base64.StdEncoding.DecodedLen(len(req.Body)) > api.MaxBodyBytes+3 {
			return h.fail(ctx, upload.ErrBodyTooLarge)
		}
		if body, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return errorResponse(http.StatusBadRequest, "invalid_request", "The request body could not be decoded.")
		}
	}
	in, err := upload.DecodeCreateRequest(body)
	if err != nil {
		return h.fail(ctx, err)
	}
	reply, err := h.Service.Create(ctx, tenant, key, in)
	if err != nil {
		return h.fail(ctx, err)
	}
	resp := jsonResponse(reply.Status, reply.Body)
	resp.Headers["Location"] = "/uploads/" + reply.UploadID
	if reply.Replayed {
		resp.Headers["Idempotent-Replay"] = "true"
	}
	return resp
}

func (h *Handler) status(ctx context.Context, req events.APIGatewayV2HTTPRequest, uploadID string) events.APIGatewayV2HTTPResponse {
	tenant, ok := h.tenant(req)
	if !ok {
		return errorResponse(http.StatusUnauthorized, "unauthenticated", "This API needs an authenticated principal.")
	}
	reply, err := h.Service.Status(ctx, tenant, uploadID)
	if err != nil {
		return h.fail(ctx, err)
	}
	return jsonResponse(reply.Status, reply.Body)
}

// tenant is the principal the authorizer established: a JWT's sub, an IAM
// caller's ARN, or a Lambda authorizer's principalId.
func (h *Handler) tenant(req events.APIGatewayV2HTTPRequest) (string, bool) {
	if a := req.RequestContext.Authorizer; a != nil {
		if a.JWT != nil && a.JWT.Claims["sub"] != "" {
			return a.JWT.Claims["sub"], true
		}
		if a.IAM != nil && a.IAM.UserARN != "" {
			return a.IAM.UserARN, true
		}
		if p, ok := a.Lambda["principalId"].(string); ok && p != "" {
			return p, true
		}
	}
	if h.AllowAnonymous {
		return AnonymousTenant, true
	}
	return "", false
}

// fail maps an error to its response. Only the messages written for clients
// reach them; anything unexpected is logged and answered with a 500.
func (h *Handler) fail(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
	var validation *upload.ValidationError
	var inProgress *idempotency.InProgressError
	switch {
	case errors.Is(err, api.ErrKeyMissing):
		return errorResponse(http.StatusBadRequest, "idempotency_key_required", err.Error()+".")
	case errors.Is(err, api.ErrKeyInvalid):
		return errorResponse(http.StatusBadRequest, "idempotency_key_invalid", err.Error()+".")
	case errors.As(err, &validation):
		return errorResponse(http.StatusBadRequest, "invalid_request", validation.Message+".")
	case errors.Is(err, upload.ErrBodyTooLarge):
		return errorResponse(http.StatusRequestEntityTooLarge, "request_too_large", err.Error()+".")
	case errors.Is(err, upload.ErrFileTooLarge), errors.Is(err, upload.ErrNeedsParts):
		return errorResponse(http.StatusRequestEntityTooLarge, "file_too_large", err.Error()+".")
	case errors.Is(err, upload.ErrUnsupportedMedia):
		return errorResponse(http.StatusUnsupportedMediaType, "unsupported_media_type", err.Error()+".")
	case errors.Is(err, upload.ErrNotFound):
		return errorResponse(http.StatusNotFound, "not_found", "There is no such upload.")
	case errors.Is(err, idempotency.ErrKeyReused):
		return errorResponse(http.StatusUnprocessableEntity, "idempotency_key_reuse",
			"This Idempotency-Key was already used for a different request.")
	case errors.As(err, &inProgress):
		resp := errorResponse(http.StatusConflict, "idempotency_in_progress",
			"A request with this Idempotency-Key is in progress; retry later.")
		resp.Headers["Retry-After"] = strconv.Itoa(int(inProgress.RetryAfter.Seconds()))
		return resp
	case errors.Is(err, idempotency.ErrUnavailable):
		h.Logger.WarnContext(ctx, "store unavailable", "error", err)
		resp := errorResponse(http.StatusServiceUnavailable, "service_unavailable",
			"The service is busy; retry later with the same Idempotency-Key.")
		resp.Headers["Retry-After"] = "1"
		return resp
	}
	h.Logger.ErrorContext(ctx, "internal error", "error", err)
	return errorResponse(http.StatusInternalServerError, "internal_error", "Something went wrong on our side; retry later.")
}

// header finds a header by its lower-case name: API Gateway v2 lower-cases
// them, other callers may not.
func header(h map[string]string, lower string) string {
	if v, ok := h[lower]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, lower) {
			return v
		}
	}
	return ""
}

func jsonResponse(status int, body []byte) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       string(body),
	}
}

func errorResponse(status int, code, message string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, message})
	return jsonResponse(status, body)
}
