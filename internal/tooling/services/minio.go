package services

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// S3Server names an S3 implementation the project runs on locally.
type S3Server string

// The S3 servers: Versity Gateway, everyone's default, and MinIO, a second
// implementation the tests and the chaos run also pass on, so that nothing
// leans on one server's quirks. MinIO is installed by a full
// scripts/install-tools.sh (tests) and by `DEV_S3=minio make dev`.
const (
	Versity S3Server = "versity"
	MinIO   S3Server = "minio"
)

// S3Servers lists every S3Server.
var S3Servers = []S3Server{Versity, MinIO}

// ParseS3Server reads a server's name, as DEV_S3, CHAOS_S3 and TEST_S3
// give it: "" is Versity.
func ParseS3Server(s string) (S3Server, error) {
	switch S3Server(s) {
	case "", Versity:
		return Versity, nil
	case MinIO:
		return MinIO, nil
	}
	return "", fmt.Errorf("unknown S3 server %q: want %q or %q", s, Versity, MinIO)
}

// Binary is the server's executable under .tools/bin.
func (s S3Server) Binary() string {
	if s == MinIO {
		return "minio"
	}
	return "versitygw"
}

// Title is the server's name for people.
func (s S3Server) Title() string {
	if s == MinIO {
		return "MinIO"
	}
	return "Versity Gateway"
}

// StartS3 starts server with o.
func StartS3(ctx context.Context, server S3Server, o S3Options) (*Process, error) {
	if server == MinIO {
		return StartMinIO(ctx, o)
	}
	return StartVersity(ctx, o)
}

// MinIOWebhookARN is the queue a MinIO bucket's notification configuration
// names to send its events to o.WebhookURL: the webhook target StartMinIO
// registers as ONCEUPLOAD, in the region it sets (MinIO prints the ARN
// among its start-up lines, "SQS ARNs: …").
const MinIOWebhookARN = "arn:minio:sqs:" + Region + ":ONCEUPLOAD:webhook"

// StartMinIO starts a single-drive MinIO on o.DataDir, its S3 API on
// 127.0.0.1:o.Port and its console off (and, were it on, on 127.0.0.1
// too). MinIO differs from Versity in what the caller must do:
//   - events reach o.WebhookURL only from buckets whose notification
//     configuration names MinIOWebhookARN (Versity sends every bucket's);
//   - CORS is server-wide, o.CORSOrigins (PutBucketCors is not
//     implemented).
func StartMinIO(ctx context.Context, o S3Options) (*Process, error) {
	bin, err := Binary("minio")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	console, err := FreePort()
	if err != nil {
		return nil, err
	}
	if o.AccessKey == "" {
		o.AccessKey = AccessKey
	}
	if o.SecretKey == "" {
		o.SecretKey = SecretKey
	}
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, fmt.Errorf("start minio: %w", err)
	}
	// The certificates directory beside the data, not ~/.minio.
	certs := filepath.Join(filepath.Dir(o.DataDir), "minio-certs")
	for _, dir := range []string{o.DataDir, certs} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("start minio: %w", err)
		}
	}
	// The host's environment, without its MinIO settings, and ours.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"MINIO_ROOT_USER="+o.AccessKey, "MINIO_ROOT_PASSWORD="+o.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_REGION="+Region,
		// Requests wait until start-up is done, the event targets included:
		// otherwise a bucket could not yet subscribe to one.
		"MINIO_SYNC_BOOT=on",
	)
	if len(o.CORSOrigins) > 0 {
		env = append(env, "MINIO_API_CORS_ALLOW_ORIGIN="+strings.Join(o.CORSOrigins, ","))
	}
	if o.WebhookURL != "" {
		env = append(env, "MINIO_NOTIFY_WEBHOOK_ENABLE_ONCEUPLOAD=on", "MINIO_NOTIFY_WEBHOOK_ENDPOINT_ONCEUPLOAD="+o.WebhookURL)
	}
	return startReady(ctx, "minio", port, o.LogPath, env, waitMinIO, bin,
		"server", "--quiet", "--address", "127.0.0.1:"+strconv.Itoa(port),
		"--console-address", "127.0.0.1:"+strconv.Itoa(console),
		"--certs-dir", certs, o.DataDir)
}

// waitMinIO waits until MinIO's S3 API is up: it answers HTTP, and even
// /minio/health/ready, before its object layer is, and S3 requests then
// 503 XMinioServerNotInitialized. An anonymous ListBuckets is refused
// once it is up.
func waitMinIO(ctx context.Context, p *Process) error {
	client := &http.Client{Timeout: time.Second}
	return poll(ctx, p, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return fmt.Errorf("minio: %s", resp.Status)
		}
		return nil
	})
}
