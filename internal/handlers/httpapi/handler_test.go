package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakePresigner signs nothing but is deterministic: the handler's output
// can be compared with golden files. Real presigning is tested against a
// real S3 server in internal/upload.
type fakePresigner struct {
	upload.Presigner // parts are not signed here
	clock            *testenv.Clock
}

func (f fakePresigner) PresignPutObject(_ context.Context, in *upload.PresignInput) (*v4.PresignedHTTPRequest, error) {
	const host = "uploads-test.s3.amazonaws.com" // the test service's bucket
	return &v4.PresignedHTTPRequest{
		URL: fmt.Sprintf("https://%s/%s?X-Amz-Date=%s&X-Amz-Expires=%d&X-Amz-Signature=fake",
			host, in.Key, f.clock.Now().UTC().Format("20060102T150405Z"), int(in.Expires.Seconds())),
		Method: http.MethodPut,
		SignedHeader: http.Header{
			"Host": {host}, "Content-Length": {fmt.Sprint(in.ContentLength)},
			"Content-Type": {in.ContentType}, "X-Amz-Checksum-Sha256": {in.ChecksumSHA256},
		},
	}, nil
}

// counterReader gives distinct, repeatable upload ids.
type counterReader struct{ n byte }

func (c *counterReader) Read(p []byte) (int, error) {
	c.n++
	for i := range p {
		p[i] = c.n
	}
	return len(p), nil
}

// failingStore answers every call with err.
type failingStore struct{ err error }

func (f failingStore) ClaimRecord(context.Context, recordstore.Record) (recordstore.ClaimResult, error) {
	return recordstore.ClaimResult{}, f.err
}
func (f failingStore) GetRecord(context.Context, idempotency.ID) (recordstore.Record, error) {
	return recordstore.Record{}, f.err
}
func (f failingStore) Update(context.Context, idempotency.ID, string, recordstore.Update) (recordstore.Record, error) {
	return recordstore.Record{}, f.err
}
func (f failingStore) Release(context.Context, idempotency.ID, string) error { return f.err }
func (f failingStore) TTL() time.Duration                                    { return idempotency.DefaultTTL }
func (f failingStore) Now() time.Time                                        { return t0 }

type fixture struct {
	handler *Handler
	store   *memorystore.Store
	svc     *upload.Service
	clock   *testenv.Clock
	s3      *s3fake.Client // empty: a test puts what S3 holds
}

func newFixture(t *testing.T, store recordstore.Store) *fixture {
	t.Helper()
	clock := testenv.NewClock(t0)
	mem := memorystore.New(func(o *idempotency.Options) { o.Now = clock.Now })
	if store == nil {
		store = mem
	}
	cfg := upload.Config{Bucket: "uploads-test", Prefix: "uploads/", PresignTTL: 15 * time.Minute,
		MaxUploadBytes: 1 << 20, AllowedContentTypes: []string{"image/*", "application/pdf"}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	objects := &s3fake.Client{}
	svc := upload.New(store, fakePresigner{clock: clock}, objects, cfg, func(o *upload.Options) {
		o.Random, o.Logger = &counterReader{}, logger
	})
	return &fixture{handler: &Handler{Service: svc, Logger: logger}, store: mem, svc: svc, clock: clock, s3: objects}
}

const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

var photo = `{"filename":"photo & co.jpg","contentType":"image/jpeg","size":48213,"sha256":"` + digest + `"}`

func post(key, body string) events.APIGatewayV2HTTPRequest {
	req := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /uploads", RawPath: "/uploads", Body: body,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/uploads"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-1"}},
			},
		},
	}
	if key != "" {
		req.Headers["idempotency-key"] = key
	}
	return req
}

func get(uploadID, sub string) events.APIGatewayV2HTTPRequest {
	req := post("", "")
	req.RouteKey, req.RawPath, req.Body = "GET /uploads/{uploadId}", "/uploads/"+uploadID, ""
	req.RequestContext.HTTP.Method = "GET"
	req.PathParameters = map[string]string{"uploadId": uploadID}
	req.RequestContext.Authorizer.JWT.Claims["sub"] = sub
	return req
}

const key = "3f0c9d1e-6b0a-4c43-9a55-1b9f1f1e2a77"

func (f *fixture) do(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := f.handler.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned an error: %v", err)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if !json.Valid([]byte(resp.Body)) {
		t.Errorf("body is not JSON: %s", resp.Body)
	}
	return resp
}

// golden compares body with testdata/name.json semantically (as JSON values).
func golden(t *testing.T, name, body string) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if *update {
		var pretty strings.Builder
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(&pretty)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		if err := os.WriteFile(path, []byte(pretty.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run go test -update)", err)
	}
	var got, exp any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body: %v", err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("body differs from %s:\n got %s\nwant %s", path, body, want)
	}
}

func wantStatus(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if code == "" {
		return
	}
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(resp.Body), &e); err != nil || e.Error != code || e.Message == "" {
		t.Fatalf("body = %s, want error %q with a message", resp.Body, code)
	}
}

func TestCreateFirstReplayAndFinalized(t *testing.T) {
	f := newFixture(t, nil)
	first := f.do(t, post(key, photo))
	wantStatus(t, first, 201, "")
	golden(t, "create-201", first.Body)
	var created api.Upload
	_ = json.Unmarshal([]byte(first.Body), &created)
	if loc := first.Headers["Location"]; loc != "/uploads/"+created.UploadID {
		t.Errorf("Location = %q, want /uploads/%s", loc, created.UploadID)
	}
	if _, ok := first.Headers["Idempotent-Replay"]; ok {
		t.Error("first answer says Idempotent-Replay")
	}

	// Same request, other whitespace and key order: a byte-identical replay.
	f.clock.Advance(time.Minute)
	same := `{ "sha256": "` + strings.ToUpper(digest) + `", "size": 48213, "contentType": "image/jpeg", "filename": "photo & co.jpg" }`
	replay := f.do(t, post(key, same))
	wantStatus(t, replay, 201, "")
	if replay.Body != first.Body || replay.Headers["Idempotent-Replay"] != "true" || replay.Headers["Location"] != first.Headers["Location"] {
		t.Fatalf("replay = %+v\nwant the first body with Idempotent-Replay: true", replay)
	}

	// Once the URL expired, a replay gets the same upload with a fresh URL.
	f.clock.Advance(15 * time.Minute)
	resigned := f.do(t, post(key, photo))
	wantStatus(t, resigned, 201, "")
	golden(t, "create-201-resigned", resigned.Body)
	if resigned.Headers["Idempotent-Replay"] != "true" {
		t.Error("re-signed replay lacks Idempotent-Replay")
	}

	// After finalize, the replay is the completed response.
	f.finalizedAt(t, created, f.clock.Now().Add(-time.Second))
	done := f.do(t, post(key, photo))
	wantStatus(t, done, 201, "")
	golden(t, "create-201-completed", done.Body)
	if done.Headers["Idempotent-Replay"] != "true" {
		t.Error("completed replay lacks Idempotent-Replay")
	}
	if again := f.do(t, post(key, photo)); again.Body != done.Body {
		t.Errorf("completed replays differ:\n%s\n%s", done.Body, again.Body)
	}
	status := f.do(t, get(created.UploadID, "user-1"))
	wantStatus(t, status, 200, "")
	if status.Body != done.Body {
		t.Errorf("status body %s differs from the completed replay %s", status.Body, done.Body)
	}

	// Another body with the same key is refused, never answered with the first.
	other := f.do(t, post(key, strings.Replace(photo, "48213", "48214", 1)))
	wantStatus(t, other, 422, "idempotency_key_reuse")
	golden(t, "error-422", other.Body)
	if f.store.Len() != 1 {
		t.Errorf("store holds %d records, want 1", f.store.Len())
	}
}

func TestErrorRows(t *testing.T) {
	big := `{"filename":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`
	noPrincipal := post(key, photo)
	noPrincipal.RequestContext.Authorizer = nil
	b64 := post(key, base64.StdEncoding.EncodeToString([]byte("{not json")))
	b64.IsBase64Encoded = true
	cases := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		code   string
	}{
		{"key missing", post("", photo), 400, "idempotency_key_required"},
		{"key empty", post("   ", photo), 400, "idempotency_key_required"},
		{"key short", post("too-short", photo), 400, "idempotency_key_invalid"},
		{"key with space", post("has a space in it!", photo), 400, "idempotency_key_invalid"},
		{"key non-ascii", post("clé-idempotente-0001", photo), 400, "idempotency_key_invalid"},
		{"body not json", post(key, "{"), 400, "invalid_request"},
		{"base64 body not json", b64, 400, "invalid_request"},
		{"sha256 short", post(key, strings.Replace(photo, digest, "abc", 1)), 400, "invalid_request"},
		{"sha256 missing without partSize", post(key, strings.Replace(photo, `,"sha256":"`+digest+`"`, "", 1)), 400, "invalid_request"},
		{"size zero", post(key, strings.Replace(photo, "48213", "0", 1)), 400, "invalid_request"},
		{"filename traversal", post(key, strings.Replace(photo, "photo & co.jpg", "../x.jpg", 1)), 400, "invalid_request"},
		{"body too large", post(key, big), 413, "request_too_large"},
		{"file too large", post(key, strings.Replace(photo, "48213", "1048577", 1)), 413, "file_too_large"},
		{"media type", post(key, strings.Replace(photo, "image/jpeg", "text/html", 1)), 415, "unsupported_media_type"},
		{"no principal", noPrincipal, 401, "unauthenticated"},
		{"unknown route", func() events.APIGatewayV2HTTPRequest {
			r := post(key, photo)
			r.RouteKey, r.RawPath = "DELETE /uploads", "/elsewhere"
			r.RequestContext.HTTP.Method = "DELETE"
			return r
		}(), 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			resp := f.do(t, tc.req)
			wantStatus(t, resp, tc.status, tc.code)
			golden(t, "error-"+strings.ReplaceAll(tc.name, " ", "-"), resp.Body)
			if f.store.Len() != 0 {
				t.Errorf("a refused request stored %d records", f.store.Len())
			}
		})
	}
}

func TestInvalidRequestNamesTheField(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do(t, post(key, strings.Replace(photo, digest, "xyz", 1)))
	wantStatus(t, resp, 400, "invalid_request")
	if !strings.Contains(resp.Body, "sha256") {
		t.Errorf("message does not name the field: %s", resp.Body)
	}
}

func TestAnonymous(t *testing.T) {
	f := newFixture(t, nil)
	f.handler.AllowAnonymous = true
	req := post(key, photo)
	req.RequestContext.Authorizer = nil
	wantStatus(t, f.do(t, req), 201, "")
	// The anonymous tenant's key is not user-1's key.
	wantStatus(t, f.do(t, post(key, strings.Replace(photo, "48213", "7", 1))), 201, "")
}

func TestOtherPrincipalKinds(t *testing.T) {
	f := newFixture(t, nil)
	iam := post(key, photo)
	iam.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/alice"},
	}
	lambdaAuth := post(key, photo)
	lambdaAuth.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		Lambda: map[string]any{"principalId": "tenant-42"},
	}
	a, b := f.do(t, iam), f.do(t, lambdaAuth)
	wantStatus(t, a, 201, "")
	wantStatus(t, b, 201, "")
	if a.Headers["Location"] == b.Headers["Location"] || b.Headers["Idempotent-Replay"] != "" {
		t.Error("two principals shared one key")
	}
}

// A JWT is never anonymous: one that names neither a subject nor a client
// is refused, even where anonymous use is allowed, and records nothing.
func TestTokenThatNamesNoOneIsRefused(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		f := newFixture(t, nil)
		f.handler.AllowAnonymous = anonymous
		req := post(key, photo)
		req.RequestContext.Authorizer.JWT.Claims = map[string]string{"iss": "https://idp.example", "scope": "uploads"}
		resp := f.do(t, req)
		wantStatus(t, resp, 401, "unauthenticated")
		golden(t, "error-token-names-no-one", resp.Body)
		if f.store.Len() != 0 {
			t.Errorf("AllowAnonymous %v: a refused request stored %d records", anonymous, f.store.Len())
		}
	}
}

// Tenants that shared a name before issue 47 are apart: machine clients
// (a JWT with client_id or azp and no sub), and the users of one Cognito
// identity pool, who all call with its role's ARN.
func TestClientsAndIdentityPoolUsersAreTenants(t *testing.T) {
	f := newFixture(t, nil)
	f.handler.AllowAnonymous = true
	client := func(claim, id string) events.APIGatewayV2HTTPRequest {
		req := post(key, photo)
		req.RequestContext.Authorizer.JWT.Claims = map[string]string{"iss": "https://idp.example", claim: id}
		return req
	}
	viaPool := func(identity string) events.APIGatewayV2HTTPRequest {
		req := post(key, photo)
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:sts::123456789012:assumed-role/pool-auth/CognitoIdentityCredentials",
				CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityPoolID: "eu-west-1:pool", IdentityID: identity}},
		}
		return req
	}
	anonymous := post(key, photo)
	anonymous.RequestContext.Authorizer = nil
	subject := post(key, photo)
	subject.RequestContext.Authorizer.JWT.Claims = map[string]string{"iss": "https://idp.example", "sub": "c1"}
	seen := map[string]string{}
	for _, tc := range []struct {
		name string
		req  events.APIGatewayV2HTTPRequest
	}{
		{"anonymous", anonymous}, {"client c1", client("client_id", "c1")}, {"client c2", client("client_id", "c2")},
		{"azp c3", client("azp", "c3")}, {"subject c1", subject}, {"pool user alice", viaPool("eu-west-1:alice")},
		{"pool user mallory", viaPool("eu-west-1:mallory")},
	} {
		resp := f.do(t, tc.req)
		wantStatus(t, resp, 201, "")
		if resp.Headers["Idempotent-Replay"] != "" {
			t.Errorf("%s: a replay of another tenant's upload", tc.name)
		}
		id := resp.Headers["Location"]
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share upload %s", tc.name, other, id)
		}
		seen[id] = tc.name
	}
}

// A claim whose side-effecting work is under way (as the multipart path
// will hold one) answers 409 with the lease's remaining time.
func TestInProgress(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	wantStatus(t, f.do(t, post(key, photo)), 201, "")
	id := idempotency.NewID(apigateway.JWTPrincipal("", "user-1"), key)
	rec, err := f.store.GetRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Once that record expires, an in-progress claim with the same
	// fingerprint takes the key.
	f.clock.Advance(25 * time.Hour)
	if _, err := f.store.ClaimRecord(ctx, recordstore.Record{Record: idempotency.Record{ID: id, Tenant: "user-1", ClaimID: "c2", Fingerprint: rec.Fingerprint, State: idempotency.StateInProgress}}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(4 * time.Second)
	busy := f.do(t, post(key, photo))
	wantStatus(t, busy, 409, "idempotency_in_progress")
	golden(t, "error-409", busy.Body)
	if busy.Headers["Retry-After"] != "26" {
		t.Errorf("Retry-After = %q, want 26 (the lease's remaining seconds)", busy.Headers["Retry-After"])
	}
}

func TestStoreFailures(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("claim x: %w: %w", idempotency.ErrUnavailable, errors.New("ProvisionedThroughputExceededException: secret table arn:aws:dynamodb:...")), 503, "service_unavailable"},
		{errors.New("operation error DynamoDB: PutItem, ValidationException: secret internals"), 500, "internal_error"},
	}
	for _, tc := range cases {
		f := newFixture(t, failingStore{err: tc.err})
		for _, req := range []events.APIGatewayV2HTTPRequest{post(key, photo), get(strings.Repeat("a", 64), "user-1")} {
			resp := f.do(t, req)
			wantStatus(t, resp, tc.status, tc.code)
			if tc.status == 503 && resp.Headers["Retry-After"] == "" {
				t.Error("503 without Retry-After")
			}
			if strings.Contains(resp.Body, "secret") || strings.Contains(resp.Body, "DynamoDB") {
				t.Errorf("internal text leaked: %s", resp.Body)
			}
			golden(t, fmt.Sprintf("error-%d", tc.status), resp.Body)
		}
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t, nil)
	created := f.do(t, post(key, photo))
	var u api.Upload
	_ = json.Unmarshal([]byte(created.Body), &u)

	own := f.do(t, get(u.UploadID, "user-1"))
	wantStatus(t, own, 200, "")
	if own.Body != created.Body {
		t.Errorf("pending status %s differs from the create body %s", own.Body, created.Body)
	}
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"other tenant": get(u.UploadID, "user-2"),
		"unknown":      get(strings.Repeat("0", 64), "user-1"),
		"malformed":    get("../../etc/passwd", "user-1"),
	} {
		resp := f.do(t, req)
		wantStatus(t, resp, 404, "not_found")
		if name == "unknown" {
			golden(t, "error-404", resp.Body)
		}
	}
	f.clock.Advance(24*time.Hour + time.Second)
	wantStatus(t, f.do(t, get(u.UploadID, "user-1")), 404, "not_found")
}

// Identities from different sources never share a namespace: a JWT whose
// sub is "anonymous" is not the anonymous tenant, and an IAM caller whose
// ARN equals a JWT's sub is not that JWT's tenant, and a JWT's tenant is its
// issuer and subject together, no two pairs alike. Each gets its own
// upload for the same key, none a replay of another's.
func TestTenantsOfDifferentSourcesNeverMeet(t *testing.T) {
	f := newFixture(t, nil)
	f.handler.AllowAnonymous = true
	const arn = "arn:aws:iam::123456789012:user/alice"
	anonymous := post(key, photo)
	anonymous.RequestContext.Authorizer = nil
	jwtAnonymous := post(key, photo)
	jwtAnonymous.RequestContext.Authorizer.JWT.Claims["sub"] = "anonymous"
	jwtARN := post(key, photo)
	jwtARN.RequestContext.Authorizer.JWT.Claims["sub"] = arn
	iam := post(key, photo)
	iam.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn},
	}
	lambdaAuth := post(key, photo)
	lambdaAuth.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"principalId": "anonymous"}}
	// The same sub from two issuers, and two (issuer, sub) pairs whose
	// plain concatenations are the same text.
	withIssuer := func(iss, sub string) events.APIGatewayV2HTTPRequest {
		req := post(key, photo)
		req.RequestContext.Authorizer.JWT.Claims = map[string]string{"iss": iss, "sub": sub}
		return req
	}
	seen := map[string]string{}
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"anonymous": anonymous, "jwt sub anonymous": jwtAnonymous, "jwt sub = an ARN": jwtARN, "iam": iam, "lambda principal anonymous": lambdaAuth,
		"issuer A, alice": withIssuer("https://a.example", "alice"), "issuer B, alice": withIssuer("https://b.example", "alice"),
		"issuer x, y:z": withIssuer("x", "y:z"), "issuer x:y, z": withIssuer("x:y", "z"),
	} {
		resp := f.do(t, req)
		wantStatus(t, resp, 201, "")
		if resp.Headers["Idempotent-Replay"] != "" {
			t.Errorf("%s: a replay of another tenant's upload", name)
		}
		id := resp.Headers["Location"]
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share upload %s", name, other, id)
		}
		seen[id] = name
	}
	if n := f.store.Len(); n != 9 {
		t.Fatalf("%d records, want one per tenant (9)", n)
	}
}

// One line per request, naming its outcome, and never the tenant, the key,
// the filename or a URL.
func TestOneLinePerRequest(t *testing.T) {
	f := newFixture(t, nil)
	var buf bytes.Buffer
	f.handler.Telemetry = &telemetry.Recorder{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Function: "presign"}
	other := strings.Replace(photo, "photo & co.jpg", "other.jpg", 1)
	noKey := post("", photo)
	f.do(t, post(key, photo))
	f.do(t, post(key, photo))
	f.do(t, post(key, other))
	f.do(t, noKey)
	var outcomes []string
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var l struct{ Outcome, Function, Route string }
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		outcomes = append(outcomes, l.Outcome)
		for _, secret := range []string{key, "photo", "user-1", "X-Amz-Signature", "other.jpg"} {
			if bytes.Contains(line, []byte(secret)) {
				t.Errorf("line carries %q: %s", secret, line)
			}
		}
	}
	if want := []string{"created", "replayed", "key_reuse", "invalid"}; !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
}

// Routed by method and path (no RouteKey: a direct invoke, a test), a
// path matches exactly, as API Gateway matches routes: a trailing or
// doubled slash, or an empty id, is no route. The handler once trimmed
// slashes, so that "GET /uploads/{id}/" answered the upload.
func TestRoutingByPathIsExact(t *testing.T) {
	t.Parallel()
	const id = "0123abcd"
	for _, tc := range []struct{ method, path, route, id string }{
		{"POST", "/uploads", routeCreate, ""},
		{"GET", "/uploads/" + id, routeStatus, id},
		{"DELETE", "/uploads/" + id, routeAbort, id},
		{"POST", "/uploads/" + id + "/parts", routeSignParts, id},
		{"GET", "/uploads/" + id + "/parts", routeListParts, id},
		{"POST", "/uploads/" + id + "/complete", routeComplete, id},
		{"POST", "/uploads/", "", ""},
		{"POST", "//uploads", "", ""},
		{"POST", "uploads", "", ""},
		{"POST", "/uploads//", "", ""},
		{"GET", "/uploads/" + id + "/", "", ""},
		{"GET", "/uploads/" + id + "//", "", ""},
		{"GET", "//uploads/" + id, "", ""},
		{"GET", "/uploads//" + id, "", ""},
		{"GET", "/uploads//parts", "", ""},
		{"DELETE", "/uploads/" + id + "/", "", ""},
		{"POST", "/uploads/" + id + "/parts/", "", ""},
		{"GET", "/uploads/" + id + "/parts/", "", ""},
		{"POST", "/uploads/" + id + "/complete/", "", ""},
		{"POST", "/uploads/" + id + "/complete/x", "", ""},
		{"GET", "/elsewhere/" + id, "", ""},
		{"GET", "", "", ""},
		{"GET", "/", "", ""},
	} {
		for _, routeKey := range []string{"", "$default"} {
			req := events.APIGatewayV2HTTPRequest{RouteKey: routeKey, RawPath: tc.path}
			req.RequestContext.HTTP.Method = tc.method
			if route, uploadID := routeOf(req); route != tc.route || uploadID != tc.id {
				t.Errorf("%s %q (route key %q) = %q %q, want %q %q", tc.method, tc.path, routeKey, route, uploadID, tc.route, tc.id)
			}
		}
	}
}

// What a caller sees: the upload's status without the slash, 404 with it.
func TestStatusWithTrailingSlashIsNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.created(t, photo)
	for path, want := range map[string]int{"/uploads/" + u.UploadID: 200, "/uploads/" + u.UploadID + "/": 404} {
		req := get(u.UploadID, "user-1")
		req.RouteKey, req.PathParameters, req.RawPath = "", nil, path
		resp := f.do(t, req)
		if want == 200 {
			wantStatus(t, resp, 200, "")
			continue
		}
		wantStatus(t, resp, 404, "not_found")
		if !strings.Contains(resp.Body, "no such route") {
			t.Errorf("GET %s: %s, want the answer for no route", path, resp.Body)
		}
	}
}
