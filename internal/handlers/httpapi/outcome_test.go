package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

var _ upload.ObjectAPI = (*s3fake.Client)(nil)

// multipartPhoto is photo as a multipart upload: one part.
var multipartPhoto = strings.TrimSuffix(photo, "}") + `,"partSize":5242880}`

const signOnePart = `{"parts":[{"partNumber":1,"sha256":"` + digest + `"}]}`

// onUpload is a request on an upload's route: suffix is "", "/parts" or
// "/complete".
func onUpload(method, suffix, uploadID, body string) events.APIGatewayV2HTTPRequest {
	req := get(uploadID, "user-1")
	req.RouteKey = method + " /uploads/{uploadId}" + suffix
	req.RawPath = "/uploads/" + uploadID + suffix
	req.RequestContext.HTTP.Method = method
	req.Body = body
	return req
}

// created creates an upload with body under key and returns it.
func (f *fixture) created(t *testing.T, body string) api.Upload {
	t.Helper()
	resp := f.do(t, post(key, body))
	wantStatus(t, resp, 201, "")
	var u api.Upload
	if err := json.Unmarshal([]byte(resp.Body), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// finalized records u's object as S3 would announce it.
func (f *fixture) finalized(t *testing.T, u api.Upload) {
	t.Helper()
	f.finalizedAt(t, u, f.clock.Now())
}

// finalizedAt records u's object, announced as stored at at. Finalize asks
// S3 before it records anything, so the object is put in the fixture's S3
// first; it runs on a service of its own over the fixture's store, whose
// clock stands for at.
func (f *fixture) finalizedAt(t *testing.T, u api.Upload, at time.Time) {
	t.Helper()
	head := s3.HeadObjectOutput{ContentLength: aws.Int64(u.Bytes), ETag: aws.String(`"d41d8cd98f00b204e9800998ecf8427e"`)}
	if u.Multipart != nil {
		head.ChecksumSHA256 = aws.String("bm90IGEgcmVhbCBjaGVja3N1bQ==-1")
	}
	f.s3.Put(u.StorageKey, head)
	svc := upload.New(f.store, nil, f.s3, upload.Config{Bucket: "uploads-test", Prefix: "uploads/"},
		func(o *upload.Options) { o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	outcome, err := svc.Finalize(context.Background(), upload.ObjectCreated{
		Bucket: "uploads-test", Key: u.StorageKey, Size: u.Bytes, ETag: "d41d8cd98f00b204e9800998ecf8427e",
		Time: at, Multipart: u.Multipart != nil,
	})
	if err != nil || outcome != upload.OutcomeCompleted {
		t.Fatalf("finalize: %s, %v", outcome, err)
	}
}

// measured serves req with telemetry on and returns the response and the
// outcome of the one line it wrote.
func (f *fixture) measured(t *testing.T, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, string) {
	t.Helper()
	var buf bytes.Buffer
	f.handler.Telemetry = &telemetry.Recorder{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Function: "presign"}
	defer func() { f.handler.Telemetry = nil }()
	resp := f.do(t, req)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("%d telemetry lines, want 1:\n%s", len(lines), buf.Bytes())
	}
	var line struct{ Outcome string }
	if err := json.Unmarshal(lines[0], &line); err != nil {
		t.Fatalf("line %s: %v", lines[0], err)
	}
	return resp, line.Outcome
}

// Every answer the handler maps, error or not: its status, its error code,
// Retry-After exactly where the contract has it, and the outcome its
// telemetry line reports.
func TestOutcomes(t *testing.T) {
	unavailable := fmt.Errorf("claim x: %w: %w", idempotency.ErrUnavailable, errors.New("throttled"))
	cases := []struct {
		name  string
		store recordstore.Store // nil: the fixture's memory store
		// request sets the scene and returns the request under test.
		request    func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest
		status     int
		code       string // "" for a success
		retryAfter string // "": no Retry-After
		outcome    string
	}{
		// Successes.
		{name: "create", request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return post(key, photo)
		}, status: 201, outcome: telemetry.OutcomeCreated},
		{name: "create again", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			f.created(t, photo)
			return post(key, photo)
		}, status: 201, outcome: telemetry.OutcomeReplayed},
		{name: "status", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return get(f.created(t, photo).UploadID, "user-1")
		}, status: 200, outcome: telemetry.OutcomeServed},
		{name: "status that finds the object in S3", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, photo)
			f.s3.Put(u.StorageKey, s3.HeadObjectOutput{ContentLength: aws.Int64(48213), ETag: aws.String(`"d41d8cd98f00b204e9800998ecf8427e"`)})
			return get(u.UploadID, "user-1")
		}, status: 200, outcome: telemetry.OutcomeHealed},
		{name: "list parts", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("GET", "/parts", f.created(t, multipartPhoto).UploadID, "")
		}, status: 200, outcome: telemetry.OutcomeServed},
		{name: "abort", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("DELETE", "", f.created(t, multipartPhoto).UploadID, "")
		}, status: 200, outcome: telemetry.OutcomeServed},
		{name: "complete a completed upload", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			f.finalized(t, u)
			return onUpload("POST", "/complete", u.UploadID, "")
		}, status: 200, outcome: telemetry.OutcomeServed},

		// Refusals before the service.
		{name: "unknown route", request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			r := post(key, photo)
			r.RouteKey, r.RawPath = "DELETE /uploads", "/elsewhere"
			return r
		}, status: 404, code: api.CodeNotFound, outcome: telemetry.OutcomeInvalid},
		{name: "no principal", request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			r := post(key, photo)
			r.RequestContext.Authorizer = nil
			return r
		}, status: 401, code: api.CodeUnauthenticated, outcome: telemetry.OutcomeInvalid},
		{name: "key missing", request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return post("", photo)
		}, status: 400, code: api.CodeKeyRequired, outcome: telemetry.OutcomeInvalid},

		// The service's errors.
		{name: "unknown upload", request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return get(strings.Repeat("0", 64), "user-1")
		}, status: 404, code: api.CodeNotFound, outcome: telemetry.OutcomeInvalid},
		{name: "key reused", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			f.created(t, photo)
			return post(key, strings.Replace(photo, "48213", "48214", 1))
		}, status: 422, code: api.CodeKeyReuse, outcome: telemetry.OutcomeKeyReuse},
		{name: "create while the key's claim is in progress", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			f.created(t, photo)
			id := idempotency.NewID(apigateway.JWTPrincipal("", "user-1"), key)
			rec, err := f.store.GetRecord(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(25 * time.Hour)
			if _, err := f.store.ClaimRecord(context.Background(), recordstore.Record{Record: idempotency.Record{ID: id, Tenant: "user-1", ClaimID: "c2", Fingerprint: rec.Fingerprint, State: idempotency.StateInProgress}}); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(4 * time.Second)
			return post(key, photo)
		}, status: 409, code: api.CodeInProgress, retryAfter: "26", outcome: telemetry.OutcomeInProgress},
		{name: "status of an upload still being created", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, photo)
			id := idempotency.NewID(apigateway.JWTPrincipal("", "user-1"), key)
			rec, err := f.store.GetRecord(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(25 * time.Hour)
			if _, err := f.store.ClaimRecord(context.Background(), recordstore.Record{Record: idempotency.Record{ID: id, Tenant: rec.Tenant, ClaimID: u.UploadID, Fingerprint: rec.Fingerprint, State: idempotency.StateInProgress}}); err != nil {
				t.Fatal(err)
			}
			return get(u.UploadID, "user-1")
		}, status: 409, code: api.CodeInProgress, retryAfter: "1", outcome: telemetry.OutcomeInProgress},
		{name: "sign parts of a completed upload", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			f.finalized(t, u)
			return onUpload("POST", "/parts", u.UploadID, signOnePart)
		}, status: 409, code: api.CodeUploadNotPending, outcome: telemetry.OutcomeInvalid},
		{name: "list parts of a completed upload", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			f.finalized(t, u)
			return onUpload("GET", "/parts", u.UploadID, "")
		}, status: 409, code: api.CodeUploadNotPending, outcome: telemetry.OutcomeInvalid},
		{name: "complete an aborted upload", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			wantStatus(t, f.do(t, onUpload("DELETE", "", u.UploadID, "")), 200, "")
			return onUpload("POST", "/complete", u.UploadID, "")
		}, status: 409, code: api.CodeUploadNotPending, outcome: telemetry.OutcomeInvalid},
		{name: "abort a completed upload", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			f.finalized(t, u)
			return onUpload("DELETE", "", u.UploadID, "")
		}, status: 409, code: api.CodeUploadCompleted, outcome: telemetry.OutcomeInvalid},
		{name: "complete with no part in S3", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("POST", "/complete", f.created(t, multipartPhoto).UploadID, "")
		}, status: 409, code: api.CodePartsMissing, outcome: telemetry.OutcomeInvalid},
		{name: "complete with a part of the wrong size", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			if err := f.s3.PutPart(u.StorageKey, types.Part{PartNumber: aws.Int32(1), Size: aws.Int64(48212), ETag: aws.String(`"x"`)}); err != nil {
				t.Fatal(err)
			}
			return onUpload("POST", "/complete", u.UploadID, "")
		}, status: 409, code: api.CodePartsMissing, outcome: telemetry.OutcomeInvalid},
		{name: "sign parts of a single PUT", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("POST", "/parts", f.created(t, photo).UploadID, signOnePart)
		}, status: 400, code: api.CodeInvalidRequest, outcome: telemetry.OutcomeInvalid},
		{name: "list parts of a single PUT", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("GET", "/parts", f.created(t, photo).UploadID, "")
		}, status: 400, code: api.CodeInvalidRequest, outcome: telemetry.OutcomeInvalid},
		{name: "complete a single PUT", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("POST", "/complete", f.created(t, photo).UploadID, "")
		}, status: 400, code: api.CodeInvalidRequest, outcome: telemetry.OutcomeInvalid},
		{name: "abort a single PUT", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("DELETE", "", f.created(t, photo).UploadID, "")
		}, status: 400, code: api.CodeInvalidRequest, outcome: telemetry.OutcomeInvalid},
		{name: "sign parts with a bad body", request: func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			return onUpload("POST", "/parts", f.created(t, multipartPhoto).UploadID, `{"parts":[]}`)
		}, status: 400, code: api.CodeInvalidRequest, outcome: telemetry.OutcomeInvalid},
		{name: "store unavailable", store: failingStore{err: unavailable}, request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return post(key, photo)
		}, status: 503, code: api.CodeUnavailable, retryAfter: "1", outcome: telemetry.OutcomeUnavailable},
		{name: "store unavailable on status", store: failingStore{err: unavailable}, request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return get(strings.Repeat("a", 64), "user-1")
		}, status: 503, code: api.CodeUnavailable, retryAfter: "1", outcome: telemetry.OutcomeUnavailable},
		// A caller that went away gets a 503 nobody reads, still as the
		// contract has every 503: with Retry-After.
		{name: "caller went away", store: failingStore{err: context.Canceled}, request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return post(key, photo)
		}, status: 503, code: api.CodeUnavailable, retryAfter: "1", outcome: telemetry.OutcomeUnavailable},
		{name: "store fails", store: failingStore{err: errors.New("ValidationException: internals")}, request: func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
			return post(key, photo)
		}, status: 500, code: api.CodeInternal, outcome: telemetry.OutcomeError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.store)
			resp, outcome := f.measured(t, tc.request(t, f))
			if code := checkResponse(t, resp); resp.StatusCode != tc.status || code != tc.code {
				t.Fatalf("%d %q, want %d %q; body %s", resp.StatusCode, code, tc.status, tc.code, resp.Body)
			}
			if got := resp.Headers["Retry-After"]; got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
			if outcome != tc.outcome {
				t.Errorf("outcome %q, want %q", outcome, tc.outcome)
			}
		})
	}
}
