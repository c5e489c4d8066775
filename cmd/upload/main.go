// Command upload sends files to an onceupload API so that each is stored
// exactly once, however often it is retried or re-run.
//
//	upload [flags] FILE...
//
// Each file gets one Idempotency-Key, stored in a small state file before
// the first request; running the command again after a crash or Ctrl-C
// resumes with the same key, so the file is never stored twice. Files from
// 64 MiB up go in parts, --parallel at a time, starting at once (each
// part is hashed just before it is sent), and a rerun checks the parts S3
// holds against the file and sends only the others. A completed file is remembered for the idempotency
// window: running again on it prints "already uploaded" and sends
// nothing. Each file ends in a line on stdout: its name, status and upload
// id, tab-separated ("photo.jpg\tcompleted\tupload 1f3a…"), with a note
// when an earlier run had begun it. A failure that waiting cannot fix (no
// such host, nothing listening, the wrong scheme for the port, a
// certificate that fails verification) ends the run at once with its
// cause and host; stopped short, the command says what S3 holds and what a
// rerun sends. Exit codes:
// 0 all uploaded, 1 other failure (a file cannot be read, the URL is not
// an onceupload API, a failure that waiting cannot fix, …), 2 usage (an
// --api that is not an absolute http(s) URL; a FILE that is missing, a
// directory or empty is refused before anything is sent),
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
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the process at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

type options struct {
	api, token, contentType, key, state, proxy, partSize string
	tokenCommand, tokenFile                              string
	json, quiet, verbose                                 bool
	maxAttempts, parallel                                int
	deadline, retryBudget, window                        time.Duration
	limitRate                                            int64
	newBar                                               func(total int64, name string, w io.Writer) meter
}

// meter is the progress bar.
type meter interface {
	Set64(int64) error
	// Finish fills the bar; Exit leaves it as it is (on a failure or an
	// interrupt, where filling it would claim bytes S3 does not have).
	Finish() error
	Exit() error
	// Clear erases the bar from its line, for a message; the next Set64
	// draws it again.
	Clear() error
}

// run is the command; ctx ends on Ctrl-C. newBar makes progress bars
// (nil: a terminal bar when stderr is a terminal).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, newBar func(total int64, name string, w io.Writer) meter) int {
	cacheDir, _ := os.UserCacheDir()
	var o options
	fs := flag.NewFlagSet("upload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.api, "api", envOr("ONCEUPLOAD_API", "http://127.0.0.1:3000"), "API base URL (env ONCEUPLOAD_API). Uploads are remembered per API: spellings of one URL (case, default port, trailing or doubled slashes) are one API; another host name for the same server (localhost, 127.0.0.1) is another, which uploads a file again")
	fs.StringVar(&o.token, "token", os.Getenv("ONCEUPLOAD_TOKEN"), "bearer token for the API's authorizer (env ONCEUPLOAD_TOKEN); fixed for the whole run")
	fs.StringVar(&o.tokenCommand, "token-command", "", "shell command that prints a bearer token; run again when the API refuses the token (401) or a JWT's exp is a minute away")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token, read again for every request (so a renewed file is followed)")
	fs.StringVar(&o.contentType, "content-type", "", "media type of the files (default: from the extension, else sniffed)")
	fs.StringVar(&o.key, "key", "", "Idempotency-Key to use (one file only; default: a new key, remembered until done)")
	fs.BoolVar(&o.json, "json", false, "print one JSON line per file with the server's final response")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&o.verbose, "v", false, "log every retry to stderr")
	fs.IntVar(&o.maxAttempts, "max-attempts", client.DefaultMaxAttempts, "attempts per request, the first included (0: no cap, --retry-budget bounds them)")
	fs.DurationVar(&o.retryBudget, "retry-budget", client.DefaultRetryBudget, "stop retrying a request when the next wait would end this long after its first attempt (0: no budget)")
	fs.DurationVar(&o.deadline, "deadline", time.Hour, "give up on a file after this long")
	fs.Int64Var(&o.limitRate, "limit-rate", 0, "cap the upload rate in bytes per second (0: no cap)")
	fs.StringVar(&o.state, "state", filepath.Join(cacheDir, "onceupload", "pending.json"), "file that remembers the keys of unfinished uploads, and of completed ones for --idempotency-window")
	fs.DurationVar(&o.window, "idempotency-window", 24*time.Hour, "how long a completed upload is remembered (the server's IDEMPOTENCY_TTL): running again on it within this time prints \"already uploaded\" and sends nothing")
	fs.StringVar(&o.partSize, "part-size", "0", "send files in parts of this size (bytes, or with KiB/MiB/GiB; 5MiB to 5GiB); 0: parts from 64 MiB up, of max(8 MiB, size/10000); -1: one PUT (at most 5 GiB)")
	fs.IntVar(&o.parallel, "parallel", client.DefaultParallel, "parts sent at once")
	fs.StringVar(&o.proxy, "proxy", "", "send every request (API and S3) through this HTTP proxy, loopback addresses included (HTTP(S)_PROXY apply otherwise)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: upload [flags] FILE...

Uploads each FILE to an onceupload API, exactly once. If the network fails,
the command retries; if the command itself is stopped, run it again: it
resumes each unfinished file with the same Idempotency-Key, so nothing is
stored twice.

Files from 64 MiB up go in parts, --parallel at a time. They start at
once: each part is hashed just before it is sent, with no pass over the
whole file first, so the result of an upload in parts has S3's
compositeSha256 (of the parts' SHA-256s) and no whole-file sha256. Do not
change a file while it is sent: the command notices and does not complete
it. Stopped (Ctrl-C, a crash, a network that stays down), the same command
checks the parts S3 holds against the file (reading those parts) and sends
only the others; if they are not the file's bytes (it changed though its
size and time did not), it says so, sends nothing, aborts the upload (S3
drops its parts) and forgets the key, and the next run uploads the file
afresh with a new key. Run again on a file
that completed, it prints "already uploaded" with the upload id and sends
nothing.

Tokens: --token is fixed for the run; a JWT typically lasts an hour, and
one that expires mid-upload ends the run (exit 3). With --token-command
(run again for a fresh token) or --token-file (read again), the command
gets a fresh token when the API answers 401 and repeats that request once.
Either way, running the same command again with a valid token resumes
the upload where it stopped (same key; only the missing parts are sent).

Examples:
  upload photo.jpg
  upload --parallel 8 video.mov
  upload --api https://abc.execute-api.eu-west-1.amazonaws.com --token "$JWT" *.pdf
  upload --token-command 'aws cognito-idp initiate-auth --auth-flow REFRESH_TOKEN_AUTH --client-id "$CLIENT_ID" --auth-parameters REFRESH_TOKEN="$REFRESH" --query AuthenticationResult.IdToken --output text' video.mov
  upload --json report.pdf | jq .upload.uploadId

While it works it says so on stderr (unless --quiet): each retry and its
wait, a resume (the check of the parts S3 holds, then how many it holds;
the bar, its speed and time left count only what this run sends), and
completion once every byte is sent. Sizes are in 1024-based units (KiB, MiB, GiB).
Stopped short (Ctrl-C, retries that ran out), it says what S3 holds and
what a rerun sends: the bar counts the bytes in flight too. Each file ends
in a line on stdout: its name, status and upload id separated by tabs
("photo.jpg", "completed", "upload 1f3a…"), and a note when an earlier run
had begun it ("already uploaded with this key; nothing sent" only when
nothing was sent).

A failure that waiting cannot fix ends the run at once, exit 1, with its
cause and host: before the API has answered (and while no attempt of
the request may have reached it), a host that DNS does not know, nothing
listening, https:// at a plain-HTTP port or the reverse, a
certificate that fails verification (that one, the API's or S3's, at any
time). No line shows a presigned URL.

Exit codes: 0 done, 1 failed, 2 usage (also an --api that is not an
absolute http(s) URL, a FILE that is missing, a directory or empty:
refused before anything is sent), 3 rejected by the
server, 4 gave up retrying (safe to run again), 130 interrupted.

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

	tokenFlags := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "token" || f.Name == "token-command" || f.Name == "token-file" {
			tokenFlags++
		}
	})
	if tokenFlags > 1 {
		fmt.Fprintln(stderr, "upload: give one of --token, --token-command and --token-file")
		return exitUsage
	}
	partSize, err := parseSize(o.partSize)
	if err != nil {
		fmt.Fprintf(stderr, "upload: --part-size: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	transport := client.NewTransport()
	if o.proxy != "" {
		u, err := url.Parse(o.proxy)
		if err != nil || u.Host == "" {
			fmt.Fprintf(stderr, "upload: --proxy %q: want http://host:port\n", o.proxy)
			return exitUsage
		}
		transport.Proxy = http.ProxyURL(u)
	}
	scr := &screen{w: stderr, quiet: o.quiet}
	c, err := client.New(o.api, func(co *client.Options) {
		co.MaxAttempts, co.RetryBudget, co.Deadline, co.Logger = o.maxAttempts, o.retryBudget, o.deadline, logger
		co.OnRetry = func(_ string, _ int, wait time.Duration, reason string) {
			scr.say("retrying in %s: %s", seconds(wait), reason)
		}
		co.HTTPClient = &http.Client{Transport: transport}
		switch {
		case o.tokenCommand != "":
			co.Token = (&tokenSource{command: o.tokenCommand}).token
		case o.tokenFile != "":
			co.Token = (&tokenSource{file: o.tokenFile}).token
		case o.token != "":
			co.Token = (&tokenSource{fixed: o.token}).token
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "upload: --api: %v\n", err)
		return exitUsage
	}
	if bad := refuseFiles(files, stderr); bad {
		return exitUsage
	}
	state := &stateFile{path: o.state, window: o.window}
	o.newBar = newBar
	if o.newBar == nil && isTerminal(stderr) {
		o.newBar = terminalBar
	}
	if o.quiet || o.json {
		o.newBar = nil
	}
	worst := exitOK
	for _, file := range files {
		code, unreachable := uploadOne(ctx, c, state, file, o, partSize, scr, stdout, stderr)
		worst = max(worst, code)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		if unreachable {
			break // the next file would fail the same way
		}
	}
	return worst
}

// uploadOne uploads file and returns the exit code; unreachable is true
// when the API cannot be reached as --api spells it (a failure that
// waiting cannot fix, before it answered): the run ends.
func uploadOne(ctx context.Context, c *client.Client, state *stateFile, file string, o options, partSize int64, scr *screen, stdout, stderr io.Writer) (code int, unreachable bool) {
	id, err := identify(o.api, file)
	if err != nil {
		fmt.Fprintf(stderr, "upload: %v\n", err)
		return exitFailed, false
	}
	key := o.key
	minted := false // the key is this run's: no earlier run sent it
	if key == "" {
		// Minted once and stored before the first request, so that a rerun
		// after a crash resumes with it.
		e, err := state.entryFor(id, func() string { minted = true; return client.NewKey() })
		if err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
			return exitFailed, false
		}
		if e.Completed != nil && e.Upload != nil {
			report(stdout, o, file, e.Key, true, *e.Upload, fmt.Sprintf("already uploaded with this key at %s; nothing sent", e.Completed.Format(time.RFC3339)))
			return exitOK, false
		}
		key = e.Key
		if e.PartSize != 0 {
			partSize = e.PartSize // the key stands for the file cut as before
		}
	}
	in := client.UploadInput{Key: key, ContentType: o.contentType, RateLimit: o.limitRate, PartSize: partSize, Parallel: o.parallel}
	createdNow := false
	var created *api.Upload // what the create answered: the upload to abort if the file cannot complete it
	in.OnCreated = func(_ string, u *api.Upload) {
		createdNow, created = true, u
		if o.key != "" {
			return
		}
		if err := state.created(id, u); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		}
	}
	scr.start(file)
	defer scr.start("")
	// The bar counts this run's bytes only (a resumed upload's held parts
	// are announced, not counted), so its speed and time left are true.
	var base int64
	in.OnCheck = func(held int, heldBytes int64) {
		scr.say("checking the %d parts S3 holds (%s) against the file", held, iec(heldBytes))
	}
	in.OnResume = func(held, parts int, heldBytes, total int64) {
		base = heldBytes
		scr.say("resuming: %d of %d parts are stored (%s of %s); sending the other %s", held, parts, iec(heldBytes), iec(total), iec(total-heldBytes))
	}
	var completing bool
	in.OnCompleting = func() {
		if !completing {
			completing = true
			scr.finishBar()
			scr.say("all bytes sent; completing the upload")
		}
	}
	if o.newBar != nil {
		in.Progress = func(sent, total int64) {
			scr.progress(max(sent-base, 0), total-base, func(total int64) meter { return o.newBar(total, filepath.Base(file), stderr) })
		}
	}
	// What S3 holds, for the line that says so if the upload stops short:
	// the bar counts the bytes in flight too, which S3 does not hold until
	// their PUT is answered. (Called one call at a time, and never once
	// Upload has returned.)
	var stored stored
	in.OnStored = func(parts int, bytes int64) { stored.parts, stored.bytes = parts, bytes }
	if info, err := os.Stat(file); err == nil {
		stored.size = info.Size()
	}
	res, err := c.Upload(ctx, file, in)
	stored.upload = created
	if bar := scr.takeBar(); bar != nil {
		if err == nil {
			_ = bar.Finish()
		} else {
			_ = bar.Exit() // as far as it got: never full on a failure
			fmt.Fprintln(stderr)
		}
	}
	if err != nil {
		var e *client.Error
		switch {
		case ctx.Err() != nil:
			fmt.Fprintf(stderr, "upload: %s: interrupted: %s (key %s)\n", file, stored, key)
			return exitInterrupted, false
		case errors.As(err, &e) && e.Fault != nil && !e.Exhausted:
			// Waiting cannot fix it: one sentence with the cause and the
			// host, at once, instead of retries for minutes.
			fmt.Fprintf(stderr, "upload: %s\n", faultAdvice(e, o.api, file, !e.Storage))
			if created != nil {
				fmt.Fprintf(stderr, "upload: %s: %s (key %s)\n", file, stored, key)
			} else if e.Op == "create" && minted && !e.Reached {
				_ = state.forget(id) // no server has seen this key
			}
			return exitFailed, !e.Storage
		case errors.As(err, &e) && e.NotOnceupload && !e.Exhausted:
			// Only when the API never answered this run: once it has, the
			// client retries a foreign answer (a captive portal, a proxy's
			// 403 or 407 page) as no answer. Exhausted, the foreign answers
			// were retried (that, or a proxy's 503 page while the API was
			// out of reach): giving up retrying, below, with the key kept.
			// A create's key is kept too if an earlier attempt may have
			// reached the API (e.Reached).
			fmt.Fprintf(stderr, "upload: %s is not a onceupload API: %s answered %s. Point --api (or ONCEUPLOAD_API) at the API's base URL: the stack's ApiUrl output, or http://127.0.0.1:3000 for make dev.\n", o.api, e.Op, e.Answer)
			if e.Op == "create" && !e.Reached {
				_ = state.forget(id) // nothing was created
			}
			return exitFailed, false
		case errors.As(err, &e) && e.StatusCode == http.StatusUnauthorized && (e.Gateway || e.Code == api.CodeUnauthenticated):
			fmt.Fprintf(stderr, "upload: %s: the API refused the token (%v). Run the same command again with a valid token (--token, --token-command or --token-file): it resumes where this run stopped (key %s)\n", file, err, key)
			return exitRejected, false
		case errors.As(err, &e) && e.StatusCode == http.StatusTooManyRequests && e.Code == client.CodeTooManyUploads:
			// Final: a place frees only when another upload in parts
			// ends, never with time. Nothing was created, so the key is
			// dropped, as for any refused create.
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			fmt.Fprintf(stderr, "upload: %s: not started: the server already holds as many unfinished uploads in parts for you as it allows, and retrying does not free a place. Finish some of them (run upload again on their files) or abort them (DELETE /uploads/{uploadId} on the API), then run this again.\n", file)
			if open, err := state.unfinished(o.api); err == nil && len(open) > 0 {
				fmt.Fprintf(stderr, "upload: unfinished uploads in parts that %s remembers (run upload again on them to finish them): %s\n", o.state, strings.Join(open, ", "))
			}
			_ = state.forget(id)
			return exitRejected, false
		case errors.As(err, &e) && e.Code == client.CodePartsMismatch:
			// Final: S3 holds parts under this key with other bytes (the
			// file changed though its size and time did not, or --key is
			// another file's). The key must not store a mix of the two.
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			if e.Op != "verify" { // "verify": the upload is completed (another file's): nothing to abort
				abortPending(ctx, c, created, file, stderr)
			}
			if o.key != "" {
				fmt.Fprintf(stderr, "upload: %s: the parts stored under --key %s are not this file's; give another --key, or none for a new one\n", file, key)
			} else {
				_ = state.forget(id) // a new run mints a new key
				fmt.Fprintf(stderr, "upload: %s: the parts stored under this file's key are not its bytes (it changed since the upload began); the key is forgotten: run the same command again to upload it afresh with a new key\n", file)
			}
			return exitRejected, false
		case errors.As(err, &e) && e.Code == client.CodeFileChanged:
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			abortPending(ctx, c, created, file, stderr) // its parts mix two versions of the file
			if o.key == "" {
				_ = state.forget(id) // the file is another one now: a new run mints a new key
				fmt.Fprintf(stderr, "upload: %s: changed while it was being sent, so it was not completed; run the command again once it no longer changes\n", file)
			} else {
				fmt.Fprintf(stderr, "upload: %s: changed while it was being sent, so it was not completed; once it no longer changes, run the command again with another --key, or none for a new one\n", file)
			}
			return exitFailed, false
		case errors.As(err, &e) && e.Code == client.CodeUploadAborted:
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			_ = state.forget(id) // a new run mints a new key
			return exitRejected, false
		case errors.As(err, &e) && e.Exhausted:
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			fmt.Fprintf(stderr, "upload: %s: %s (key %s)\n", file, stored, key)
			return exitExhausted, false
		case errors.As(err, &e) && e.StatusCode >= 400 && e.StatusCode < 500:
			fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
			if e.Op == "create" && e.StatusCode != http.StatusUnauthorized && e.StatusCode != http.StatusForbidden {
				// The API refused the request itself: the same one will be
				// refused again. A refusal later on (S3's, a part's) keeps
				// the key, so a rerun resumes rather than starting over; so
				// does a refused token (401, 403), which says nothing of
				// the request: an earlier run may have created the upload,
				// and a rerun with a valid token resumes it.
				_ = state.forget(id)
			}
			return exitRejected, false
		}
		if minted && !createdNow && !errors.As(err, &e) && !errors.Is(err, context.DeadlineExceeded) {
			// Failed before any request (the file could not be read, say):
			// no server has seen this key.
			_ = state.forget(id)
		}
		fmt.Fprintf(stderr, "upload: %s: %v\n", file, err)
		return exitFailed, false
	}
	if o.key == "" {
		if err := state.completed(id, res.Upload); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		}
	}
	note := ""
	if !minted { // else no earlier run had the key (a replay is a lost answer's)
		note = resultNote(res)
	}
	report(stdout, o, file, res.Key, res.Replayed, res.Upload, note)
	return exitOK, false
}

// resultNote says how a completed upload got there, when an earlier run
// may have begun it: "already uploaded" only when this run sent nothing.
func resultNote(res *client.Result) string {
	switch {
	case res.PartsHeld > 0:
		return fmt.Sprintf("resumed: %d of %d parts were stored already, %d sent", res.PartsHeld, res.Upload.Multipart.PartCount, res.PartsSent)
	case !res.Replayed:
		return ""
	case res.PartsSent == 0 && res.Put == 0:
		return "already uploaded with this key; nothing sent"
	case res.Put == client.PutAlreadyStored:
		return "resumed with this key: S3 held the file already (an earlier run stored it)"
	case res.Put == client.PutStored:
		return "resumed with this key: the create was replayed and the whole file sent"
	}
	return fmt.Sprintf("resumed with this key: S3 held none of its parts; %d sent", res.PartsSent)
}

// stored is what S3 holds of a file whose upload stopped short
// (UploadInput.OnStored): upload is what the create answered (nil if it
// did not), size the file's.
type stored struct {
	upload *api.Upload
	parts  int
	bytes  int64
	size   int64
}

// String says what S3 holds and what a rerun sends: "S3 holds 8 of 25
// parts (64 MiB of 200 MiB); run the same command again to resume: it
// sends the other 136 MiB".
func (s stored) String() string {
	switch {
	case s.upload == nil:
		return fmt.Sprintf("nothing is stored yet; run the same command again to resume: it sends all %s", iec(s.size))
	case s.upload.Multipart != nil:
		return fmt.Sprintf("S3 holds %d of %d parts (%s of %s); run the same command again to resume: it sends the other %s",
			s.parts, s.upload.Multipart.PartCount, iec(s.bytes), iec(s.size), iec(s.size-s.bytes))
	case s.parts > 0:
		return "S3 holds all of it; run the same command again to finish"
	}
	return fmt.Sprintf("S3 holds none of it (one PUT stores nothing until it completes); run the same command again to resume: it sends all %s", iec(s.size))
}

// faultAdvice is the one sentence for a failure that waiting cannot fix
// (client.ErrNoSuchHost…): the cause, the host, and what to change. toAPI:
// a request to the API (else to S3, at a URL the API handed out).
func faultAdvice(e *client.Error, apiURL, file string, toAPI bool) string {
	host := e.Host
	if !toAPI {
		return fmt.Sprintf("%s: S3: %s; waiting does not fix it", file, e.FaultSentence())
	}
	switch e.Fault {
	case client.ErrNoSuchHost:
		return e.FaultSentence() + ": check the host in --api (or ONCEUPLOAD_API)"
	case client.ErrConnectionRefused:
		return fmt.Sprintf("nothing answers at %s (connection refused). Is the API running there? Point the command at yours with --api URL or ONCEUPLOAD_API=URL.", apiURL)
	case client.ErrServerSpeaksHTTP:
		return host + " speaks plain HTTP, not HTTPS: use http:// in --api (or ONCEUPLOAD_API)"
	case client.ErrServerSpeaksHTTPS:
		return host + " speaks HTTPS, not plain HTTP: use https:// in --api (or ONCEUPLOAD_API)"
	case client.ErrCertificate:
		return e.FaultSentence() + ": check the host in --api (or ONCEUPLOAD_API), or have this system trust the certificate's authority (SSL_CERT_FILE)"
	}
	return e.Error()
}

// abortTimeout bounds abortPending: the abort is a courtesy, not worth
// the whole retry budget.
const abortTimeout = 30 * time.Second

// abortPending aborts, best-effort, the pending upload in parts that the
// create answered with (u; nil if none was created), when the key it
// stands for is given up: its parts are not this file's, so they would only
// take storage, and one of the tenant's places for unfinished uploads in
// parts, until the server expires them. A completed or aborted upload is
// left alone.
func abortPending(ctx context.Context, c *client.Client, u *api.Upload, file string, stderr io.Writer) {
	if u == nil || u.Status != api.StatusPending || u.Multipart == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, abortTimeout)
	defer cancel()
	if _, err := c.Abort(ctx, u.UploadID); err != nil {
		fmt.Fprintf(stderr, "upload: %s: could not abort upload %s (%v); its parts stay in S3 until it is aborted (DELETE /uploads/%s on the API)\n", file, u.UploadID, err, u.UploadID)
		return
	}
	fmt.Fprintf(stderr, "upload: %s: aborted upload %s: S3 dropped the parts it held\n", file, u.UploadID)
}

// report prints a file's outcome: a JSON line, or file, status, upload id
// (labelled "upload", so that it is not taken for a checksum) and a note,
// separated by tabs: "photo.jpg\tcompleted\tupload 1f3a…".
func report(stdout io.Writer, o options, file, key string, replayed bool, u api.Upload, note string) {
	if o.json {
		line, _ := json.Marshal(struct {
			File     string     `json:"file"`
			Key      string     `json:"key"`
			Replayed bool       `json:"replayed"`
			Note     string     `json:"note,omitempty"`
			Upload   api.Upload `json:"upload"`
		}{file, key, replayed, note, u})
		fmt.Fprintln(stdout, string(line))
		return
	}
	if note != "" {
		note = " (" + note + ")"
	}
	fmt.Fprintf(stdout, "%s\t%s\tupload %s%s\n", file, u.Status, u.UploadID, note)
}

// terminalBar is one progress bar over a file's bytes, across its parts.
func terminalBar(total int64, name string, w io.Writer) meter {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetDescription(name), progressbar.OptionSetWriter(w),
		progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(10), progressbar.OptionThrottle(65*time.Millisecond), progressbar.OptionFullWidth(),
		progressbar.OptionSpinnerType(14), progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
}

// parseSize reads a byte count: digits, optionally followed by K, M or G
// (binary multiples; "KiB", "MB" and the like read the same).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a size (try 16MiB)", s)
	case n == 0 || n == -1 && mult == 1:
		return n, nil
	case n < 0:
		return 0, fmt.Errorf("%q: want 0, -1 or a size", s)
	}
	size := n * mult
	if size/mult != n || size < api.MinPartSize || size > api.MaxPartSize {
		return 0, fmt.Errorf("%q: a part is 5 MiB to 5 GiB", s)
	}
	return size, nil
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

// refuseFiles says which files cannot be uploaded (missing, a directory,
// not a regular file, empty), before anything is sent: true if any.
func refuseFiles(files []string, stderr io.Writer) bool {
	bad := false
	for _, file := range files {
		info, err := os.Stat(file)
		why := ""
		switch {
		case errors.Is(err, fs.ErrNotExist):
			why = "no such file"
		case err != nil:
			why = err.Error()
		case info.IsDir():
			why = "is a directory"
		case !info.Mode().IsRegular():
			why = "not a regular file"
		case info.Size() == 0:
			why = "is empty (the API stores no empty files)"
		}
		if why != "" {
			fmt.Fprintf(stderr, "upload: %s: %s\n", file, why)
			bad = true
		}
	}
	if bad {
		fmt.Fprintln(stderr, "upload: nothing uploaded")
	}
	return bad
}

// screen is what the command says on stderr while it works: the progress
// bar of the file being sent and, between its redraws, a line for each
// retry, a resume and completion. Safe for concurrent use (parts are sent
// in parallel).
type screen struct {
	mu       sync.Mutex
	w        io.Writer
	quiet    bool
	file     string
	bar      meter
	finished bool
}

func (s *screen) start(file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file, s.bar, s.finished = file, nil, false
}

// say prints "upload: FILE: message" on a line of its own.
func (s *screen) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quiet {
		return
	}
	if s.bar != nil && !s.finished {
		_ = s.bar.Clear()
	}
	prefix := "upload: "
	if s.file != "" {
		prefix += s.file + ": "
	}
	fmt.Fprintf(s.w, prefix+format+"\n", args...)
}

// progress sets the bar, made by newBar on the first call.
func (s *screen) progress(sent, total int64, newBar func(total int64) meter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar == nil {
		s.bar = newBar(total)
	}
	if !s.finished {
		_ = s.bar.Set64(sent)
	}
}

// finishBar fills the bar: every byte is in S3.
func (s *screen) finishBar() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar != nil && !s.finished {
		_ = s.bar.Finish()
		s.finished = true
	}
}

// takeBar returns the bar if it is not finished yet, and forgets it.
func (s *screen) takeBar() meter {
	s.mu.Lock()
	defer s.mu.Unlock()
	bar := s.bar
	if s.finished {
		bar = nil
	}
	s.bar = nil
	return bar
}

// seconds is a wait for people: "4 s", "0.3 s".
func seconds(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	}
	return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + " s"
}

// iec is a byte count in 1024-based units, labelled so (as the bar is).
func iec(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
