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
	// Read from the flags above: --part-size in bytes, --proxy as a URL.
	partSizeBytes int64
	proxyURL      *url.URL
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
	o, files, code := parseArgs(args, stderr)
	if code >= 0 {
		return code
	}
	scr := &screen{w: stderr, quiet: o.quiet}
	c, err := newClient(o, scr, stderr)
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
		code, unreachable := uploadOne(ctx, c, state, file, o, scr, stdout, stderr)
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

// newClient is the API client the options ask for: its retries, its
// logger, its proxy, its token, and the retry lines on the screen.
func newClient(o options, scr *screen, stderr io.Writer) (*client.Client, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	transport := client.NewTransport()
	if o.proxyURL != nil {
		transport.Proxy = http.ProxyURL(o.proxyURL)
	}
	return client.New(o.api, func(co *client.Options) {
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
}

// uploadOne uploads file and returns the exit code; unreachable is true
// when the API cannot be reached as --api spells it (a failure that
// waiting cannot fix, before it answered): the run ends.
func uploadOne(ctx context.Context, c *client.Client, state *stateFile, file string, o options, scr *screen, stdout, stderr io.Writer) (code int, unreachable bool) {
	r := &fileRun{file: file}
	partSize, code, done := r.begin(state, o, stdout, stderr)
	if done {
		return code, false
	}
	in := r.input(o, partSize, state, scr, stderr)
	scr.start(file)
	defer scr.start("")
	res, err := c.Upload(ctx, file, in)
	r.stored.upload = r.created
	if bar := scr.takeBar(); bar != nil {
		if err == nil {
			_ = bar.Finish()
		} else {
			_ = bar.Exit() // as far as it got: never full on a failure
			fmt.Fprintln(stderr)
		}
	}
	if err != nil {
		return r.failed(ctx, err, c, state, o, stderr)
	}
	if o.key == "" {
		if err := state.completed(r.id, res.Upload); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		}
	}
	note := ""
	if !r.minted { // else no earlier run had the key (a replay is a lost answer's)
		note = resultNote(res)
	}
	report(stdout, o, file, res.Key, res.Replayed, res.Upload, note)
	return exitOK, false
}

// fileRun is one file's upload as the command follows it: its key, what
// the create answered and what S3 holds, for the lines that report it.
type fileRun struct {
	file, id, key string
	// minted: the key is this run's, so no earlier run sent it.
	minted bool
	// createdNow: the create answered in this run; created is what it
	// answered, the upload to abort if the file cannot complete it.
	createdNow bool
	created    *api.Upload
	stored     stored
}

// begin finds the file's key: --key, else the one the state file
// remembers for it, else a new one, stored before the first request so
// that a rerun after a crash resumes with it. done is true when the file
// needs nothing (it was uploaded within the window) or cannot start; code
// is then its exit code. partSize is the cut the key stands for.
func (r *fileRun) begin(state *stateFile, o options, stdout, stderr io.Writer) (partSize int64, code int, done bool) {
	id, err := identify(o.api, r.file)
	if err != nil {
		fmt.Fprintf(stderr, "upload: %v\n", err)
		return 0, exitFailed, true
	}
	r.id, r.key, partSize = id, o.key, o.partSizeBytes
	if r.key != "" {
		return partSize, exitOK, false
	}
	e, err := state.entryFor(id, func() string { r.minted = true; return client.NewKey() })
	if err != nil {
		fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		return 0, exitFailed, true
	}
	if e.Completed != nil && e.Upload != nil {
		report(stdout, o, r.file, e.Key, true, *e.Upload, fmt.Sprintf("already uploaded with this key at %s; nothing sent", e.Completed.Format(time.RFC3339)))
		return 0, exitOK, true
	}
	r.key = e.Key
	if e.PartSize != 0 {
		partSize = e.PartSize // the key stands for the file cut as before
	}
	return partSize, exitOK, false
}

// input is the client's upload of the file, with hooks that keep the
// state file, the screen and r up to date as it goes.
func (r *fileRun) input(o options, partSize int64, state *stateFile, scr *screen, stderr io.Writer) client.UploadInput {
	in := client.UploadInput{Key: r.key, ContentType: o.contentType, RateLimit: o.limitRate, PartSize: partSize, Parallel: o.parallel}
	in.OnCreated = func(_ string, u *api.Upload) {
		r.createdNow, r.created = true, u
		if o.key != "" {
			return
		}
		if err := state.created(r.id, u); err != nil {
			fmt.Fprintf(stderr, "upload: state file: %v\n", err)
		}
	}
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
			scr.progress(max(sent-base, 0), total-base, func(total int64) meter { return o.newBar(total, filepath.Base(r.file), stderr) })
		}
	}
	// What S3 holds, for the line that says so if the upload stops short:
	// the bar counts the bytes in flight too, which S3 does not hold until
	// their PUT is answered. (Called one call at a time, and never once
	// Upload has returned.)
	in.OnStored = func(parts int, bytes int64) { r.stored.parts, r.stored.bytes = parts, bytes }
	if info, err := os.Stat(r.file); err == nil {
		r.stored.size = info.Size()
	}
	return in
}

// failed says why the upload of the file stopped, what S3 holds and what
// a rerun does; it forgets the key when no rerun may use it, and aborts
// an upload whose parts are not the file's. It returns the exit code, and
// whether the API cannot be reached at all (the run ends).
func (r *fileRun) failed(ctx context.Context, err error, c *client.Client, state *stateFile, o options, stderr io.Writer) (code int, unreachable bool) {
	var e *client.Error
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "upload: %s: interrupted: %s (key %s)\n", r.file, r.stored, r.key)
		return exitInterrupted, false
	case errors.As(err, &e) && e.Fault != nil && !e.Exhausted:
		// Waiting cannot fix it: one sentence with the cause and the
		// host, at once, instead of retries for minutes.
		fmt.Fprintf(stderr, "upload: %s\n", faultAdvice(e, o.api, r.file, !e.Storage))
		if r.created != nil {
			fmt.Fprintf(stderr, "upload: %s: %s (key %s)\n", r.file, r.stored, r.key)
		} else if e.Op == "create" && r.minted && !e.Reached {
			_ = state.forget(r.id) // no server has seen this key
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
			_ = state.forget(r.id) // nothing was created
		}
		return exitFailed, false
	case errors.As(err, &e) && e.StatusCode == http.StatusUnauthorized && (e.Gateway || e.Code == api.CodeUnauthenticated):
		fmt.Fprintf(stderr, "upload: %s: the API refused the token (%v). Run the same command again with a valid token (--token, --token-command or --token-file): it resumes where this run stopped (key %s)\n", r.file, err, r.key)
		return exitRejected, false
	case errors.As(err, &e) && e.StatusCode == http.StatusTooManyRequests && e.Code == client.CodeTooManyUploads:
		// Final: a place frees only when another upload in parts
		// ends, never with time. Nothing was created, so the key is
		// dropped, as for any refused create.
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		fmt.Fprintf(stderr, "upload: %s: not started: the server already holds as many unfinished uploads in parts for you as it allows, and retrying does not free a place. Finish some of them (run upload again on their files) or abort them (DELETE /uploads/{uploadId} on the API), then run this again.\n", r.file)
		if open, err := state.unfinished(o.api); err == nil && len(open) > 0 {
			fmt.Fprintf(stderr, "upload: unfinished uploads in parts that %s remembers (run upload again on them to finish them): %s\n", o.state, strings.Join(open, ", "))
		}
		_ = state.forget(r.id)
		return exitRejected, false
	case errors.As(err, &e) && e.Code == client.CodePartsMismatch:
		// Final: S3 holds parts under this key with other bytes (the
		// file changed though its size and time did not, or --key is
		// another file's). The key must not store a mix of the two.
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		if e.Op != "verify" { // "verify": the upload is completed (another file's): nothing to abort
			abortPending(ctx, c, r.created, r.file, stderr)
		}
		if o.key != "" {
			fmt.Fprintf(stderr, "upload: %s: the parts stored under --key %s are not this file's; give another --key, or none for a new one\n", r.file, r.key)
		} else {
			_ = state.forget(r.id) // a new run mints a new key
			fmt.Fprintf(stderr, "upload: %s: the parts stored under this file's key are not its bytes (it changed since the upload began); the key is forgotten: run the same command again to upload it afresh with a new key\n", r.file)
		}
		return exitRejected, false
	case errors.As(err, &e) && e.Code == client.CodeFileChanged:
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		abortPending(ctx, c, r.created, r.file, stderr) // its parts mix two versions of the file
		if o.key == "" {
			_ = state.forget(r.id) // the file is another one now: a new run mints a new key
			fmt.Fprintf(stderr, "upload: %s: changed while it was being sent, so it was not completed; run the command again once it no longer changes\n", r.file)
		} else {
			fmt.Fprintf(stderr, "upload: %s: changed while it was being sent, so it was not completed; once it no longer changes, run the command again with another --key, or none for a new one\n", r.file)
		}
		return exitFailed, false
	case errors.As(err, &e) && e.Code == client.CodeUploadAborted:
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		_ = state.forget(r.id) // a new run mints a new key
		return exitRejected, false
	case errors.As(err, &e) && e.Exhausted:
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		fmt.Fprintf(stderr, "upload: %s: %s (key %s)\n", r.file, r.stored, r.key)
		return exitExhausted, false
	case errors.As(err, &e) && e.StatusCode >= 400 && e.StatusCode < 500:
		fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
		if e.Op == "create" && e.StatusCode != http.StatusUnauthorized && e.StatusCode != http.StatusForbidden {
			// The API refused the request itself: the same one will be
			// refused again. A refusal later on (S3's, a part's) keeps
			// the key, so a rerun resumes rather than starting over; so
			// does a refused token (401, 403), which says nothing of
			// the request: an earlier run may have created the upload,
			// and a rerun with a valid token resumes it.
			_ = state.forget(r.id)
		}
		return exitRejected, false
	}
	if r.minted && !r.createdNow && !errors.As(err, &e) && !errors.Is(err, context.DeadlineExceeded) {
		// Failed before any request (the file could not be read, say):
		// no server has seen this key.
		_ = state.forget(r.id)
	}
	fmt.Fprintf(stderr, "upload: %s: %v\n", r.file, err)
	return exitFailed, false

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
