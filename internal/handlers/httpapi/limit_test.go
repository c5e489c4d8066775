package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// A create past the tenant's cap on unfinished multipart uploads is a 429
// too_many_uploads with the standard error body, no Retry-After (no wait
// frees a place: an upload ending does) and its own telemetry outcome. A
// replay, a single PUT and another tenant are answered as always, and the
// refused key creates once a place frees.
func TestTooManyUploads(t *testing.T) {
	f := newFixture(t, nil)
	cfg := upload.Config{Bucket: "uploads-test", Prefix: "uploads/", PresignTTL: 15 * time.Minute,
		MaxUploadBytes: 1 << 20, AllowedContentTypes: []string{"image/*", "application/pdf"}, MaxPendingMultipart: 1}
	f.svc = upload.New(f.store, fakePresigner{clock: f.clock}, f.s3, cfg, func(o *upload.Options) {
		o.Random, o.Logger = &counterReader{}, slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	f.handler.Service = f.svc

	held := f.created(t, multipartPhoto)
	const other = "9b2d7c4e-0f1a-4e3b-8c5d-6a7f8e9d0c1b"
	resp, outcome := f.measured(t, post(other, multipartPhoto))
	if code := checkResponse(t, resp); resp.StatusCode != 429 || code != api.CodeTooManyUploads {
		t.Fatalf("%d %q, want 429 %q; body %s", resp.StatusCode, code, api.CodeTooManyUploads, resp.Body)
	}
	golden(t, "error-429", resp.Body)
	if ra, ok := resp.Headers["Retry-After"]; ok {
		t.Errorf("Retry-After = %q on a refusal no wait cures", ra)
	}
	if outcome != telemetry.OutcomeLimited {
		t.Errorf("outcome %q, want %q", outcome, telemetry.OutcomeLimited)
	}

	replay := f.do(t, post(key, multipartPhoto))
	wantStatus(t, replay, 201, "")
	if replay.Headers["Idempotent-Replay"] != "true" {
		t.Error("the held upload's create was not replayed")
	}
	wantStatus(t, f.do(t, post(other, photo)), 201, "") // a single PUT
	stranger := post(other, multipartPhoto)
	stranger.RequestContext.Authorizer.JWT.Claims["sub"] = "user-2"
	wantStatus(t, f.do(t, stranger), 201, "")

	wantStatus(t, f.do(t, onUpload("DELETE", "", held.UploadID, "")), 200, "")
	const third = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
	created := f.do(t, post(third, multipartPhoto))
	wantStatus(t, created, 201, "")
	var u api.Upload
	if err := json.Unmarshal([]byte(created.Body), &u); err != nil || u.Multipart == nil {
		t.Fatalf("after the abort: %s", created.Body)
	}
}
