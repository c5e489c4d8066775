package events_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/onceupload/onceupload/internal/wiring/events"
)

var local = events.Local("http://127.0.0.1:9", aws.NewCredentialsCache(
	credentials.NewStaticCredentialsProvider("local", "localsecret", "")), "us-east-1")

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// The handler puts on the bus, with the source, that the events section
// names, and names the bucket; the upload service's settings are not the
// events function's, so a bad one does not stop it.
func TestNewTakesTheEventsSection(t *testing.T) {
	ctx := context.Background()
	h, err := events.New(ctx, lookup(map[string]string{"BUCKET_NAME": "b"}), discard, local)
	if err != nil || h.Bus != "default" || h.Source != "onceupload" || h.Bucket != "b" {
		t.Fatalf("defaults: %+v %v", h, err)
	}
	own := map[string]string{
		"BUCKET_NAME": "b", "EVENT_BUS_NAME": "uploads", "EVENT_SOURCE": "com.example.uploads", "MAX_UPLOAD_BYTES": "lots",
	}
	if h, err := events.New(ctx, lookup(own), discard, local); err != nil || h.Bus != "uploads" || h.Source != "com.example.uploads" {
		t.Fatalf("configured: %+v %v", h, err)
	}
	own["EVENT_SOURCE"] = "aws.s3"
	if _, err := events.New(ctx, lookup(own), discard, local); err == nil || !strings.Contains(err.Error(), "EVENT_SOURCE") {
		t.Errorf("source aws.s3: %v, want an error naming EVENT_SOURCE", err)
	}
}
