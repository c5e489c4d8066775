// Package apigateway makes an API Gateway handler idempotent with the HTTP
// semantics of the IETF Idempotency-Key draft
// (draft-ietf-httpapi-idempotency-key-header), which Powertools leaves to
// its users: [MakeIdempotentV2] for HTTP APIs, [MakeIdempotentV1] for REST
// APIs. Both are built on [idempotency.MakeIdempotent], so its store, local
// cache and POWERTOOLS_IDEMPOTENCY_DISABLED switch apply.
//
// For each request the wrapper:
//
//   - takes the key from the Idempotency-Key header (its name in any case),
//     bare or as a structured-field string ("...", holding no double
//     quote or backslash): 1 to [MaxKeyLen] visible ASCII characters other
//     than a comma, by package keyheader's rule, the upload API's too. A
//     comma is refused because a proxy joins two headers with one, and two
//     keys must never make a new one;
//   - scopes the key by the caller's principal ([PrincipalV2],
//     [PrincipalV1], or Options.PrincipalFromV2 and PrincipalFromV1), as
//     the upload API scopes its keys. Two callers who send the same key
//     never share a record. A request without a principal is refused with
//     a 401 problem, unless Options.RequirePrincipal is turned off for an
//     API whose callers are anonymous by design: then its key alone scopes
//     it, and every anonymous caller shares the key space. A JWT that names
//     no one is always refused;
//   - fingerprints the method, the raw path (path parameters included),
//     the query string (its parameters sorted by name, each name's values
//     in their order), the stage and the body: a body that holds a JSON
//     object or array counts as its canonical JSON, as in
//     idempotency.HandlerOptions, any other as its bytes, a base64 body
//     decoded first; the other parts count as written. Never API Gateway's
//     request id or time, which differ on every delivery, nor the headers;
//   - replays a recorded response with its status, headers and body, and
//     the header Idempotent-Replay: true;
//   - records a response whose status Options.Record accepts (by default
//     2xx, 3xx and 4xx other than 401, 403, 404, 408, 409, 425 and 429:
//     [DefaultRecord]), without Set-Cookie (V2's cookies) and
//     Options.PerCallerHeaders; one larger than Options.MaxRecordedBytes is
//     recorded without its body, marked [BodyOmittedHeader]. A 5xx
//     response, or an error from the handler, releases the key, so that a
//     retry runs the handler again. The handler's error is returned as it
//     is (API Gateway answers 500 for it).
//
// Misuse of a key is answered, without running the handler, with an RFC
// 9457 problem (application/problem+json, with type, title, status and
// detail) and a Link header (rel="describedby") to the problem type's
// documentation: 400 for a missing ([TypeKeyMissing]) or malformed
// ([TypeKeyMalformed]) key, 401 without a principal when one is required
// or for a JWT that names no one ([TypePrincipalRequired]), 409 with
// Retry-After while the first request with the key runs
// ([TypeKeyInProgress]), 409 without it once that request timed out under
// Options.AfterTimeout's BlockTimedOut ([TypeKeyTimedOut]), 422 for
// another request under the key ([TypeKeyReused]). Other errors (the
// store's) are returned as they are.
package apigateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/keyheader"
)

// Header is the request header that carries the idempotency key.
const Header = "Idempotency-Key"

// ReplayHeader marks a response answered from a record: its value is
// "true".
const ReplayHeader = "Idempotent-Replay"

// BodyOmittedHeader marks a replay whose body was too large to record
// (Options.MaxRecordedBytes): its value is "omitted", its status and
// headers are the first answer's, its body empty.
const BodyOmittedHeader = "Idempotent-Replay-Body"

// DefaultMaxRecordedBytes is Options.MaxRecordedBytes' default: DynamoDB
// refuses an item over 400 KB (409,600 bytes), key, fingerprint and the
// record's other attributes included; 16 KiB is left for those.
const DefaultMaxRecordedBytes = 384 << 10

// MaxKeyLen bounds an Idempotency-Key, counted after unquoting. The upload
// API asks for at least 16 characters of its own clients; a general API's
// clients often send an order number, so one character is enough here.
const MaxKeyLen = keyheader.MaxLen

// DefaultDocsURL is where the problem types are documented: each type is
// this address with the type's name as its fragment.
const DefaultDocsURL = "https://github.com/onceupload/onceupload/blob/main/docs/idempotency.md"

// The problem types' names: the fragment of each type URI, and a heading of
// the documentation.
const (
	TypeKeyMissing        = "idempotency-key-missing"
	TypeKeyMalformed      = "idempotency-key-malformed"
	TypePrincipalRequired = "idempotency-principal-required"
	TypeKeyInProgress     = "idempotency-key-in-progress"
	TypeKeyTimedOut       = "idempotency-key-timed-out"
	TypeKeyReused         = "idempotency-key-reused"
)

// Options configure MakeIdempotentV1 and MakeIdempotentV2. The last five
// are idempotency.HandlerOptions' fields of the same names, with the same
// defaults.
type Options struct {
	// RequirePrincipal answers a request without a principal with a 401
	// problem, rather than scope its key by the key alone, where all such
	// callers share one key space and one may be replayed another's
	// response. Defaults to true: set it false only for an API whose
	// callers are anonymous by design (no authorizer), and whose responses
	// any caller may see.
	RequirePrincipal bool
	// PrincipalFromV2 names the caller of an HTTP API request, in place of
	// PrincipalV2 of its authorizer: "" for none, an error to refuse the
	// request with a 401 problem. The name scopes the caller's keys, so it
	// must tell apart every caller whose keys must not meet (an HTTP API
	// Lambda authorizer's simple response names no one: name the caller
	// from its context). Defaults to nil.
	PrincipalFromV2 func(events.APIGatewayV2HTTPRequest) (string, error)
	// PrincipalFromV1 is PrincipalFromV2 for a REST API, in place of
	// PrincipalV1. Defaults to nil.
	PrincipalFromV1 func(events.APIGatewayProxyRequest) (string, error)
	// Record reports whether a response of this status is recorded and
	// replayed; one it refuses releases the key, so that a retry runs the
	// handler again. It is asked about statuses 200 to 499 only: any other
	// (a 5xx) is never recorded. Defaults to DefaultRecord.
	Record func(status int) bool
	// PerCallerHeaders name response headers (in any case) that belong to
	// the caller of the first request, as Set-Cookie does, which is never
	// recorded either: a replay goes without them. Defaults to none.
	PerCallerHeaders []string
	// MaxRecordedBytes bounds a recorded response, counted as the store
	// keeps it (its JSON: headers and escaped body). A larger one is
	// recorded without its body (and its Content-Type, Content-Length and
	// Content-Encoding), marked with BodyOmittedHeader: the store would
	// refuse it after the handler ran, every time, and each retry would
	// run the handler again. Defaults to DefaultMaxRecordedBytes, under
	// DynamoDB's item limit.
	MaxRecordedBytes int
	// DocsURL is the page that documents the problem types: each problem's
	// type is DocsURL#name, and its Link header points there. Defaults to
	// DefaultDocsURL.
	DocsURL string
	// OptionalKey runs a request without an Idempotency-Key header without
	// idempotency instead of answering 400. A malformed key is still a 400.
	// Defaults to false.
	OptionalKey bool
	// AfterTimeout is idempotency.HandlerOptions.AfterTimeout: with
	// idempotency.BlockTimedOut, a retry after a run that timed out (its
	// outcome unknown) is a 409 problem without Retry-After
	// ([TypeKeyTimedOut]) until the record expires or
	// idempotency.ReleaseTimedOut frees the key. Defaults to
	// idempotency.TakeOverTimedOut.
	AfterTimeout idempotency.TimeoutPolicy

	Scope              string
	UseLocalCache      bool
	LocalCacheMaxItems int
	Logger             *slog.Logger
	Now                func() time.Time
}

// DefaultRecord records every status from 200 to 499 except those that say
// the request may succeed if sent again as it is: 401 Unauthorized, 403
// Forbidden and 404 Not Found (the caller's rights or the resource may
// change within the record's TTL), 408 Request Timeout, 409 Conflict, 425
// Too Early and 429 Too Many Requests.
func DefaultRecord(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

type (
	v2Handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	v1Handler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
)

// MakeIdempotentV2 wraps the handler of an HTTP API (payload format 2.0):
// see the package documentation.
func MakeIdempotentV2(store idempotency.Store, fn v2Handler, optFns ...func(*Options)) v2Handler {
	return wrap(store, fn, flavor[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
		call: func(o *Options, r events.APIGatewayV2HTTPRequest) *call[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse] {
			c := &call[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
				Method: []byte(r.RequestContext.HTTP.Method), Path: []byte(r.RawPath), Query: []byte(sortedQuery(r.RawQueryString)),
				Stage: []byte(r.RequestContext.Stage), req: r, keys: headerValues(r.Headers, nil),
			}
			if o.PrincipalFromV2 != nil {
				c.principal, c.principalErr = o.PrincipalFromV2(r)
			} else {
				c.principal, c.principalErr = PrincipalV2(r.RequestContext.Authorizer)
			}
			c.setBody(r.Body, r.IsBase64Encoded)
			return c
		},
		status: func(r events.APIGatewayV2HTTPResponse) int { return r.StatusCode },
		header: func(r *events.APIGatewayV2HTTPResponse) *map[string]string { return &r.Headers },
		recorded: func(r events.APIGatewayV2HTTPResponse, keep func(string) bool, withBody bool) events.APIGatewayV2HTTPResponse {
			r.Cookies = nil // Set-Cookie, by another name
			r.Headers, r.MultiValueHeaders = keptHeaders(r.Headers, keep, withBody), keptHeaders(r.MultiValueHeaders, keep, withBody)
			if !withBody {
				r.Body, r.IsBase64Encoded = "", false
				setHeader(&r.Headers, BodyOmittedHeader, "omitted")
			}
			return r
		},
		respond: func(status int, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: headers, Body: body}
		},
	}, optFns)
}

// MakeIdempotentV1 wraps the handler of a REST API (a Lambda proxy
// integration, or an HTTP API's payload format 1.0): see the package
// documentation. The key is looked for in the multi-value headers too, and
// two values are a malformed key.
func MakeIdempotentV1(store idempotency.Store, fn v1Handler, optFns ...func(*Options)) v1Handler {
	return wrap(store, fn, flavor[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
		call: func(o *Options, r events.APIGatewayProxyRequest) *call[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse] {
			c := &call[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
				Method: []byte(r.HTTPMethod), Path: []byte(r.Path), Query: []byte(queryOf(r.MultiValueQueryStringParameters, r.QueryStringParameters)),
				Stage: []byte(r.RequestContext.Stage), req: r, keys: headerValues(r.Headers, r.MultiValueHeaders),
			}
			if o.PrincipalFromV1 != nil {
				c.principal, c.principalErr = o.PrincipalFromV1(r)
			} else {
				c.principal, c.principalErr = PrincipalV1(r.RequestContext)
			}
			c.setBody(r.Body, r.IsBase64Encoded)
			return c
		},
		status: func(r events.APIGatewayProxyResponse) int { return r.StatusCode },
		header: func(r *events.APIGatewayProxyResponse) *map[string]string { return &r.Headers },
		recorded: func(r events.APIGatewayProxyResponse, keep func(string) bool, withBody bool) events.APIGatewayProxyResponse {
			r.Headers, r.MultiValueHeaders = keptHeaders(r.Headers, keep, withBody), keptHeaders(r.MultiValueHeaders, keep, withBody)
			if !withBody {
				r.Body, r.IsBase64Encoded = "", false
				setHeader(&r.Headers, BodyOmittedHeader, "omitted")
			}
			return r
		},
		respond: func(status int, headers map[string]string, body string) events.APIGatewayProxyResponse {
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: headers, Body: body}
		},
	}, optFns)
}

// flavor is what differs between the REST and the HTTP API events.
type flavor[Req, Resp any] struct {
	call   func(*Options, Req) *call[Req, Resp]
	status func(Resp) int
	header func(*Resp) *map[string]string
	// recorded is the response as it is recorded: with only the headers
	// keep keeps, and without its body unless withBody.
	recorded func(r Resp, keep func(name string) bool, withBody bool) Resp
	respond  func(status int, headers map[string]string, body string) Resp
}

// call is the request as idempotency.MakeIdempotent sees it: its exported
// fields are what a retry must repeat (their JSON, with a JSON body
// canonical), the rest rides along.
type call[Req, Resp any] struct {
	// Method, Path, Query and Stage are bytes, base64 in JSON, which
	// MakeIdempotent never reads as embedded JSON: only the body is JSON,
	// a query string that reads as JSON counts as written.
	Method []byte `json:"method"`
	Path   []byte `json:"path"`
	Query  []byte `json:"query"`
	Stage  []byte `json:"stage"`
	// Body is the body as text, when it is valid UTF-8; BodyBytes holds
	// any other, since JSON would turn its invalid bytes into U+FFFD and
	// two bodies into one.
	Body      string `json:"body"`
	BodyBytes []byte `json:"bodyBytes"`

	req          Req
	keys         []string
	principal    string
	principalErr error
	// answer is the handler's response as it went to the caller, in full
	// (what is recorded may not be).
	answer *Resp
}

var fingerprintPaths = []string{"method", "path", "query", "stage", "body", "bodyBytes"}

// setBody decodes a base64 body. One that does not decode (API Gateway
// never sends one) counts as its bytes undecoded, in BodyBytes, where no
// decoded body of the same text can be: a valid UTF-8 body is always in
// Body.
func (c *call[Req, Resp]) setBody(body string, isBase64 bool) {
	b := []byte(body)
	if isBase64 {
		d, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			c.BodyBytes = b
			return
		}
		b = d
	}
	if utf8.Valid(b) {
		c.Body = string(b)
	} else {
		c.BodyBytes = b
	}
}

// Errors the wrapped handler returns to the wrapper, which never reach the
// caller.
type (
	// handlerError is the handler's own error, kept apart from the
	// idempotency errors it might wrap itself.
	handlerError struct{ err error }
	// unrecorded is a response not to record: the claim is released.
	unrecorded struct{}
	// keyError is a key or a principal the wrapper refuses.
	keyError struct {
		status      int
		typ, detail string
	}
)

func (e *handlerError) Error() string { return e.err.Error() }
func (*unrecorded) Error() string     { return "apigateway: response not recorded" }
func (e *keyError) Error() string     { return "apigateway: " + e.detail }

var (
	errKeyMalformed = &keyError{http.StatusBadRequest, TypeKeyMalformed,
		"The Idempotency-Key header must be one value of 1 to 255 visible ASCII characters other than a comma, bare or in double quotes (with no double quote or backslash inside)."}
	errPrincipalRequired = &keyError{http.StatusUnauthorized, TypePrincipalRequired,
		"This operation scopes its Idempotency-Key by the caller, and the request names none."}
	errAnonymousJWT = &keyError{http.StatusUnauthorized, TypePrincipalRequired,
		"This operation scopes its Idempotency-Key by the caller, and the request's token names no subject (sub) and no client (client_id or azp)."}
)

func wrap[Req, Resp any](store idempotency.Store, fn func(context.Context, Req) (Resp, error), f flavor[Req, Resp], optFns []func(*Options)) func(context.Context, Req) (Resp, error) {
	o := Options{RequirePrincipal: true, Record: DefaultRecord, MaxRecordedBytes: DefaultMaxRecordedBytes, DocsURL: DefaultDocsURL,
		Scope: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), Logger: slog.Default(), Now: time.Now}
	for _, fn := range optFns {
		fn(&o)
	}
	record := func(status int) bool { return status >= 200 && status < 500 && o.Record(status) }
	keep := func(name string) bool {
		return !strings.EqualFold(name, "Set-Cookie") && !slices.ContainsFunc(o.PerCallerHeaders, func(h string) bool { return strings.EqualFold(h, name) })
	}
	keepNone := func(string) bool { return false }

	idem := idempotency.MakeIdempotent(store, func(ctx context.Context, c *call[Req, Resp]) (Resp, error) {
		resp, err := fn(ctx, c.req)
		c.answer = &resp
		if err != nil {
			return resp, &handlerError{err}
		}
		if !record(f.status(resp)) {
			return resp, &unrecorded{}
		}
		// Checked here, not left to the store: a store refuses a large
		// record after the handler ran, and would on every retry.
		rec := f.recorded(resp, keep, true)
		if size := recordedSize(rec); size > o.MaxRecordedBytes {
			o.Logger.WarnContext(ctx, "apigateway: response too large to record; recording it without its body", "bytes", size, "max", o.MaxRecordedBytes)
			if rec = f.recorded(resp, keep, false); recordedSize(rec) > o.MaxRecordedBytes {
				rec = f.recorded(resp, keepNone, false)
			}
		}
		return rec, nil
	}, func(h *idempotency.HandlerOptions[*call[Req, Resp], Resp]) {
		h.Key = func(ctx context.Context, c *call[Req, Resp]) (string, error) {
			switch {
			case errors.Is(c.principalErr, ErrAnonymousJWT):
				return "", errAnonymousJWT
			case c.principalErr != nil:
				o.Logger.InfoContext(ctx, "apigateway: no principal", "error", c.principalErr)
				return "", errPrincipalRequired
			case c.principal == "" && o.RequirePrincipal:
				return "", errPrincipalRequired
			}
			key, err := parseKey(c.keys)
			if err != nil || key == "" {
				return "", err
			}
			return scopedKey(c.principal, key), nil
		}
		h.FingerprintPaths = fingerprintPaths
		h.OnReplay = func(_ context.Context, resp Resp, _ idempotency.Record) Resp {
			setHeader(f.header(&resp), ReplayHeader, "true")
			return resp
		}
		h.OptionalKey, h.AfterTimeout = o.OptionalKey, o.AfterTimeout
		h.Scope, h.UseLocalCache, h.LocalCacheMaxItems, h.Logger, h.Now = o.Scope, o.UseLocalCache, o.LocalCacheMaxItems, o.Logger, o.Now
	})

	return func(ctx context.Context, req Req) (Resp, error) {
		c := f.call(&o, req)
		resp, err := idem(ctx, c)
		if c.answer != nil {
			// The caller gets what the handler answered, whatever was
			// recorded of it.
			resp = *c.answer
		}
		var (
			he         *handlerError
			ke         *keyError
			inProgress *idempotency.InProgressError
		)
		switch {
		case err == nil:
			return resp, nil
		// The handler's own outcomes first: its error may wrap an
		// idempotency error of its own making.
		case errors.As(err, &he):
			return resp, he.err
		case errors.As(err, new(*unrecorded)):
			return resp, nil
		case errors.As(err, &ke):
			return problem(&o, f, ke.status, ke.typ, "Idempotency-Key is not usable", ke.detail, nil), nil
		case errors.Is(err, idempotency.ErrMissingKey):
			return problem(&o, f, http.StatusBadRequest, TypeKeyMissing, "Idempotency-Key is missing",
				"This operation is idempotent and requires an Idempotency-Key header.", nil), nil
		case errors.As(err, &inProgress):
			retryAfter := strconv.Itoa(inProgress.RetryAfterSeconds())
			return problem(&o, f, http.StatusConflict, TypeKeyInProgress, "A request with this Idempotency-Key is in progress",
				"A request with the same Idempotency-Key is being processed; retry after "+retryAfter+" s.",
				map[string]string{"Retry-After": retryAfter}), nil
		case errors.Is(err, idempotency.ErrTimedOut):
			return problem(&o, f, http.StatusConflict, TypeKeyTimedOut, "A request with this Idempotency-Key timed out",
				"The first request with this Idempotency-Key ran out of time, and whether it took effect is not known; "+
					"the key stays refused until the operator has checked and released it, or it expires.", nil), nil
		case errors.Is(err, idempotency.ErrKeyReused):
			return problem(&o, f, http.StatusUnprocessableEntity, TypeKeyReused, "Idempotency-Key is already used",
				"This Idempotency-Key was used with another request (method, path, query or body); a key must not be reused across requests.", nil), nil
		}
		return resp, err
	}
}

// recordedSize is the size of r's JSON, as MakeIdempotent records it. An
// events response always encodes.
func recordedSize(r any) int {
	b, _ := json.Marshal(r)
	return len(b)
}

// keptHeaders is h with only the headers keep keeps, and without those
// that describe a body when there is none.
func keptHeaders[V any](h map[string]V, keep func(string) bool, withBody bool) map[string]V {
	if h == nil {
		return nil
	}
	out := make(map[string]V, len(h))
	for k, v := range h {
		if keep(k) && (withBody || !slices.ContainsFunc(bodyHeaders, func(b string) bool { return strings.EqualFold(b, k) })) {
			out[k] = v
		}
	}
	return out
}

// bodyHeaders describe a body, and go with it.
var bodyHeaders = []string{"Content-Type", "Content-Length", "Content-Encoding"}

// problem is an RFC 9457 problem response, with a Link to its type's
// documentation.
func problem[Req, Resp any](o *Options, f flavor[Req, Resp], status int, typ, title, detail string, headers map[string]string) Resp {
	uri := o.DocsURL + "#" + typ
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{uri, title, status, detail}) // strings and a number
	if headers == nil {
		headers = map[string]string{}
	}
	headers["Content-Type"] = "application/problem+json"
	headers["Link"] = "<" + uri + `>; rel="describedby"; type="text/html"`
	return f.respond(status, headers, string(body))
}

// setHeader sets name in *h, replacing the value under any case of name.
func setHeader(h *map[string]string, name, value string) {
	if *h == nil {
		*h = map[string]string{}
	}
	for k := range *h {
		if strings.EqualFold(k, name) {
			delete(*h, k)
		}
	}
	(*h)[name] = value
}

// headerValues are the values of the Idempotency-Key header, under its
// name in any case: a multi-value header's values where it has them
// (a REST API's), else the single ones.
func headerValues(single map[string]string, multi map[string][]string) []string {
	var vs []string
	found := false
	for k, v := range multi {
		if strings.EqualFold(k, Header) {
			vs, found = append(vs, v...), true
		}
	}
	if found {
		return vs
	}
	for k, v := range single {
		if strings.EqualFold(k, Header) {
			vs = append(vs, v)
		}
	}
	return vs
}

// parseKey is the key the header values carry: "" when there is none, an
// error for two, or one that breaks package keyheader's rule (1 to
// MaxKeyLen characters here).
func parseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", errKeyMalformed
	}
	k, err := keyheader.Parse(values[0], 1)
	switch {
	case errors.Is(err, keyheader.ErrMissing):
		return "", nil
	case err != nil:
		return "", errKeyMalformed
	}
	return k, nil
}

// scopedKey is the key within the principal's keys: the principal's length
// first, so that no (principal, key) pair shifts into another, and no
// principal's keys are those of the callers without one.
func scopedKey(principal, key string) string {
	return strconv.Itoa(len(principal)) + ":" + principal + ":" + key
}

// sortedQuery is a raw query string with its parameters sorted by their
// decoded name, as they were encoded, each name's in their order: a
// handler may read the first or the last value. Empty parameters (a&&b)
// are dropped.
func sortedQuery(raw string) string {
	params := slices.DeleteFunc(strings.Split(raw, "&"), func(p string) bool { return p == "" })
	slices.SortStableFunc(params, func(a, b string) int { return strings.Compare(paramName(a), paramName(b)) })
	return strings.Join(params, "&")
}

// paramName is the decoded name of a raw query parameter, or its raw name
// when it does not decode.
func paramName(param string) string {
	name, _, _ := strings.Cut(param, "=")
	if n, err := url.QueryUnescape(name); err == nil {
		return n
	}
	return name
}

// queryOf is a REST API request's query string, its parameters encoded and
// sorted by name, each name's values in their order: from the multi-value
// parameters where there are any, else the single ones.
func queryOf(multi map[string][]string, single map[string]string) string {
	var params []string
	for _, k := range slices.Sorted(maps.Keys(multi)) {
		for _, v := range multi[k] {
			params = append(params, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
	}
	if len(multi) == 0 {
		for _, k := range slices.Sorted(maps.Keys(single)) {
			params = append(params, url.QueryEscape(k)+"="+url.QueryEscape(single[k]))
		}
	}
	return strings.Join(params, "&")
}
