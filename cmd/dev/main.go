// Command dev runs the whole system on 127.0.0.1: DynamoDB (dynoxide), S3
// (Versity Gateway), both functions and an API Gateway front door. It is
// what `make dev` starts; Ctrl-C stops everything.
//
// Settings come from the environment: API_PORT (3000), DYNAMODB_PORT
// (8000), S3_PORT (9000), TABLE_NAME (idempotency-local), BUCKET_NAME
// (uploads-local), ALLOWED_ORIGINS (*; the demo's own origins are always
// allowed besides), DEV_DATA_DIR (.local), DEV_S3 (versity; minio runs
// MinIO instead of Versity Gateway, on the same port, bucket and keys), and the
// functions' own variables (IDEMPOTENCY_TTL=5s make dev).
// STATIC_DIR (web/dist) is served at / for the browser demo. Each upload
// that completes or is aborted yields an event (docs/api.md, "Events"),
// logged as an "event" line and, if DEV_EVENTS_URL is set, POSTed there
// as EventBridge delivers it to a target. --rie, or
// DEV_RIE=true, runs the bootstraps in BOOTSTRAP_DIR (.build/<GOARCH>,
// where make dev has make build put them) under the Runtime Interface
// Emulator instead of in-process: on Linux only, as the bootstraps are
// Linux binaries. DynamoDB is dynoxide where install-tools.sh installed it,
// else dynalite (services.StartDynamoDB).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
)

func main() {
	rie := flag.Bool("rie", env("DEV_RIE", "false") == "true", "run the bootstraps in "+env("BOOTSTRAP_DIR", ".build/"+runtime.GOARCH)+" under the Lambda Runtime Interface Emulator")
	flag.Parse()
	if err := checkRIE(*rie, runtime.GOOS); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(2)
	}
	// The functions' metric lines are tallied for a live view (in-process
	// mode; under the emulator they go to the functions' log files).
	var tally telemetry.Tally
	logger := slog.New(tally.Handler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	cfg := devstack.Config{
		DataDir:      env("DEV_DATA_DIR", ".local"),
		APIPort:      port("API_PORT", 3000),
		DynamoPort:   port("DYNAMODB_PORT", 8000),
		S3Port:       port("S3_PORT", 9000),
		S3:           s3Server(os.Getenv("DEV_S3")),
		Table:        env("TABLE_NAME", "idempotency-local"),
		Bucket:       env("BUCKET_NAME", "uploads-local"),
		Origins:      strings.Split(env("ALLOWED_ORIGINS", "*"), ","),
		RIE:          *rie,
		BootstrapDir: env("BOOTSTRAP_DIR", ".build/"+runtime.GOARCH),
		Env:          os.LookupEnv,
		Logger:       logger,
		StaticDir:    env("STATIC_DIR", "web/dist"),
		Concurrency:  number("DEV_CONCURRENCY", devstack.DefaultConcurrency, 1, 1024),
		EventsURL:    os.Getenv("DEV_EVENTS_URL"),
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := devstack.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
	dynamo, _ := services.DynamoDBServer()
	fmt.Printf(`onceupload is running locally (functions: %s)
  API        %s     POST /uploads, GET|DELETE /uploads/{id}, /uploads/{id}/parts, /uploads/{id}/complete
  demo       %s
  origins    %s
  CLI        upload --api %s FILE     (build it once: go install ./cmd/upload)
  DynamoDB   %s     table %s (%s)
  S3         %s     bucket %s (%s, path style, access key %s, secret %s)
  events     %s
  data, logs %s
A tally of the functions' metrics is printed every 10 s while requests come.
Press Ctrl-C to stop.
`, st.Mode, st.APIURL, demo(st.APIURL, cfg.StaticDir), origins(st.Origins), st.APIURL, st.DynamoURL, st.Table, dynamo, st.S3URL, st.Bucket, st.S3Server.Title(), devstack.AccessKey, devstack.SecretKey, events(cfg.EventsURL), cfg.DataDir)
	go showTally(ctx, &tally, 10*time.Second)
	<-ctx.Done()
	fmt.Println("\nstopping…")
	st.Close()
}

// checkRIE refuses the emulator mode on an OS other than Linux: it runs the
// functions' bootstraps, which are Linux binaries.
func checkRIE(rie bool, goos string) error {
	if rie && goos != "linux" {
		return fmt.Errorf("DEV_RIE=true (--rie) runs the functions' Linux bootstraps under the Lambda Runtime Interface Emulator, which needs Linux; this is %s. Run make dev without it: the functions then run in-process", goos)
	}
	return nil
}

// demo is where the browser demo is: the API's address, which serves
// staticDir for GET requests that match no route, or how to build it.
func demo(apiURL, staticDir string) string {
	if staticDir == "" {
		return "none (STATIC_DIR is empty)"
	}
	if _, err := os.Stat(filepath.Join(staticDir, "index.html")); err != nil {
		return fmt.Sprintf("none: %s has no index.html (make web-build)", staticDir)
	}
	return apiURL + "/"
}

// origins says which page origins CORS lets call the API and PUT to the
// bucket: ALLOWED_ORIGINS, and the demo's own.
func origins(list []string) string {
	if slices.Equal(list, []string{"*"}) {
		return "* (CORS of the API and the bucket: any page; ALLOWED_ORIGINS=https://… narrows it)"
	}
	return strings.Join(list, ", ") + " (CORS of the API and the bucket: ALLOWED_ORIGINS and the demo's own)"
}

// events says where upload events go.
func events(url string) string {
	if url == "" {
		return `logged as "event" lines (DEV_EVENTS_URL=http://… also POSTs each one there)`
	}
	return "logged, and POSTed to " + url
}

// showTally prints the metrics' tally every interval while it changes.
func showTally(ctx context.Context, tally *telemetry.Tally, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	shown := int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s, lines := tally.String(); lines != shown {
				shown = lines
				fmt.Printf("metrics (%d requests): %s\n", lines, s)
			}
		}
	}
}

// s3Server is the S3 server DEV_S3 names, or the end of the run with why.
func s3Server(name string) services.S3Server {
	s, err := services.ParseS3Server(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dev: DEV_S3: %v\n", err)
		os.Exit(2)
	}
	return s
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func port(name string, def int) int { return number(name, def, 0, 65535) }

func number(name string, def, lo, hi int) int {
	n, err := strconv.Atoi(env(name, strconv.Itoa(def)))
	if err != nil || n < lo || n > hi {
		fmt.Fprintf(os.Stderr, "dev: %s=%q: want a whole number from %d to %d\n", name, os.Getenv(name), lo, hi)
		os.Exit(2)
	}
	return n
}
