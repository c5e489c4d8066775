package apigateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/redisstore"
	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

var (
	dynoxide = testenv.SharedDynoxide()
	redis    = testenv.SharedRedis()
)

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, redis) }

// testStores are the stores each test runs on: in memory, DynamoDB (on
// dynoxide) and Redis. Each test's records are apart by its Scope.
func testStores(t *testing.T) map[string]idempotency.Store {
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	return map[string]idempotency.Store{
		"memory":   memorystore.New(),
		"dynamodb": dynamostore.New(client, testenv.NewTable(t, client)),
		"redis":    redisstore.New(testenv.RedisClient(t, redis.Endpoint(t))),
	}
}

// req is a request as a client sends it, delivered to either flavor.
type req struct {
	method, path, query string // query: raw, "b=2&a=1"
	headers             map[string]string
	body                string
	base64              bool
	stage               string
	// The caller: a JWT's subject (post's default is alice), else a JWT's
	// claims, else an IAM caller's ARN, through a Cognito identity pool
	// when identity is set; apiKeyID for a REST API.
	sub                 string
	claims              map[string]string
	arn, pool, identity string
	apiKeyID            string
}

const issuer = "https://idp.example"

// resp is either flavor's response.
type resp struct {
	status  int
	headers map[string]string
	body    string
	// cookies are V2's Cookies, V1's multi-value Set-Cookie.
	cookies []string
}

// post is a POST /orders with key in its Idempotency-Key header ("" for
// none) and body.
func post(key, body string) req {
	r := req{method: "POST", path: "/orders/o-1", headers: map[string]string{"content-type": "application/json"}, body: body, sub: "alice"}
	if key != "" {
		r.headers["idempotency-key"] = key
	}
	return r
}

func (r req) with(f func(*req)) req {
	r.headers = maps(r.headers)
	f(&r)
	return r
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// delivery numbers deliveries: API Gateway's request id and time differ
// on each.
var delivery atomic.Int64

func (r req) v2() events.APIGatewayV2HTTPRequest {
	e := events.APIGatewayV2HTTPRequest{RawPath: r.path, RawQueryString: r.query, Headers: r.headers, Body: r.body, IsBase64Encoded: r.base64}
	e.RequestContext.HTTP.Method = r.method
	n := delivery.Add(1)
	e.RequestContext.RequestID, e.RequestContext.TimeEpoch = "req-"+strconv.FormatInt(n, 10), n
	e.RequestContext.Stage = r.stage
	if claims := r.jwtClaims(); claims != nil {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	} else if r.arn != "" {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: r.arn,
				CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityPoolID: r.pool, IdentityID: r.identity}},
		}
	}
	return e
}

func (r req) v1() events.APIGatewayProxyRequest {
	e := events.APIGatewayProxyRequest{HTTPMethod: r.method, Path: r.path, Headers: r.headers, Body: r.body, IsBase64Encoded: r.base64}
	e.MultiValueHeaders = map[string][]string{}
	for k, v := range r.headers {
		e.MultiValueHeaders[k] = []string{v}
	}
	if q, _ := url.ParseQuery(r.query); len(q) > 0 {
		e.MultiValueQueryStringParameters, e.QueryStringParameters = q, map[string]string{}
		for k, v := range q {
			e.QueryStringParameters[k] = v[len(v)-1]
		}
	}
	n := delivery.Add(1)
	e.RequestContext.RequestID, e.RequestContext.RequestTimeEpoch = "req-"+strconv.FormatInt(n, 10), n
	e.RequestContext.Stage = r.stage
	if claims := r.jwtClaims(); claims != nil {
		c := map[string]any{}
		for k, v := range claims {
			c[k] = v
		}
		e.RequestContext.Authorizer = map[string]any{"claims": c}
	} else if r.arn != "" {
		e.RequestContext.Identity.UserArn, e.RequestContext.Identity.CognitoIdentityPoolID, e.RequestContext.Identity.CognitoIdentityID = r.arn, r.pool, r.identity
	}
	e.RequestContext.Identity.APIKeyID = r.apiKeyID
	return e
}

// jwtClaims are the claims of r's JWT, nil for none.
func (r req) jwtClaims() map[string]string {
	switch {
	case r.sub != "":
		return map[string]string{"iss": issuer, "sub": r.sub}
	case r.claims != nil:
		return r.claims
	}
	return nil
}

// outcome is what the handler does on its n-th run: answer status, or
// fail when status is 0.
type outcome func(n int) int

func always(status int) outcome { return func(int) int { return status } }

// server is a wrapped handler of one flavor, counting its runs.
type server struct {
	runs   atomic.Int64
	invoke func(ctx context.Context, r req) (resp, error)
}

var errHandler = errors.New("the handler failed")

// run answers {"run":n} with a header of its own and a session cookie, or
// errHandler.
func (s *server) run(o outcome) (int, map[string]string, string, error) {
	n := int(s.runs.Add(1))
	status := o(n)
	if status == 0 {
		return 0, nil, "", errHandler
	}
	return status, map[string]string{"Content-Type": "application/json", "X-Run": strconv.Itoa(n), "Set-Cookie": "session=" + strconv.Itoa(n)},
		`{"run":` + strconv.Itoa(n) + `}`, nil
}

type flavor struct {
	name string
	make func(store idempotency.Store, o outcome, optFns ...func(*apigateway.Options)) *server
}

var flavors = []flavor{
	{"V2", func(store idempotency.Store, o outcome, optFns ...func(*apigateway.Options)) *server {
		s := &server{}
		h := apigateway.MakeIdempotentV2(store, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			status, headers, body, err := s.run(o)
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: headers, Body: body, Cookies: []string{headers["Set-Cookie"]}}, err
		}, optFns...)
		s.invoke = func(ctx context.Context, r req) (resp, error) {
			out, err := h(ctx, r.v2())
			return resp{out.StatusCode, out.Headers, out.Body, out.Cookies}, err
		}
		return s
	}},
	{"V1", func(store idempotency.Store, o outcome, optFns ...func(*apigateway.Options)) *server {
		s := &server{}
		h := apigateway.MakeIdempotentV1(store, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			status, headers, body, err := s.run(o)
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: headers, Body: body,
				MultiValueHeaders: map[string][]string{"Set-Cookie": {headers["Set-Cookie"]}}}, err
		}, optFns...)
		s.invoke = func(ctx context.Context, r req) (resp, error) {
			out, err := h(ctx, r.v1())
			return resp{out.StatusCode, out.Headers, out.Body, out.MultiValueHeaders["Set-Cookie"]}, err
		}
		return s
	}},
}

// step is one request and what its client sees.
type step struct {
	req req
	// status is the answer's; 0 for the handler's error.
	status int
	// run is the handler run whose answer this is ("X-Run"), 0 for none;
	// a replay repeats an earlier run's.
	run int
	// replay says the answer is marked Idempotent-Replay: true.
	replay bool
	// problem is the answer's problem type name, "" for none.
	problem string
}

const (
	body      = `{"sku":"a-1","qty":2}`
	reordered = "{ \"qty\": 2,\n \"sku\": \"a-1\" }"
)

// viaIdentityPool is a caller through a Cognito identity pool: its role's
// ARN is every user's.
func viaIdentityPool(identity string) func(*req) {
	return func(r *req) {
		r.sub, r.arn, r.pool, r.identity = "", "arn:aws:sts::1:assumed-role/pool-auth/CognitoIdentityCredentials", "eu-west-1:pool", identity
	}
}

// jwt is a caller whose JWT has claim and no sub.
func jwt(claim, value string) func(*req) {
	return func(r *req) { r.sub, r.claims = "", map[string]string{"iss": issuer, claim: value} }
}

// tenantOf is a principal function's answer: a tenant named by stage, for
// the test, or none, or an error.
func tenantOf(stage string) (string, error) {
	if stage == "refused" {
		return "", errors.New("the authorizer's context names no tenant")
	}
	if stage == "" {
		return "", nil
	}
	return "tenant:" + stage, nil
}

// apiKey is a REST API caller known by its API key only.
func apiKey(id string) func(*req) { return func(r *req) { r.sub, r.apiKeyID = "", id } }

var behaviours = []struct {
	name    string
	only    string // the one flavor it applies to; "" for both
	outcome outcome
	opts    func(*apigateway.Options)
	steps   []step
}{
	{name: "a retry is answered from the record, whatever its request id and time", outcome: always(201), steps: []step{
		{req: post("key-1", body), status: 201, run: 1},
		{req: post("key-1", body), status: 201, run: 1, replay: true},
		{req: post("key-1", reordered), status: 201, run: 1, replay: true},
	}},
	{name: "the header's name in any case, the key bare or as a structured-field string", outcome: always(201), steps: []step{
		{req: post("", body).with(func(r *req) { r.headers["Idempotency-Key"] = "key-1" }), status: 201, run: 1},
		{req: post("", body).with(func(r *req) { r.headers["IDEMPOTENCY-KEY"] = `"key-1"` }), status: 201, run: 1, replay: true},
		{req: post(` "key-1"	`, body), status: 201, run: 1, replay: true},
		{req: post("k", body), status: 201, run: 2},
	}},
	{name: "a missing key is a 400 problem", outcome: always(201), steps: []step{
		{req: post("", body), status: 400, problem: apigateway.TypeKeyMissing},
		{req: post("  ", body), status: 400, problem: apigateway.TypeKeyMissing},
	}},
	{name: "a malformed key is a 400 problem", outcome: always(201), steps: []step{
		{req: post("key-1,key-2", body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post("key 1", body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post("ключ", body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post(`"key-1`, body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post(`""`, body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post(`"key\"1"`, body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post(strings.Repeat("k", 256), body), status: 400, problem: apigateway.TypeKeyMalformed},
		{req: post(strings.Repeat("k", 255), body), status: 201, run: 1},
	}},
	{name: "a double quote or backslash in a bare key is part of it, as in the upload API (package keyheader)", outcome: always(201), steps: []step{
		{req: post(`key\1`, body), status: 201, run: 1},
		{req: post(`key"1`, body), status: 201, run: 2},
		{req: post(`key\1`, body), status: 201, run: 1, replay: true},
	}},
	{name: "the key in two headers is a 400 problem", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.headers["Idempotency-Key"] = "key-2" }), status: 400, problem: apigateway.TypeKeyMalformed},
	}},
	{name: "another request under the key is a 422 problem", outcome: always(201), steps: []step{
		{req: post("key-1", body), status: 201, run: 1},
		{req: post("key-1", `{"sku":"a-1","qty":3}`), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.method = "PUT" }), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.path = "/orders/o-2" }), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.query = "dry=1" }), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.headers["x-other"] = "header" }), status: 201, run: 1, replay: true},
	}},
	{name: "the query string counts sorted by name, each name's values in their order", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.query = "b=2&a=1&a=0" }), status: 201, run: 1},
		{req: post("key-1", body).with(func(r *req) { r.query = "a=1&b=2&a=0" }), status: 201, run: 1, replay: true},
		{req: post("key-1", body).with(func(r *req) { r.query = "a=0&b=2&a=2" }), status: 422, problem: apigateway.TypeKeyReused},
	}},
	{name: "repeated query parameters in another order are another request", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.query = "amount=1&amount=1000" }), status: 201, run: 1},
		{req: post("key-1", body).with(func(r *req) { r.query = "amount=1000&amount=1" }), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.query = "amount=1&amount=1000" }), status: 201, run: 1, replay: true},
	}},
	{name: "a query string that reads as JSON counts as written", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.query = `{"a":1,"b":2}` }), status: 201, run: 1},
		{req: post("key-1", body).with(func(r *req) { r.query = `{"b":2,"a":1}` }), status: 422, problem: apigateway.TypeKeyReused},
	}},
	{name: "the stage counts", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.stage = "prod" }), status: 201, run: 1},
		{req: post("key-1", body).with(func(r *req) { r.stage = "test" }), status: 422, problem: apigateway.TypeKeyReused},
		{req: post("key-1", body).with(func(r *req) { r.stage = "prod" }), status: 201, run: 1, replay: true},
	}},
	{name: "a base64 body counts decoded", outcome: always(201), steps: []step{
		{req: post("key-1", body), status: 201, run: 1},
		{req: post("key-1", base64.StdEncoding.EncodeToString([]byte(reordered))).with(func(r *req) { r.base64 = true }), status: 201, run: 1, replay: true},
		{req: post("key-1", base64.StdEncoding.EncodeToString([]byte(`{"sku":"a-2","qty":2}`))).with(func(r *req) { r.base64 = true }), status: 422, problem: apigateway.TypeKeyReused},
	}},
	{name: "a binary body counts as its bytes", outcome: always(201), steps: []step{
		{req: post("key-1", base64.StdEncoding.EncodeToString([]byte{0xff, 0x01})).with(func(r *req) { r.base64 = true }), status: 201, run: 1},
		{req: post("key-1", base64.StdEncoding.EncodeToString([]byte{0xff, 0x01})).with(func(r *req) { r.base64 = true }), status: 201, run: 1, replay: true},
		{req: post("key-1", base64.StdEncoding.EncodeToString([]byte{0xfe, 0x01})).with(func(r *req) { r.base64 = true }), status: 422, problem: apigateway.TypeKeyReused},
	}},
	{name: "each principal has its own keys", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.sub = "alice" }), status: 201, run: 1},
		{req: post("key-1", `{"sku":"b-1","qty":1}`).with(func(r *req) { r.sub = "bob" }), status: 201, run: 2},
		{req: post("key-1", body).with(func(r *req) { r.sub = "carol" }), status: 201, run: 3},
		{req: post("key-1", body).with(func(r *req) { r.sub = "alice" }), status: 201, run: 1, replay: true},
		{req: post("key-1", `{"sku":"b-1","qty":1}`).with(func(r *req) { r.sub = "alice" }), status: 422, problem: apigateway.TypeKeyReused},
	}},
	{name: "callers who share a Cognito identity pool's role are apart", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(viaIdentityPool("eu-west-1:alice")), status: 201, run: 1},
		{req: post("key-1", body).with(viaIdentityPool("eu-west-1:mallory")), status: 201, run: 2},
		{req: post("key-1", body).with(viaIdentityPool("eu-west-1:alice")), status: 201, run: 1, replay: true},
	}},
	{name: "JWTs without a subject are named by their client", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(jwt("client_id", "c1")), status: 201, run: 1},
		{req: post("key-1", body).with(jwt("client_id", "c2")), status: 201, run: 2},
		{req: post("key-1", body).with(jwt("azp", "c3")), status: 201, run: 3},
		{req: post("key-1", body).with(jwt("client_id", "alice")), status: 201, run: 4},
		{req: post("key-1", body).with(func(r *req) { r.sub = "alice" }), status: 201, run: 5},
		{req: post("key-1", body).with(jwt("client_id", "c1")), status: 201, run: 1, replay: true},
	}},
	{name: "a JWT that names no one is a 401 problem", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(jwt("scope", "orders")), status: 401, problem: apigateway.TypePrincipalRequired},
	}},
	{name: "REST API callers are apart by their API key", only: "V1", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(apiKey("k1")), status: 201, run: 1},
		{req: post("key-1", body).with(apiKey("k2")), status: 201, run: 2},
		{req: post("key-1", body).with(apiKey("k1")), status: 201, run: 1, replay: true},
	}},
	{name: "with RequirePrincipal off, callers without a principal share the key", outcome: always(201),
		opts: func(o *apigateway.Options) { o.RequirePrincipal = false }, steps: []step{
			{req: post("key-1", body).with(func(r *req) { r.sub = "" }), status: 201, run: 1},
			{req: post("key-1", body).with(func(r *req) { r.sub = "" }), status: 201, run: 1, replay: true},
			{req: post("key-1", body), status: 201, run: 2},
		}},
	{name: "a request without a principal is a 401 by default", outcome: always(201), steps: []step{
		{req: post("key-1", body).with(func(r *req) { r.sub = "" }), status: 401, problem: apigateway.TypePrincipalRequired},
		{req: post("", body).with(func(r *req) { r.sub = "" }), status: 401, problem: apigateway.TypePrincipalRequired},
		{req: post("key-1", body).with(jwt("scope", "orders")), status: 401, problem: apigateway.TypePrincipalRequired},
		{req: post("key-1", body), status: 201, run: 1},
	}},
	{name: "a principal function names callers an authorizer does not", outcome: always(201),
		opts: func(o *apigateway.Options) {
			// As from a Lambda authorizer's simple response, whose context
			// the test carries in the stage.
			o.PrincipalFromV2 = func(r events.APIGatewayV2HTTPRequest) (string, error) { return tenantOf(r.RequestContext.Stage) }
			o.PrincipalFromV1 = func(r events.APIGatewayProxyRequest) (string, error) { return tenantOf(r.RequestContext.Stage) }
			o.RequirePrincipal = true
		}, steps: []step{
			{req: post("key-1", body).with(func(r *req) { r.sub, r.stage = "", "t1" }), status: 201, run: 1},
			{req: post("key-1", body).with(func(r *req) { r.sub, r.stage = "", "t2" }), status: 201, run: 2},
			{req: post("key-1", body).with(func(r *req) { r.sub, r.stage = "", "t1" }), status: 201, run: 1, replay: true},
			{req: post("key-1", body).with(func(r *req) { r.sub, r.stage = "", "" }), status: 401, problem: apigateway.TypePrincipalRequired},
			{req: post("key-1", body).with(func(r *req) { r.sub, r.stage = "", "refused" }), status: 401, problem: apigateway.TypePrincipalRequired},
		}},
	{name: "a 5xx answer is released, and a retry runs again", outcome: func(n int) int { return map[int]int{1: 503, 2: 500}[n] + map[bool]int{true: 201}[n > 2] }, steps: []step{
		{req: post("key-1", body), status: 503, run: 1},
		{req: post("key-1", body), status: 500, run: 2},
		{req: post("key-1", body), status: 201, run: 3},
		{req: post("key-1", body), status: 201, run: 3, replay: true},
	}},
	{name: "a handler error is released, and a retry runs again", outcome: func(n int) int { return map[bool]int{true: 201}[n > 1] }, steps: []step{
		{req: post("key-1", body), status: 0},
		{req: post("key-1", body), status: 201, run: 2},
		{req: post("key-1", body), status: 201, run: 2, replay: true},
	}},
	{name: "4xx answers are recorded by default", outcome: func(n int) int { return []int{0, 400, 422}[min(n, 2)] }, steps: []step{
		{req: post("key-1", body), status: 400, run: 1},
		{req: post("key-1", body), status: 400, run: 1, replay: true},
		{req: post("key-2", body), status: 422, run: 2},
		{req: post("key-2", body), status: 422, run: 2, replay: true},
	}},
	{name: "401, 403 and 404 are released, as a 5xx is", outcome: func(n int) int { return []int{0, 401, 403, 404, 201}[min(n, 4)] }, steps: []step{
		{req: post("key-1", body), status: 401, run: 1},
		{req: post("key-1", body), status: 403, run: 2},
		{req: post("key-1", body), status: 404, run: 3},
		{req: post("key-1", body), status: 201, run: 4},
		{req: post("key-1", body), status: 201, run: 4, replay: true},
	}},
	{name: "408, 409, 425 and 429 are not recorded by default", outcome: func(n int) int { return []int{0, 408, 409, 425, 429, 200}[min(n, 5)] }, steps: []step{
		{req: post("key-1", body), status: 408, run: 1},
		{req: post("key-1", body), status: 409, run: 2},
		{req: post("key-1", body), status: 425, run: 3},
		{req: post("key-1", body), status: 429, run: 4},
		{req: post("key-1", body), status: 200, run: 5},
		{req: post("key-1", body), status: 200, run: 5, replay: true},
	}},
	{name: "Record chooses the statuses recorded, never a 5xx", outcome: func(n int) int { return []int{0, 400, 502, 202}[min(n, 3)] },
		opts: func(o *apigateway.Options) { o.Record = func(status int) bool { return status != 400 } }, steps: []step{
			{req: post("key-1", body), status: 400, run: 1},
			{req: post("key-1", body), status: 502, run: 2},
			{req: post("key-1", body), status: 202, run: 3},
			{req: post("key-1", body), status: 202, run: 3, replay: true},
		}},
	{name: "OptionalKey runs a request without a key unrecorded", outcome: always(201), opts: func(o *apigateway.Options) { o.OptionalKey = true }, steps: []step{
		{req: post("", body), status: 201, run: 1},
		{req: post("", body), status: 201, run: 2},
		{req: post("key,1", body), status: 400, problem: apigateway.TypeKeyMalformed},
	}},
}

// TestBehaviours runs every behaviour on both flavors over a memorystore.Store.
func TestBehaviours(t *testing.T) {
	runBehaviours(t, func(*testing.T) idempotency.Store { return memorystore.New() })
}

// TestBehavioursOnDynamoDB runs them on the DynamoDB store, on dynoxide.
func TestBehavioursOnDynamoDB(t *testing.T) {
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	table := testenv.NewTable(t, client)
	store := dynamostore.New(client, table)
	// One table for all: each case claims in a scope of its own.
	runBehaviours(t, func(*testing.T) idempotency.Store { return store })
}

// TestBehavioursOnRedis runs them on the Redis store.
func TestBehavioursOnRedis(t *testing.T) {
	store := redisstore.New(testenv.RedisClient(t, redis.Endpoint(t)))
	runBehaviours(t, func(*testing.T) idempotency.Store { return store })
}

func runBehaviours(t *testing.T, newStore func(*testing.T) idempotency.Store) {
	for _, f := range flavors {
		for _, b := range behaviours {
			if b.only != "" && b.only != f.name {
				continue
			}
			t.Run(f.name+"/"+b.name, func(t *testing.T) {
				s := f.make(newStore(t), b.outcome, func(o *apigateway.Options) {
					o.Scope = t.Name()
					o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
					if b.opts != nil {
						b.opts(o)
					}
				})
				for i, st := range b.steps {
					got, err := s.invoke(context.Background(), st.req)
					check(t, i, st, got, err)
				}
			})
		}
	}
}

func check(t *testing.T, i int, st step, got resp, err error) {
	t.Helper()
	if st.status == 0 {
		if !errors.Is(err, errHandler) {
			t.Errorf("step %d: %d, %v; want the handler's error", i, got.status, err)
		}
		return
	}
	if err != nil || got.status != st.status {
		t.Fatalf("step %d: %d %s, %v; want %d", i, got.status, got.body, err, st.status)
	}
	if run := got.headers["X-Run"]; run != strconv.Itoa(st.run) && (run != "" || st.run != 0) {
		t.Errorf("step %d: the answer of run %q, want %d", i, run, st.run)
	}
	if r := got.headers[apigateway.ReplayHeader]; (r == "true") != st.replay || r != "" && r != "true" {
		t.Errorf("step %d: %s = %q, want replay %v", i, apigateway.ReplayHeader, r, st.replay)
	}
	if st.replay && got.body != `{"run":`+strconv.Itoa(st.run)+`}` {
		t.Errorf("step %d: replayed body %q, want run %d's", i, got.body, st.run)
	}
	// A cookie is the caller's: sent once, never recorded.
	if cookie, fresh := got.headers["Set-Cookie"], st.run != 0 && !st.replay; fresh && (cookie != "session="+strconv.Itoa(st.run) || len(got.cookies) != 1) ||
		!fresh && (cookie != "" || len(got.cookies) != 0) {
		t.Errorf("step %d: Set-Cookie %q and cookies %q; want run %d's only on its own answer", i, cookie, got.cookies, st.run)
	}
	if st.problem == "" {
		if ct := got.headers["Content-Type"]; ct != "application/json" {
			t.Errorf("step %d: Content-Type %q, want the handler's", i, ct)
		}
		return
	}
	checkProblem(t, got, st.status, st.problem)
}

// checkProblem checks an RFC 9457 answer with a Link to its type.
func checkProblem(t *testing.T, got resp, status int, name string) {
	t.Helper()
	if ct := got.headers["Content-Type"]; ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if err := json.Unmarshal([]byte(got.body), &p); err != nil {
		t.Fatalf("problem %q: %v", got.body, err)
	}
	wantType := apigateway.DefaultDocsURL + "#" + name
	if p.Type != wantType || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Errorf("problem %+v; want type %s, status %d, a title and a detail", p, wantType, status)
	}
	if link, want := got.headers["Link"], "<"+wantType+`>; rel="describedby"; type="text/html"`; link != want {
		t.Errorf("Link %q, want %q", link, want)
	}
}

// A second request while the first runs is a 409 with Retry-After, the
// first invocation's remaining time; the first is then answered and
// recorded.
func TestInProgress(t *testing.T) {
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	stores := map[string]idempotency.Store{"memory": memorystore.New(), "dynamodb": dynamostore.New(client, testenv.NewTable(t, client))}
	for storeName, store := range stores {
		for _, f := range flavors {
			t.Run(storeName+"/"+f.name, func(t *testing.T) {
				entered, release := make(chan struct{}), make(chan struct{})
				s := f.make(store, func(n int) int {
					if n == 1 {
						entered <- struct{}{}
						<-release
					}
					return 201
				}, func(o *apigateway.Options) { o.Scope = t.Name() })
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var first resp
				done := make(chan error)
				go func() {
					var err error
					first, err = s.invoke(ctx, post("key-1", body))
					done <- err
				}()
				select {
				case <-entered:
				case err := <-done:
					t.Fatalf("the first request ended without running the handler: %d %s, %v", first.status, first.body, err)
				}
				second, err := s.invoke(context.Background(), post("key-1", body))
				close(release)
				if ferr := <-done; ferr != nil || first.status != 201 {
					t.Fatalf("first: %d, %v; want 201", first.status, ferr)
				}
				if err != nil || second.status != 409 {
					t.Fatalf("second: %d %s, %v; want 409", second.status, second.body, err)
				}
				checkProblem(t, second, 409, apigateway.TypeKeyInProgress)
				if ra, err := strconv.Atoi(second.headers["Retry-After"]); err != nil || ra < 19 || ra > 20 {
					t.Errorf("Retry-After %q, want the first invocation's remaining time, 20 s", second.headers["Retry-After"])
				}
				third, _ := s.invoke(context.Background(), post("key-1", body))
				if third.status != 201 || third.headers[apigateway.ReplayHeader] != "true" || s.runs.Load() != 1 {
					t.Errorf("third: %d %v after %d runs; want the first's answer replayed after 1", third.status, third.headers, s.runs.Load())
				}
			})
		}
	}
}

// With AfterTimeout: BlockTimedOut, a retry after a run that timed out
// (cut off at its deadline, its answer never recorded) is a 409 problem of
// its own, without Retry-After, and the handler does not run again.
func TestTimedOut(t *testing.T) {
	clock := storetest.NewClock(time.Now())
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	stores := map[string]idempotency.Store{
		"memory":   memorystore.New(func(o *idempotency.Options) { o.Now = clock.Now }),
		"dynamodb": dynamostore.New(client, testenv.NewTable(t, client), func(o *idempotency.Options) { o.Now = clock.Now }),
		"redis": redisstore.New(testenv.RedisClient(t, redis.Endpoint(t)), func(o *redisstore.Options) {
			o.Now, o.KeyPrefix = clock.Now, t.Name()+":"
		}),
	}
	for storeName, store := range stores {
		for _, f := range flavors {
			t.Run(storeName+"/"+f.name, func(t *testing.T) {
				entered, cutOff := make(chan struct{}), make(chan struct{})
				s := f.make(store, func(n int) int {
					if n == 1 {
						entered <- struct{}{}
						<-cutOff // never answers while the test looks, as a timed-out invocation
					}
					return 201
				}, func(o *apigateway.Options) {
					o.Scope, o.Now, o.AfterTimeout = t.Name(), clock.Now, idempotency.BlockTimedOut
				})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := s.invoke(ctx, post("key-1", body))
					done <- err
				}()
				select {
				case <-entered:
				case err := <-done:
					t.Fatalf("the first request ended without running the handler: %v", err)
				}
				clock.Advance(time.Minute) // past the first invocation's deadline
				retry, err := s.invoke(context.Background(), post("key-1", body))
				close(cutOff)
				<-done
				if err != nil {
					t.Fatal(err)
				}
				checkProblem(t, retry, 409, apigateway.TypeKeyTimedOut)
				if ra, ok := retry.headers["Retry-After"]; ok || s.runs.Load() != 1 {
					t.Errorf("the retry: Retry-After %q, %d runs; want none, and one run", ra, s.runs.Load())
				}
			})
		}
	}
}

// POWERTOOLS_IDEMPOTENCY_DISABLED turns the wrapper off too: even a request
// without a key runs the handler, every time.
func TestDisabled(t *testing.T) {
	t.Setenv(idempotency.DisabledEnv, "true")
	for _, f := range flavors {
		s := f.make(memorystore.New(), always(201), func(o *apigateway.Options) {
			o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		})
		for _, r := range []req{post("key-1", body), post("key-1", body), post("", body)} {
			if got, err := s.invoke(context.Background(), r); err != nil || got.status != 201 || got.headers[apigateway.ReplayHeader] != "" {
				t.Errorf("%s: %d %v, %v; want a fresh 201", f.name, got.status, got.headers, err)
			}
		}
		if n := s.runs.Load(); n != 3 {
			t.Errorf("%s: %d runs, want 3", f.name, n)
		}
	}
}

// refusesLarge is a store that refuses to complete a record whose response
// is larger than max bytes, as DynamoDB refuses an item over 400 KB: a
// failure that the same response meets every time.
type refusesLarge struct {
	idempotency.Store
	max int
}

func (s refusesLarge) Complete(ctx context.Context, id idempotency.ID, claimID string, r idempotency.Response) (idempotency.Record, error) {
	if len(r.Body) > s.max {
		return idempotency.Record{}, errors.New("ValidationException: Item size has exceeded the maximum allowed size")
	}
	return s.Store.Complete(ctx, id, claimID, r)
}

// A response too large to record is answered in full once; a retry gets
// its status and headers without the body, marked, and never a second
// run: by default the wrapper records no response a 400 KB store refuses.
func TestTooLargeToRecord(t *testing.T) {
	large := `{"data":"` + strings.Repeat("x", 500<<10) + `"}`
	for storeName, store := range testStores(t) {
		for _, f := range []struct {
			name   string
			invoke func(scope string, store idempotency.Store, runs *atomic.Int64, r req) (resp, error)
		}{
			{"V2", func(scope string, store idempotency.Store, runs *atomic.Int64, r req) (resp, error) {
				h := apigateway.MakeIdempotentV2(store, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "Location": "/orders/o-1"}, Body: large}, nil
				}, func(o *apigateway.Options) { o.Scope = scope })
				out, err := h(context.Background(), r.v2())
				return resp{out.StatusCode, out.Headers, out.Body, out.Cookies}, err
			}},
			{"V1", func(scope string, store idempotency.Store, runs *atomic.Int64, r req) (resp, error) {
				h := apigateway.MakeIdempotentV1(store, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
					runs.Add(1)
					return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "Location": "/orders/o-1"}, Body: large}, nil
				}, func(o *apigateway.Options) { o.Scope = scope })
				out, err := h(context.Background(), r.v1())
				return resp{out.StatusCode, out.Headers, out.Body, nil}, err
			}},
		} {
			t.Run(storeName+"/"+f.name, func(t *testing.T) {
				st := refusesLarge{store, 400 << 10}
				var runs atomic.Int64
				first, err := f.invoke(t.Name(), st, &runs, post("key-1", body))
				if err != nil || first.status != 201 || first.body != large {
					t.Fatalf("first: %d (%d bytes), %v; want the handler's 201 in full", first.status, len(first.body), err)
				}
				for i := range 2 {
					again, err := f.invoke(t.Name(), st, &runs, post("key-1", body))
					if err != nil || again.status != 201 || again.body != "" || again.headers[apigateway.ReplayHeader] != "true" ||
						again.headers["Idempotent-Replay-Body"] != "omitted" || again.headers["Location"] != "/orders/o-1" || again.headers["Content-Type"] != "" {
						t.Errorf("retry %d: %d %v (%d bytes), %v; want 201, its Location, no body, marked omitted", i, again.status, again.headers, len(again.body), err)
					}
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want once", n)
				}
			})
		}
	}
}

// Headers the deployment names as per-caller go with the first answer
// only, as Set-Cookie does.
func TestPerCallerHeaders(t *testing.T) {
	for storeName, store := range testStores(t) {
		for _, f := range flavors {
			t.Run(storeName+"/"+f.name, func(t *testing.T) {
				s := f.make(store, always(201), func(o *apigateway.Options) {
					o.Scope, o.PerCallerHeaders = t.Name(), []string{"x-run"}
				})
				first, err := s.invoke(context.Background(), post("key-1", body))
				if err != nil || first.headers["X-Run"] != "1" {
					t.Fatalf("first: %d %v, %v; want X-Run: 1", first.status, first.headers, err)
				}
				again, err := s.invoke(context.Background(), post("key-1", body))
				if err != nil || again.headers[apigateway.ReplayHeader] != "true" || again.body != `{"run":1}` {
					t.Fatalf("again: %d %v %s, %v; want the replay of run 1", again.status, again.headers, again.body, err)
				}
				if v, ok := again.headers["X-Run"]; ok || again.headers["Set-Cookie"] != "" || len(again.cookies) != 0 {
					t.Errorf("the replay carries X-Run %q, Set-Cookie %q, cookies %q; want none", v, again.headers["Set-Cookie"], again.cookies)
				}
			})
		}
	}
}
