package faults_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/handlers/finalize"
	"github.com/onceupload/onceupload/internal/handlers/httpapi"
	"github.com/onceupload/onceupload/internal/tooling/faults"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

var (
	dynoxide = testenv.SharedDynoxide()
	versity  = testenv.SharedVersity()
)

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, versity) }

// rig is the presign and finalize handlers on a DynamoDB reached through a
// fault-injecting proxy, and a real S3.
type rig struct {
	proxy    *faults.Proxy
	store    *dynamostore.Store // direct, no faults: to inspect
	presign  *httpapi.Handler
	finalize *finalize.Handler
	s3       *s3.Client
	bucket   string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	endpoint := dynoxide.Endpoint(t)
	proxy, err := faults.Start(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	direct := testenv.DynamoClient(endpoint, nil)
	table := testenv.NewTable(t, direct)
	// The SDK's own retries stay on (four attempts, the DynamoDB client's
	// default), with short waits so the test is quick; faults outlast them.
	viaProxy := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(proxy.URL)
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 4
			so.MaxBackoff = 20 * time.Millisecond
			// No client-side retry quota, so every fault gets its
			// retries and the test is deterministic.
			so.RateLimiter = ratelimit.None
		})
		o.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	})
	s3c := testenv.S3Client(versity.Endpoint(t), nil)
	bucket := testenv.NewBucket(t, s3c)
	presigner := upload.NewPresigner(s3c, bucket)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A short lease, so that a multipart claim a fault left in progress is
	// taken over within the test.
	store := dynamostore.New(viaProxy, table, func(o *idempotency.Options) { o.Lease = time.Second })
	svc := upload.New(store, presigner, s3c,
		upload.Config{Bucket: bucket, Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: api.MaxMultipartBytes},
		func(o *upload.Options) { o.Logger = quiet })
	return &rig{
		proxy: proxy, store: dynamostore.New(direct, table),
		presign: &httpapi.Handler{Service: svc, Logger: quiet}, finalize: &finalize.Handler{Service: svc, Logger: quiet},
		s3: s3c, bucket: bucket,
	}
}

var content = []byte("exactly once, whatever fails")

func body() string {
	sum := sha256.Sum256(content)
	return fmt.Sprintf(`{"filename":"f.txt","contentType":"text/plain","size":%d,"sha256":"%s"}`, len(content), hex.EncodeToString(sum[:]))
}

func (r *rig) post(t *testing.T, key string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := r.presign.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /uploads", Body: body(), Headers: map[string]string{"idempotency-key": key},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "tenant"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var dynamoFaults = []faults.Kind{faults.DropRequest, faults.DropResponse, faults.Throttling, faults.Provisioned, faults.ServerError}

// A claim under DynamoDB faults answers a retryable 503, never a wrong 201
// or a 422, and never leaves the key in a state the client's retry cannot
// get through: after the fault, the retry gets the one upload.
func TestFaultsDuringClaim(t *testing.T) {
	r := newRig(t)
	for _, kind := range dynamoFaults {
		t.Run(kind.String(), func(t *testing.T) {
			key := "claim-fault-" + kind.String() + "-0001"
			r.proxy.SetRule(faults.Always(kind, "PutItem"))
			failed := r.post(t, key)
			r.proxy.SetRule(faults.Always(faults.None))
			if failed.StatusCode != http.StatusServiceUnavailable || failed.Headers["Retry-After"] == "" {
				t.Fatalf("under %s: %d %s, want 503 with Retry-After", kind, failed.StatusCode, failed.Body)
			}
			retried := r.post(t, key)
			again := r.post(t, key)
			if retried.StatusCode != 201 || again.StatusCode != 201 || again.Body != retried.Body {
				t.Fatalf("after %s: retry %d %s, then %d", kind, retried.StatusCode, retried.Body, again.StatusCode)
			}
			rec, err := r.store.GetRecord(context.Background(), idempotency.NewID(apigateway.JWTPrincipal("", "tenant"), key))
			if err != nil || "/uploads/"+rec.ClaimID != retried.Headers["Location"] {
				t.Fatalf("record %+v, %v; answered %s", rec, err, retried.Headers["Location"])
			}
		})
	}
}

// A replay under faults is a 503 too, and afterwards the same body.
func TestFaultsDuringReplay(t *testing.T) {
	r := newRig(t)
	first := r.post(t, "replay-fault-000001")
	if first.StatusCode != 201 {
		t.Fatal(first.Body)
	}
	for _, kind := range dynamoFaults {
		r.proxy.SetRule(faults.Always(kind, "PutItem"))
		failed := r.post(t, "replay-fault-000001")
		r.proxy.SetRule(faults.Always(faults.None))
		if failed.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("replay under %s: %d %s, want 503", kind, failed.StatusCode, failed.Body)
		}
		if after := r.post(t, "replay-fault-000001"); after.Body != first.Body {
			t.Errorf("replay after %s differs: %s", kind, after.Body)
		}
	}
}

// Status under faults is a 503, never a 404 that would make a client give up.
func TestFaultsDuringStatus(t *testing.T) {
	r := newRig(t)
	created := r.post(t, "status-fault-000001")
	var u api.Upload
	_ = json.Unmarshal([]byte(created.Body), &u)
	for _, kind := range dynamoFaults {
		r.proxy.SetRule(faults.Always(kind, "GetItem"))
		resp, _ := r.presign.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
			RouteKey: "GET /uploads/{uploadId}", PathParameters: map[string]string{"uploadId": u.UploadID},
			RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "tenant"}},
			}},
		})
		r.proxy.SetRule(faults.Always(faults.None))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status under %s: %d %s, want 503", kind, resp.StatusCode, resp.Body)
		}
	}
}

// Completion under faults fails the invocation so Lambda re-delivers the
// event (or, when only the answer was lost, the SDK's retry finds the work
// done); once DynamoDB recovers, the record is completed exactly once.
func TestFaultsDuringCompletion(t *testing.T) {
	r := newRig(t)
	for _, kind := range dynamoFaults {
		t.Run(kind.String(), func(t *testing.T) {
			created := r.post(t, "complete-fault-"+kind.String())
			var u api.Upload
			_ = json.Unmarshal([]byte(created.Body), &u)
			if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
				t.Fatalf("PUT: %d %v", code, err)
			}
			ev := events.S3Event{Records: []events.S3EventRecord{{
				EventName: "ObjectCreated:Put", EventTime: time.Now(),
				S3: events.S3Entity{Bucket: events.S3Bucket{Name: r.bucket}, Object: events.S3Object{
					Key: u.StorageKey, URLDecodedKey: u.StorageKey, Size: int64(len(content)), ETag: "etag"}},
			}}}
			r.proxy.SetRule(faults.Always(kind, "UpdateItem"))
			err := r.finalize.Handle(context.Background(), ev)
			r.proxy.SetRule(faults.Always(faults.None))
			rec, _ := r.store.GetRecord(context.Background(), idempotency.NewID(apigateway.JWTPrincipal("", "tenant"), "complete-fault-"+kind.String()))
			switch {
			case err == nil && rec.State != idempotency.StateCompleted:
				t.Fatalf("under %s: success reported but the record is %s", kind, rec.State)
			case err != nil && rec.State != recordstore.StatePending && kind != faults.DropResponse:
				// Only a lost answer may leave work done behind an error.
				t.Fatalf("under %s: error reported but the record is %s", kind, rec.State)
			}
			// Lambda's retry of the event.
			if err := r.finalize.Handle(context.Background(), ev); err != nil {
				t.Fatalf("redelivery after %s: %v", kind, err)
			}
			rec, _ = r.store.GetRecord(context.Background(), rec.ID)
			if rec.State != idempotency.StateCompleted {
				t.Fatalf("after %s and a redelivery: %s", kind, rec.State)
			}
		})
	}
}

// Release under faults reports the store unavailable, and works after.
func TestFaultsDuringRelease(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	client := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(r.proxy.URL)
		o.RetryMaxAttempts = 1
	})
	store := dynamostore.New(client, r.store.TableName())
	id := idempotency.NewID("tenant", "release-fault-0001")
	if _, err := store.ClaimRecord(ctx, recordstore.Record{Record: idempotency.Record{ID: id, Tenant: "tenant", ClaimID: "c", Fingerprint: "f", State: idempotency.StateInProgress}}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []faults.Kind{faults.DropRequest, faults.Throttling, faults.ServerError} {
		r.proxy.SetRule(faults.Always(kind, "DeleteItem"))
		if err := store.Release(ctx, id, "c"); !errors.Is(err, idempotency.ErrUnavailable) {
			t.Errorf("release under %s: %v, want ErrUnavailable", kind, err)
		}
	}
	r.proxy.SetRule(faults.Always(faults.None))
	if err := store.Release(ctx, id, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.GetRecord(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("after release: %v", err)
	}
}

// crashing dies (panics, as a killed function would look to its caller)
// right after its first create did its work.
type crashing struct {
	httpapi.Service
	crashed bool
}

func (c *crashing) Create(ctx context.Context, tenant, key string, req api.CreateRequest) (upload.Result, error) {
	res, err := c.Service.Create(ctx, tenant, key, req)
	if !c.crashed {
		c.crashed = true
		panic("function killed between its claim and its answer")
	}
	return res, err
}

// A function that dies between its claim and its answer: the client's
// retry converges on the one upload the claim recorded.
func TestFunctionDiesAfterClaim(t *testing.T) {
	r := newRig(t)
	h := &httpapi.Handler{Service: &crashing{Service: r.presign.Service}, Logger: r.presign.Logger}
	r.presign = h
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the function did not die")
			}
		}()
		r.post(t, "crash-after-claim-01")
	}()
	retried := r.post(t, "crash-after-claim-01")
	rec, err := r.store.GetRecord(context.Background(), idempotency.NewID(apigateway.JWTPrincipal("", "tenant"), "crash-after-claim-01"))
	if retried.StatusCode != 201 || err != nil || retried.Headers["Location"] != "/uploads/"+rec.ClaimID || retried.Headers["Idempotent-Replay"] != "true" {
		t.Fatalf("retry %d %v %s; record %+v %v", retried.StatusCode, retried.Headers, retried.Body, rec, err)
	}
}

// A multipart create whose answer cannot be recorded (the claim's update
// fails, or succeeds with its answer lost, past the SDK's retries) answers
// 503 and undoes nothing it cannot know the state of; the client's retries
// then get one upload that works end to end: its S3 upload was not aborted
// under a recorded answer.
func TestFaultsDuringMultipartCreate(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	data := make([]byte, 5<<20+7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	body := fmt.Sprintf(`{"filename":"big.bin","contentType":"application/octet-stream","size":%d,"sha256":"%x","partSize":%d}`, len(data), sum, 5<<20)
	call := func(route, uploadID, key, reqBody string) events.APIGatewayV2HTTPResponse {
		resp, err := r.presign.Handle(ctx, events.APIGatewayV2HTTPRequest{
			RouteKey: route, Body: reqBody, Headers: map[string]string{"idempotency-key": key},
			PathParameters: map[string]string{"uploadId": uploadID},
			RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "tenant"}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, kind := range dynamoFaults {
		t.Run(kind.String(), func(t *testing.T) {
			key := "mp-create-fault-" + kind.String()
			r.proxy.SetRule(faults.Always(kind, "UpdateItem"))
			failed := call("POST /uploads", "", key, body)
			r.proxy.SetRule(faults.Always(faults.None))
			if failed.StatusCode != http.StatusServiceUnavailable || failed.Headers["Retry-After"] == "" {
				t.Fatalf("under %s: %d %s, want 503 with Retry-After", kind, failed.StatusCode, failed.Body)
			}
			// The client retries, honouring 409 in progress, until answered.
			var created events.APIGatewayV2HTTPResponse
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				created = call("POST /uploads", "", key, body)
				if created.StatusCode != http.StatusConflict || time.Now().After(deadline) {
					break
				}
			}
			var u api.Upload
			if created.StatusCode != 201 || json.Unmarshal([]byte(created.Body), &u) != nil {
				t.Fatalf("retry after %s: %d %s", kind, created.StatusCode, created.Body)
			}
			parts := [][]byte{data[:5<<20], data[5<<20:]}
			signBody := `{"parts":[`
			for i, p := range parts {
				ps := sha256.Sum256(p)
				if i > 0 {
					signBody += ","
				}
				signBody += fmt.Sprintf(`{"partNumber":%d,"sha256":"%x"}`, i+1, ps)
			}
			signed := call("POST /uploads/{uploadId}/parts", u.UploadID, "", signBody+"]}")
			var sp api.SignedParts
			if signed.StatusCode != 200 || json.Unmarshal([]byte(signed.Body), &sp) != nil {
				t.Fatalf("sign: %d %s", signed.StatusCode, signed.Body)
			}
			for i, p := range sp.Parts {
				req, _ := http.NewRequest(p.Method, p.URL, bytes.NewReader(parts[i]))
				for k, v := range p.Headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("part %d after %s: %v %v (the S3 upload under the recorded answer is gone?)", i+1, kind, resp, err)
				}
				resp.Body.Close()
			}
			done := call("POST /uploads/{uploadId}/complete", u.UploadID, "", "")
			if done.StatusCode != 200 || !strings.Contains(done.Body, `"status":"completed"`) {
				t.Fatalf("complete after %s: %d %s", kind, done.StatusCode, done.Body)
			}
		})
	}
}
