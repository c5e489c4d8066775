package services_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// tusd (the benchmark's resumable-upload peer) starts on 127.0.0.1 with its
// S3 store on Versity Gateway, and an upload through it ends as an object
// in the bucket.
func TestStartTusd(t *testing.T) {
	testenv.RequireTools(t, "versitygw", "tusd")
	ctx := context.Background()
	s3p, err := services.StartVersity(ctx, services.S3Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s3p.Stop()
	s3c := testenv.S3Client(s3p.Endpoint, nil)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("tus")}); err != nil {
		t.Fatal(err)
	}
	p, err := services.StartTusd(ctx, services.TusdOptions{S3URL: s3p.Endpoint, Bucket: "tus", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if !strings.HasPrefix(p.Endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %s, want 127.0.0.1", p.Endpoint)
	}

	// The least of the tus protocol: a creation, then one PATCH.
	body := "hello, tus"
	req, _ := http.NewRequest(http.MethodPost, p.Endpoint+"/files/", nil)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Length", "10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || loc == "" {
		t.Fatalf("create: %s, Location %q", resp.Status, loc)
	}
	req, _ = http.NewRequest(http.MethodPatch, loc, strings.NewReader(body))
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != "10" {
		t.Fatalf("patch: %s, Upload-Offset %q", resp.Status, resp.Header.Get("Upload-Offset"))
	}
	list, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("tus")})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range list.Contents {
		found = found || aws.ToInt64(o.Size) == int64(len(body)) && !strings.HasSuffix(aws.ToString(o.Key), ".info")
	}
	if !found {
		t.Errorf("no object of %d bytes in the bucket: %+v", len(body), list.Contents)
	}
}
