// Package httpapi adapts API Gateway HTTP API (payload v2) requests to the
// upload service: every route of the API (see package api), not only the
// presigning the function is named for. It is the API function's handler
// (functions/api; PresignFunction in template.yaml, a name deployed stacks
// keep), importable so that the local stack can run it in-process.
package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/internal/handlers/deadline"
	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
)

// AnonymousTenant is the tenant of requests without a principal when the
// deployment allows anonymous use. Authenticated tenants carry their
// source ("jwt:", "iam:", "lambda:"), so none can be this one.
const AnonymousTenant = "anonymous"

// Service is what the handler needs of *upload.Service.
type Service interface {
	Create(ctx context.Context, tenant, key string, req api.CreateRequest) (upload.Result, error)
	Status(ctx context.Context, tenant, uploadID string) (upload.Result, error)
	SignParts(ctx context.Context, tenant, uploadID string, req api.SignPartsRequest) (upload.Result, error)
	ListParts(ctx context.Context, tenant, uploadID string) (upload.Result, error)
	Complete(ctx context.Context, tenant, uploadID string, req api.CompleteRequest) (upload.Result, error)
	Abort(ctx context.Context, tenant, uploadID string) (upload.Result, error)
}

var _ Service = (*upload.Service)(nil)

// Handler turns API Gateway HTTP API (payload v2) requests into calls on
// the upload service, and its results and errors into responses.
type Handler struct {
	Service        Service
	AllowAnonymous bool
	Logger         *slog.Logger
	// Telemetry, if set, writes one log-and-metrics line per request.
	Telemetry *telemetry.Recorder
}

// Handle serves every route. API Gateway names the route in RouteKey; a
// caller without one (a test, a direct invoke) is routed by method and path.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := deadline.Work(ctx)
	defer cancel()
	var measured *telemetry.Request
	if h.Telemetry != nil {
		ctx, measured = h.Telemetry.Start(ctx)
	}
	route, uploadID := routeOf(req)
	resp, outcome := h.serve(ctx, req, route, uploadID)
	if measured != nil {
		if route == "" {
			route = "unknown"
		}
		measured.Done(ctx, outcome, route, req.RequestContext.RequestID)
	}
	return resp, nil
}

// serve answers req and names the outcome for the request's line.
func (h *Handler) serve(ctx context.Context, req events.APIGatewayV2HTTPRequest, route, uploadID string) (events.APIGatewayV2HTTPResponse, string) {
	if route == "" {
		return errorResponse(http.StatusNotFound, api.CodeNotFound, "There is no such route."), telemetry.OutcomeInvalid
	}
	tenant, err := h.tenant(req)
	switch {
	case errors.Is(err, apigateway.ErrAnonymousJWT):
		return errorResponse(http.StatusUnauthorized, api.CodeUnauthenticated, "The token names no subject (sub) and no client (client_id or azp)."), telemetry.OutcomeInvalid
	case err != nil:
		return errorResponse(http.StatusUnauthorized, api.CodeUnauthenticated, "This API needs an authenticated principal."), telemetry.OutcomeInvalid
	}
	var res upload.Result
	switch route {
	case routeCreate:
		res, err = h.create(ctx, req, tenant)
	case routeStatus:
		res, err = h.Service.Status(ctx, tenant, uploadID)
	case routeSignParts:
		res, err = h.signParts(ctx, req, tenant, uploadID)
	case routeListParts:
		res, err = h.Service.ListParts(ctx, tenant, uploadID)
	case routeComplete:
		res, err = h.complete(ctx, req, tenant, uploadID)
	case routeAbort:
		res, err = h.Service.Abort(ctx, tenant, uploadID)
	}
	if err != nil {
		return h.errorFor(ctx, err)
	}
	return resultResponse(res)
}

// resultResponse maps a result to its response and the request's outcome.
// A create, first or replayed, is a 201 with the upload's status URL in
// Location, and Idempotent-Replay when the body is the recorded answer;
// anything else is a 200. The body is the service's, byte for byte.
func resultResponse(res upload.Result) (events.APIGatewayV2HTTPResponse, string) {
	switch res.Effect {
	case upload.EffectCreated, upload.EffectReplayed:
		resp := jsonResponse(http.StatusCreated, res.Body)
		resp.Headers["Location"] = "/uploads/" + res.UploadID
		if res.Effect == upload.EffectReplayed {
			resp.Headers["Idempotent-Replay"] = "true"
			return resp, telemetry.OutcomeReplayed
		}
		return resp, telemetry.OutcomeCreated
	case upload.EffectHealed:
		return jsonResponse(http.StatusOK, res.Body), telemetry.OutcomeHealed
	}
	return jsonResponse(http.StatusOK, res.Body), telemetry.OutcomeServed
}

// Routes, as template.yaml declares them.
const (
	routeCreate    = "POST /uploads"
	routeStatus    = "GET /uploads/{uploadId}"
	routeAbort     = "DELETE /uploads/{uploadId}"
	routeSignParts = "POST /uploads/{uploadId}/parts"
	routeListParts = "GET /uploads/{uploadId}/parts"
	routeComplete  = "POST /uploads/{uploadId}/complete"
)

// routeOf names the route of req and its upload id.
func routeOf(req events.APIGatewayV2HTTPRequest) (route, uploadID string) {
	if req.RouteKey != "" && req.RouteKey != "$default" {
		route, uploadID = req.RouteKey, req.PathParameters["uploadId"]
	} else {
		method := req.RequestContext.HTTP.Method
		// /uploads, /uploads/{id}, /uploads/{id}/parts, /uploads/{id}/complete,
		// exactly, as API Gateway matches routes: no segment is empty, so a
		// trailing or doubled slash is no route ("/uploads/{id}/" is not
		// the upload).
		segs := strings.Split(req.RawPath, "/")
		if len(segs) < 2 || len(segs) > 4 || segs[0] != "" || segs[1] != "uploads" || slices.Contains(segs[1:], "") {
			return "", ""
		}
		path := "/uploads"
		if len(segs) > 2 {
			path, uploadID = "/uploads/{uploadId}", segs[2]
		}
		if len(segs) > 3 {
			path += "/" + segs[3]
		}
		route = method + " " + path
	}
	switch route {
	case routeCreate, routeStatus, routeAbort, routeSignParts, routeListParts, routeComplete:
		return route, uploadID
	}
	return "", ""
}

// create decodes a create's key and body and creates the upload.
func (h *Handler) create(ctx context.Context, req events.APIGatewayV2HTTPRequest, tenant string) (upload.Result, error) {
	key, err := api.ParseIdempotencyKey(header(req.Headers, "idempotency-key"))
	if err != nil {
		return upload.Result{}, err
	}
	body, err := requestBody(req, api.MaxBodyBytes, api.ErrBodyTooLarge)
	if err != nil {
		return upload.Result{}, err
	}
	in, err := api.DecodeCreateRequest(body)
	if err != nil {
		return upload.Result{}, err
	}
	return h.Service.Create(ctx, tenant, key, in)
}

// signParts decodes a sign-parts body and signs the parts it asks for.
func (h *Handler) signParts(ctx context.Context, req events.APIGatewayV2HTTPRequest, tenant, uploadID string) (upload.Result, error) {
	body, err := requestBody(req, api.MaxBodyBytes, api.ErrBodyTooLarge)
	if err != nil {
		return upload.Result{}, err
	}
	in, err := api.DecodeSignPartsRequest(body)
	if err != nil {
		return upload.Result{}, err
	}
	return h.Service.SignParts(ctx, tenant, uploadID, in)
}

// complete decodes a complete's optional body (none is no declaration) and
// completes the upload.
func (h *Handler) complete(ctx context.Context, req events.APIGatewayV2HTTPRequest, tenant, uploadID string) (upload.Result, error) {
	body, err := requestBody(req, api.MaxCompleteBodyBytes, api.ErrCompleteBodyTooLarge)
	if err != nil {
		return upload.Result{}, err
	}
	in, err := api.DecodeCompleteRequest(body)
	if err != nil {
		return upload.Result{}, err
	}
	return h.Service.Complete(ctx, tenant, uploadID, in)
}

// requestBody is the raw body: API Gateway passes bodies it does not deem
// text in base64, an encoding of the transport that is the adapter's to
// undo; the body itself is package api's to decode. One that cannot fit
// in limit bytes is tooLarge without being decoded.
func requestBody(req events.APIGatewayV2HTTPRequest, limit int, tooLarge error) ([]byte, error) {
	if !req.IsBase64Encoded {
		return []byte(req.Body), nil
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > limit+3 {
		return nil, tooLarge
	}
	body, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, errUndecodableBody
	}
	return body, nil
}

var errUndecodableBody = &api.RequestError{Code: api.CodeInvalidRequest, Field: "body", Message: "The request body could not be decoded."}

// tenant is the principal the authorizer established, named with its
// source so that identities from different sources never share a
// namespace: a JWT whose sub is "anonymous" is not the anonymous tenant,
// an IAM ARN is not a JWT subject, and the same sub from two issuers is two
// tenants. A token that names no one (apigateway.ErrAnonymousJWT) is
// refused even where anonymous use is allowed: its callers would share one
// tenant.
func (h *Handler) tenant(req events.APIGatewayV2HTTPRequest) (string, error) {
	p, err := apigateway.PrincipalV2(req.RequestContext.Authorizer)
	switch {
	case err != nil:
		return "", err
	case p != "":
		return p, nil
	case h.AllowAnonymous:
		return AnonymousTenant, nil
	}
	return "", errNoPrincipal
}

var errNoPrincipal = errors.New("presign: the request names no principal")

// errorFor maps an error to its response and the request's outcome. Only
// the messages written for clients reach them: a refused request's own
// (*api.RequestError, from the decoders or the service), or the handler's
// for a condition of the upload; anything unexpected is logged and
// answered with a 500.
func (h *Handler) errorFor(ctx context.Context, err error) (events.APIGatewayV2HTTPResponse, string) {
	var refused *api.RequestError
	var inProgress *idempotency.InProgressError
	var missing *upload.PartsMissingError
	var mismatch *upload.PartsMismatchError
	switch {
	case errors.As(err, &refused):
		return errorResponse(refusalStatus(refused.Code), refused.Code, refused.Message), telemetry.OutcomeInvalid
	case errors.Is(err, upload.ErrNotFound):
		return errorResponse(http.StatusNotFound, api.CodeNotFound, "There is no such upload."), telemetry.OutcomeInvalid
	case errors.Is(err, upload.ErrNotPending):
		return errorResponse(http.StatusConflict, api.CodeUploadNotPending, "This upload is completed or aborted; its parts can no longer be signed, listed or completed."), telemetry.OutcomeInvalid
	case errors.Is(err, upload.ErrCompleted):
		return errorResponse(http.StatusConflict, api.CodeUploadCompleted, "This upload is completed and cannot be aborted."), telemetry.OutcomeInvalid
	case errors.As(err, &missing):
		return errorResponse(http.StatusConflict, api.CodePartsMissing, "S3 does not hold every part yet: parts missing or of the wrong size: "+missing.Parts()+". Send them, then complete again."), telemetry.OutcomeInvalid
	case errors.As(err, &mismatch):
		return errorResponse(http.StatusConflict, api.CodePartsMismatch, "S3 holds other bytes than declared; parts whose SHA-256 in S3 is not the declared one: "+mismatch.Parts()+
			". Nothing was completed: sign those parts again, send their right bytes, then complete again."), telemetry.OutcomeInvalid
	case errors.Is(err, upload.ErrTooManyUploads):
		// No Retry-After: a place frees only when one of the tenant's
		// uploads ends, which no wait promises.
		return errorResponse(http.StatusTooManyRequests, api.CodeTooManyUploads,
			"You have as many multipart uploads in progress as this service allows. Complete or abort some of them, then create this one again."), telemetry.OutcomeLimited
	case errors.Is(err, idempotency.ErrKeyReused):
		return errorResponse(http.StatusUnprocessableEntity, api.CodeKeyReuse,
			"This Idempotency-Key was already used for a different request."), telemetry.OutcomeKeyReuse
	case errors.As(err, &inProgress):
		resp := errorResponse(http.StatusConflict, api.CodeInProgress,
			"A request with this Idempotency-Key is in progress; retry later.")
		resp.Headers["Retry-After"] = strconv.Itoa(inProgress.RetryAfterSeconds())
		return resp, telemetry.OutcomeInProgress
	case errors.Is(err, context.Canceled):
		// Only a local caller that hung up cancels; Lambda's deadline is
		// DeadlineExceeded. Nobody reads this answer: not our error.
		h.Logger.InfoContext(ctx, "the caller went away", "error", err)
		resp := errorResponse(http.StatusServiceUnavailable, api.CodeUnavailable, "The request was cancelled.")
		resp.Headers["Retry-After"] = "1" // as on every 503 the contract lists
		return resp, telemetry.OutcomeUnavailable
	case errors.Is(err, idempotency.ErrUnavailable):
		h.Logger.WarnContext(ctx, "store unavailable", "error", err)
		resp := errorResponse(http.StatusServiceUnavailable, api.CodeUnavailable,
			"The service is busy; retry later with the same Idempotency-Key.")
		resp.Headers["Retry-After"] = "1"
		return resp, telemetry.OutcomeUnavailable
	}
	h.Logger.ErrorContext(ctx, "internal error", "error", err)
	return errorResponse(http.StatusInternalServerError, api.CodeInternal, "Something went wrong on our side; retry later."), telemetry.OutcomeError
}

// refusalStatus is the HTTP status of a refused request's error code.
func refusalStatus(code string) int {
	switch code {
	case api.CodeRequestTooLarge, api.CodeFileTooLarge:
		return http.StatusRequestEntityTooLarge
	case api.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusBadRequest // invalid_request and the Idempotency-Key's codes
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
	body, _ := json.Marshal(api.Error{Error: code, Message: message})
	return jsonResponse(status, body)
}
