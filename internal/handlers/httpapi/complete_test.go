package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// The optional body of a complete: decoded as strictly as the others, with
// its own size limit, and a declaration that S3 contradicts is a 409
// parts_mismatch that names the parts.
func TestCompleteBody(t *testing.T) {
	sum, _ := hex.DecodeString(digest)
	// S3 holds the one part of multipartPhoto, whose SHA-256 is digest.
	held := types.Part{PartNumber: aws.Int32(1), Size: aws.Int64(48213), ETag: aws.String(`"x"`),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum))}
	declare := func(n int, sha string) string {
		return `{"parts":[{"partNumber":` + string(rune('0'+n)) + `,"sha256":"` + sha + `"}]}`
	}
	wrong := strings.Repeat("0", 64)
	complete := func(body string, base64Encoded bool) func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest {
		return func(t *testing.T, f *fixture) events.APIGatewayV2HTTPRequest {
			u := f.created(t, multipartPhoto)
			if err := f.s3.PutPart(u.StorageKey, held); err != nil {
				t.Fatal(err)
			}
			req := onUpload("POST", "/complete", u.UploadID, body)
			if base64Encoded {
				req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body)), true
			}
			return req
		}
	}
	for _, tc := range []struct {
		name    string
		request func(*testing.T, *fixture) events.APIGatewayV2HTTPRequest
		status  int
		code    string
		message string // a part of it
		golden  string
	}{
		{"a wrong declared part", complete(declare(1, wrong), false), 409, api.CodePartsMismatch, ": 1. Nothing was completed", "error-409-parts-mismatch"},
		{"a wrong declared part, base64", complete(declare(1, wrong), true), 409, api.CodePartsMismatch, ": 1.", ""},
		{"a wrong declaration padded to the limit", complete(padTo(declare(1, wrong), api.MaxCompleteBodyBytes), false), 409, api.CodePartsMismatch, ": 1.", ""},
		{"one byte over the limit", complete(padTo(declare(1, wrong), api.MaxCompleteBodyBytes+1), false), 413, api.CodeRequestTooLarge, "2097152", ""},
		{"over the limit, base64", complete(padTo(declare(1, wrong), api.MaxCompleteBodyBytes+4), true), 413, api.CodeRequestTooLarge, "", ""},
		{"a part beyond partCount", complete(`{"parts":[{"partNumber":1,"sha256":"`+digest+`"},{"partNumber":2,"sha256":"`+digest+`"}]}`, false), 400, api.CodeInvalidRequest, "partNumber 2 is outside 1..1", ""},
		{"no parts", complete(`{"parts":[]}`, false), 400, api.CodeInvalidRequest, "parts must list every part", ""},
		{"an unknown member", complete(`{"part":[]}`, false), 400, api.CodeInvalidRequest, `unknown field`, ""},
		{"not JSON", complete(`parts=1`, false), 400, api.CodeInvalidRequest, "one JSON object", ""},
		{"sha256 not the create's", complete(`{"sha256":"`+wrong+`"}`, false), 400, api.CodeInvalidRequest, "sha256 differs", ""},
		{"sha256 not hex", complete(`{"sha256":"`+strings.Repeat("z", 64)+`"}`, false), 400, api.CodeInvalidRequest, "sha256 must be 64 hex characters", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			resp, outcome := f.measured(t, tc.request(t, f))
			if code := checkResponse(t, resp); resp.StatusCode != tc.status || code != tc.code || !strings.Contains(resp.Body, tc.message) {
				t.Fatalf("%d %q %s, want %d %q saying %q", resp.StatusCode, code, resp.Body, tc.status, tc.code, tc.message)
			}
			if outcome != telemetry.OutcomeInvalid {
				t.Errorf("outcome %q", outcome)
			}
			if tc.golden != "" {
				golden(t, tc.golden, resp.Body)
			}
		})
	}
}

// A multipart create may leave sha256 out: 201 without it, and the same
// key with sha256 is another request (422).
func TestMultipartCreateWithoutSHA256(t *testing.T) {
	f := newFixture(t, nil)
	without := strings.Replace(multipartPhoto, `,"sha256":"`+digest+`"`, "", 1)
	created := f.do(t, post(key, without))
	wantStatus(t, created, 201, "")
	if strings.Contains(created.Body, "sha256") {
		t.Errorf("pending body %s: no sha256 was given", created.Body)
	}
	replay := f.do(t, post(key, without))
	wantStatus(t, replay, 201, "")
	if replay.Headers["Idempotent-Replay"] != "true" || replay.Body != created.Body {
		t.Errorf("replay: %v %s", replay.Headers, replay.Body)
	}
	wantStatus(t, f.do(t, post(key, multipartPhoto)), 422, api.CodeKeyReuse)
}

// TestPartsErrorMessages pins the 409 messages that name parts: they are
// written here for clients, from the part numbers alone, never from an
// error's own text.
func TestPartsErrorMessages(t *testing.T) {
	t.Parallel()
	h := &Handler{}
	for _, c := range []struct {
		err        error
		code, want string
	}{
		{&upload.PartsMissingError{Missing: []int{3, 7}, Count: 2}, api.CodePartsMissing,
			"S3 does not hold every part yet: parts missing or of the wrong size: 3, 7. Send them, then complete again."},
		{fmt.Errorf("complete: %w", &upload.PartsMismatchError{Mismatched: []int{2}, Count: 1}), api.CodePartsMismatch,
			"S3 holds other bytes than declared; parts whose SHA-256 in S3 is not the declared one: 2. Nothing was completed: sign those parts again, send their right bytes, then complete again."},
	} {
		resp, _ := h.errorFor(context.Background(), c.err)
		var got api.Error
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || resp.StatusCode != 409 || got.Error != c.code || got.Message != c.want {
			t.Errorf("errorFor(%v) = %d %s, want 409 %s %q", c.err, resp.StatusCode, resp.Body, c.code, c.want)
		}
	}
}
