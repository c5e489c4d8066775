// Command upload sends files to an onceupload API so that each is stored
// exactly once, however often it is retried or re-run.
//
//	upload [flags] FILE...
//
// Each file gets one Idempotency-Key, stored in a small state file before
// the first request; running the command again after a crash or Ctrl-C
// resumes with the same key, so the file is never stored twice. Exit codes:
// 0 all uploaded, 1 other failure (a file cannot be read, …), 2 usage,
// 3 rejected by the server (a 4xx that no retry can fix), 4 retries or the
// deadline ran out (safe to run again), 130 interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/onceupload/onceupload/pkg/api"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/onceupload/onceupload/pkg/client"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitRejected    = 3
	exitExhausted   = 4
	exitInterrupted = 130
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	api, token, contentType, key, state string
	json, quiet, verbose                bool
	maxAttempts                         int
	deadline, retryBudget               time.Duration
	limitRate                           int64
}

func run(args []string, stdout, stderr io.Writer) int {
	cacheDir, _ := os.UserCacheDir()
	var o options
	fs := flag.NewFlagSet("upload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.api, "api", envOr("ONCEUPLOAD_API", "http://127.0.0.1:3000"), "API base URL (env ONCEUPLOAD_API)")
	fs.StringVar(&o.token, "token", os.Getenv("ONCEUPLOAD_TOKEN"), "bearer token for the API's authorizer (env ONCEUPLOAD_TOKEN)")
	fs.StringVar(&o.contentType, "content-type", "", "media type of the files (default: from the extension, else sniffed)")
	fs.StringVar(&o.key, "key", "", "Idempotency-Key to use (one file only; default: a new key, remembered until done)")
	fs.BoolVar(&o.json, "json", false, "print one JSON line per file with the server's final response")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&o.verbose, "v", false, "log every retry to stderr")
	fs.IntVar(&o.maxAttempts, "max-attempts", client.DefaultMaxAttempts, "attempts per request, the first included (0: no cap, --retry-budget bounds them)")
	fs.DurationVar(&o.retryBudget, "retry-budget", client.DefaultRetryBudget, "stop retrying a request when the next wait would end this long after its first attempt (0: no budget)")
	fs.DurationVar(&o.deadline, "deadline", time.Hour, "give up on a file after this long")
	fs.Int64Var(&o.limitRate, "limit-rate", 0, "cap the upload rate in bytes per second (0: no cap)")
	fs.StringVar(&o.state, "state", filepath.Join(cacheDir, "onceupload", "pending.json"), "file that remembers the keys of unfinished uploads")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: upload [flags] FILE...

Uploads each FILE to an onceupload API, exactly once. If the network fails,
the command retries; if the command itself is stopped, run it again: it
resumes each unfinished file with the same Idempotency-Key, so nothing is
stored twice.

Examples:
  upload photo.jpg
  upload --api https://abc.execute-api.eu-west-1.amazonaws.com --token "$JWT" *.pdf
  upload --json report.pdf | jq .upload.uploadId

Exit codes: 0 done, 1 failed, 2 usage, 3 rejected by the server,
4 gave up retrying (safe to run again), 130 interrupted.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	files := fs.Args()
	switch {
	case len(files) == 0:
		fmt.Fprintln(stderr, "upload: no FILE given (see upload --help)")
		return exitUsage
	case o.key != "" && len(files) > 1:
		fmt.Fprintln(stderr, "upload: --key needs exactly one FILE")
		return exitUsage
	}
	if o.key != "" {
		if _, err := api.ParseIdempotencyKey(o.key); err != nil {
			fmt.Fprintf(stderr, "upload: --key: %v\n", err)
			return exitUsage
		}
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	c, err := client.New(o.api, func(co *client.Options) {
		co.MaxAttempts, co.RetryBudget, co.Deadline, co.Logger = o.maxAttempts, o.retryBudget, o.deadline, logger
		if o.token != "" {
			co.Token = func(context.Context) (string, error) { return o.token, nil }
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "upload: --api: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	state := &stateFile{path: o.state}
	showProgress := !o.quiet && !o.json && isTerminal(stderr)
	worst := exitOK
	for _, file := range files {
		code := uploadOne(ctx, c, state, file, o, showProgress, stdout, stderr)
		worst = max(worst, code)
		if ctx.Err() != nil {
			return exitInterrupted
		}
	}
	return worst
}

func uploadOne(ctx context.Context, c *client.Client, state *stateFile, file string, o options, showProgress bool, stdout, stderr io.Writer) int {
	id, err := identify(o.api, file)
	if err != nil {
		fmt.Fprintf(stderr, "upload: %v\n", err)
		return exitFailed
	}
	key := o.key
	if key == "" {
		// Minted once and stored before the first request, so that a rerun
		// after a crash resumes with it.
		if key, err = state.keyFor(id, client.NewKey); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
			return exitFailed
		}
	}
	in := client.UploadInput{Key: key, ContentType: o.contentType, RateLimit: o.limitRate}
	var bar *progressbar.ProgressBar
	if showProgress {
		in.Progress = func(sent, total int64) {
			if bar == nil {
				bar = progressbar.DefaultBytes(total, filepath.Base(file))
			}
			_ = bar.Set64(sent)
		}
	}
	res, err := c.Upload(ctx, file, in)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
		var e *client.Error
		switch {
		case ctx.Err() != nil:
			return exitInterrupted
		case errors.As(err, &e) && e.Exhausted:
			fmt.Fprintf(stderr, "upload: %s: run the same command again to resume (key %s)\n", file, key)
			return exitExhausted
		case errors.As(err, &e) && e.StatusCode >= 400 && e.StatusCode < 500:
			_ = state.forget(id) // the same request will be refused again
			return exitRejected
		}
		return exitFailed
	}
	if o.key == "" {
		if err := state.forget(id); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		}
	}
	if o.json {
		line, _ := json.Marshal(struct {
			File     string     `json:"file"`
			Key      string     `json:"key"`
			Replayed bool       `json:"replayed"`
			Upload   api.Upload `json:"upload"`
		}{file, res.Key, res.Replayed, res.Upload})
		fmt.Fprintln(stdout, string(line))
	} else {
		note := ""
		if res.Replayed {
			note = " (already uploaded with this key)"
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s%s\n", file, res.Upload.Status, res.Upload.UploadID, note)
	}
	return exitOK
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
