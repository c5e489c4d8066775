package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A driver that ends (as bench/browser/upload.mjs does when the page's
// upload fails) ends the first-part run at once; S3 is not polled until the
// run's timeout.
func TestFirstPartBrowserDriverEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult><Bucket>b</Bucket></ListMultipartUploadsResult>`))
	}))
	defer srv.Close()
	s3c := s3.New(s3.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
	})
	dir := t.TempDir()
	script := filepath.Join(dir, "driver.sh")
	if err := os.WriteFile(script, []byte("echo '{\"event\":\"picked\",\"epochMs\":1}'\necho 'upload failed' >&2\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := FirstPartConfig{
		S3: s3c, Bucket: "b", File: filepath.Join(dir, "f"),
		Browser: &BrowserDriver{Node: "/bin/sh", Script: script, LogPath: filepath.Join(dir, "driver.log")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := firstPartBrowser(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "ended before a part was stored") {
		t.Fatalf("err = %v; want the driver's end", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the run waited for its context")
	}
}
