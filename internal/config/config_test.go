package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/upload"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got, err := Load(env(map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{MetricsNamespace: "onceupload", Table: "t", IdempotencyTTL: 24 * time.Hour, Upload: upload.Config{AbortIncompleteAfter: 2 * 24 * time.Hour,
		Bucket: "b", Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: 53687091200000, MaxPendingMultipart: 100,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v\nwant %+v", got, want)
	}
}

func TestLoadOverrides(t *testing.T) {
	t.Parallel()
	got, err := Load(env(map[string]string{
		"TABLE_NAME": "t", "BUCKET_NAME": "b", "UPLOAD_PREFIX": "in/", "IDEMPOTENCY_TTL": "72h",
		"PRESIGN_TTL": "5m", "MAX_UPLOAD_BYTES": "1048576", "ALLOWED_CONTENT_TYPES": " image/* , Application/PDF ,",
		"ALLOW_ANONYMOUS": "true", "MAX_PENDING_MULTIPART_PER_TENANT": "0", "ABORT_INCOMPLETE_DAYS": "7",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{MetricsNamespace: "onceupload", Table: "t", IdempotencyTTL: 72 * time.Hour, AllowAnonymous: true, Upload: upload.Config{AbortIncompleteAfter: 7 * 24 * time.Hour,
		Bucket: "b", Prefix: "in/", PresignTTL: 5 * time.Minute, MaxUploadBytes: 1 << 20, MaxPendingMultipart: 0,
		AllowedContentTypes: []string{"image/*", "application/pdf"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v\nwant %+v", got, want)
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Load(env(map[string]string{
		"IDEMPOTENCY_TTL": "1 day", "PRESIGN_TTL": "-1m", "MAX_UPLOAD_BYTES": "53687091200001", "ABORT_INCOMPLETE_DAYS": "0",
		"ALLOWED_CONTENT_TYPES": "image", "ALLOW_ANONYMOUS": "maybe", "UPLOAD_PREFIX": "/abs",
		"MAX_PENDING_MULTIPART_PER_TENANT": "-1",
	}))
	if err == nil {
		t.Fatal("Load accepted invalid values")
	}
	for _, name := range []string{"TABLE_NAME", "BUCKET_NAME", "IDEMPOTENCY_TTL", "PRESIGN_TTL", "MAX_UPLOAD_BYTES", "ALLOWED_CONTENT_TYPES", "ALLOW_ANONYMOUS", "UPLOAD_PREFIX", "ABORT_INCOMPLETE_DAYS", "MAX_PENDING_MULTIPART_PER_TENANT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not mention %s: %v", name, err)
		}
	}
}

// A PRESIGN_TTL longer than IDEMPOTENCY_TTL works (URLs are cut to their
// claim's life) but earns a warning; IDEMPOTENCY_TTL=5s must keep working.
func TestPresignLongerThanKeysWarns(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "IDEMPOTENCY_TTL": "5s"}
	c, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if c.IdempotencyTTL != 5*time.Second || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "PRESIGN_TTL=15m0s is longer than IDEMPOTENCY_TTL=5s") {
		t.Fatalf("IdempotencyTTL %s, warnings %q", c.IdempotencyTTL, c.Warnings)
	}
	env["IDEMPOTENCY_TTL"] = "24h"
	if c, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil || len(c.Warnings) != 0 {
		t.Fatalf("defaults: %v, warnings %q", err, c.Warnings)
	}
}

func TestKeysMustNotOutliveUnfinishedUploads(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "IDEMPOTENCY_TTL": "192h", "ABORT_INCOMPLETE_DAYS": "7"}
	_, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "raise ABORT_INCOMPLETE_DAYS to at least 8 (9 leaves an active upload a day more)") {
		t.Fatalf("8 days of keys with a 7-day abort rule: %v", err)
	}
	env["ABORT_INCOMPLETE_DAYS"] = "8"
	if _, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
}

// Unless set, the bucket's rule is a day past the keys' window, in whole
// days: an upload whose key expired keeps its parts no longer than that.
func TestAbortRuleDefaultsToADayPastTheKeys(t *testing.T) {
	t.Parallel()
	for ttl, days := range map[string]int{"5s": 2, "24h": 2, "25h": 3, "48h": 3, "72h": 4, "192h": 9} {
		c, err := Load(env(map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "IDEMPOTENCY_TTL": ttl}))
		if err != nil || c.Upload.AbortIncompleteAfter != time.Duration(days)*24*time.Hour {
			t.Errorf("IDEMPOTENCY_TTL=%s: abort after %s, %v; want %d days", ttl, c.Upload.AbortIncompleteAfter, err, days)
		}
	}
}

func TestMaxPendingMultipart(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]int{"0": 0, "1": 1, "100": 100, "10000": 10000, " 7 ": 7} {
		c, err := Load(env(map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "MAX_PENDING_MULTIPART_PER_TENANT": value}))
		if err != nil || c.Upload.MaxPendingMultipart != want {
			t.Errorf("MAX_PENDING_MULTIPART_PER_TENANT=%q: %d, %v; want %d", value, c.Upload.MaxPendingMultipart, err, want)
		}
	}
	for _, value := range []string{"-1", "10001", "1.5", "many", "1e3"} {
		_, err := Load(env(map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "MAX_PENDING_MULTIPART_PER_TENANT": value}))
		if err == nil || !strings.Contains(err.Error(), "MAX_PENDING_MULTIPART_PER_TENANT=") || !strings.Contains(err.Error(), "0 (no cap) to 10000") {
			t.Errorf("MAX_PENDING_MULTIPART_PER_TENANT=%q: %v, want a clear refusal", value, err)
		}
	}
}
