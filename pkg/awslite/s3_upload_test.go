package awslite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/upload"
)

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// decoded returns a function that takes a service method's results and
// returns its body decoded, failing t on an error: decoded[T](t)(svc.X(…)).
func decoded[T any](t *testing.T) func(upload.Reply, error) T {
	return func(reply upload.Reply, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := json.Unmarshal(reply.Body, &v); err != nil {
			t.Fatalf("decode %s: %v", reply.Body, err)
		}
		return v
	}
}

// The upload service, wired as the Lambda functions wire it (awslite.S3
// for objects, NewPresignerAt at its BucketEndpoint for URLs), takes
// uploads into a real S3 server: a single PUT healed by a status, a
// multipart upload completed, one aborted.
func TestUploadServiceOnAwsliteS3(t *testing.T) {
	v := newVersity(t)
	ctx := context.Background()
	cfg := testenv.AWSConfig()
	svc := upload.New(idempotency.NewMemoryStore(),
		upload.NewPresignerAt(v.lite.BucketEndpoint(v.bucket), cfg.Region, cfg.Credentials), v.lite,
		upload.Config{Bucket: v.bucket, Prefix: "uploads/", PresignTTL: 15 * time.Minute, KeyTTL: time.Hour, MaxUploadBytes: api.MaxMultipartBytes},
		func(o *upload.Options) { o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })

	t.Run("single PUT", func(t *testing.T) {
		data := []byte("%PDF-1.7 a small report")
		created := decoded[api.Upload](t)(svc.Create(ctx, "tenant-a", "single-put-key-0001",
			api.CreateRequest{Filename: "report.pdf", ContentType: "application/pdf", Size: int64(len(data)), SHA256: hexSHA256(data)}))
		if code, err := testenv.PutPresigned(created, data, nil); err != nil || code != http.StatusOK {
			t.Fatalf("PUT: %d %v", code, err)
		}
		// No event in this test: the status finds the object with HeadObject.
		reply, err := svc.Status(ctx, "tenant-a", created.UploadID)
		done := decoded[api.Upload](t)(reply, err)
		if done.Status != api.StatusCompleted || !reply.Healed || done.ETag == "" {
			t.Errorf("status: %+v (healed %v)", done, reply.Healed)
		}
	})

	t.Run("multipart", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), (api.MinPartSize+4096)/16)
		created := decoded[api.Upload](t)(svc.Create(ctx, "tenant-a", "multipart-key-0001",
			api.CreateRequest{Filename: "movie.mp4", ContentType: "video/mp4", Size: int64(len(data)), SHA256: hexSHA256(data), PartSize: api.MinPartSize}))
		parts := [][]byte{data[:api.MinPartSize], data[api.MinPartSize:]}
		req := api.SignPartsRequest{}
		for i, p := range parts {
			req.Parts = append(req.Parts, api.PartToSign{PartNumber: i + 1, SHA256: hexSHA256(p)})
		}
		signed := decoded[api.SignedParts](t)(svc.SignParts(ctx, "tenant-a", created.UploadID, req))
		for i, p := range signed.Parts {
			if code := testenv.PutPart(p, parts[i]); code != http.StatusOK {
				t.Fatalf("part %d: %d", p.PartNumber, code)
			}
		}
		listed := decoded[api.PartList](t)(svc.ListParts(ctx, "tenant-a", created.UploadID))
		if len(listed.Parts) != 2 || listed.Parts[1].SHA256 != hexSHA256(parts[1]) || listed.Parts[0].Size != api.MinPartSize {
			t.Errorf("parts: %+v", listed)
		}
		done := decoded[api.Upload](t)(svc.Complete(ctx, "tenant-a", created.UploadID))
		if done.Status != api.StatusCompleted || done.CompositeSHA256 == "" || done.ETag == "" {
			t.Errorf("complete: %+v", done)
		}
		again := decoded[api.Upload](t)(svc.Complete(ctx, "tenant-a", created.UploadID))
		if !reflect.DeepEqual(again, done) {
			t.Errorf("complete again:\n got %+v\nwant %+v", again, done)
		}
	})

	t.Run("abort", func(t *testing.T) {
		data := bytes.Repeat([]byte{1}, api.MinPartSize+1)
		created := decoded[api.Upload](t)(svc.Create(ctx, "tenant-a", "aborted-key-00001",
			api.CreateRequest{Filename: "movie.mp4", ContentType: "video/mp4", Size: int64(len(data)), SHA256: hexSHA256(data), PartSize: api.MinPartSize}))
		aborted := decoded[api.Upload](t)(svc.Abort(ctx, "tenant-a", created.UploadID))
		if aborted.Status != api.StatusAborted {
			t.Errorf("abort: %+v", aborted)
		}
		if again := decoded[api.Upload](t)(svc.Abort(ctx, "tenant-a", created.UploadID)); !reflect.DeepEqual(again, aborted) {
			t.Errorf("abort again: %+v", again)
		}
	})
}
