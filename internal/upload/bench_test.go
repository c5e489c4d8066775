package upload_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// benchService is the real service with the store faked in memory and the
// real SDK presigner (pure CPU), so the benchmarks measure our hot path.
func benchService(b *testing.B) (*upload.Service, *memorystore.Store) {
	b.Helper()
	s3c := s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	store := memorystore.New()
	cfg := upload.Config{Bucket: "bench-bucket", Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: 5 << 30}
	presigner := upload.NewPresigner(s3c, cfg.Bucket)
	svc := upload.New(store, presigner, s3c, cfg, func(o *upload.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	return svc, store
}

var benchBody = []byte(`{"filename":"photo.jpg","contentType":"image/jpeg","size":48213,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`)

// BenchmarkCreate is a fresh create: decode and validate the body,
// fingerprint, presign, encode the response, claim (in memory).
func BenchmarkCreate(b *testing.B) {
	svc, _ := benchService(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req, err := api.DecodeCreateRequest(benchBody)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Create(ctx, "tenant", fmt.Sprintf("bench-key-%012d", i), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay is a retry of a pending create whose URL is still valid.
func BenchmarkReplay(b *testing.B) {
	svc, _ := benchService(b)
	ctx := context.Background()
	req, _ := api.DecodeCreateRequest(benchBody)
	if _, err := svc.Create(ctx, "tenant", "bench-key-replayed", req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := api.DecodeCreateRequest(benchBody)
		if r, err := svc.Create(ctx, "tenant", "bench-key-replayed", req); err != nil || r.Effect != upload.EffectReplayed {
			b.Fatal(err)
		}
	}
}

// BenchmarkFinalize records one S3 object (the store and S3 in memory:
// the bucket holds every upload's object, of the bench body's size).
func BenchmarkFinalize(b *testing.B) {
	svc, store := benchService(b)
	stored := &s3fake.Client{}
	finalizer := upload.New(store, nil, stored, upload.Config{Bucket: "bench-bucket", Prefix: "uploads/"},
		func(o *upload.Options) { o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	ctx := context.Background()
	req, _ := api.DecodeCreateRequest(benchBody)
	keys := make([]string, 0, 1024)
	for i := range 1024 {
		r, err := svc.Create(ctx, "tenant", fmt.Sprintf("bench-key-%012d", i), req)
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, "uploads/"+r.UploadID)
		stored.Put(keys[i], s3.HeadObjectOutput{ContentLength: aws.Int64(48213), ETag: aws.String(`"d41d8cd98f00b204e9800998ecf8427e"`)})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		obj := upload.ObjectCreated{Bucket: "bench-bucket", Key: keys[i%len(keys)], Size: 48213, ETag: "d41d8cd98f00b204e9800998ecf8427e", Time: time.Now()}
		i++
		if _, err := finalizer.Finalize(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
}
