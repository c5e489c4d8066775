package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// usage is the text of upload --help, before the flags.
const usage = `Usage: upload [flags] FILE...

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
`

// parseArgs reads the flags and the files. code is the exit code to end
// with (help, or a usage error, said on stderr), or -1 to go on.
func parseArgs(args []string, stderr io.Writer) (o options, files []string, code int) {
	cacheDir, _ := os.UserCacheDir()
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
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, nil, exitOK
		}
		return o, nil, exitUsage
	}
	files = fs.Args()
	switch {
	case len(files) == 0:
		fmt.Fprintln(stderr, "upload: no FILE given (see upload --help)")
		return o, nil, exitUsage
	case o.key != "" && len(files) > 1:
		fmt.Fprintln(stderr, "upload: --key needs exactly one FILE")
		return o, nil, exitUsage
	}
	if o.key != "" {
		if _, err := api.ParseIdempotencyKey(o.key); err != nil {
			fmt.Fprintf(stderr, "upload: --key: %v\n", err)
			return o, nil, exitUsage
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
		return o, nil, exitUsage
	}
	var err error
	if o.partSizeBytes, err = parseSize(o.partSize); err != nil {
		fmt.Fprintf(stderr, "upload: --part-size: %v\n", err)
		return o, nil, exitUsage
	}
	if o.proxy != "" {
		u, err := url.Parse(o.proxy)
		if err != nil || u.Host == "" {
			fmt.Fprintf(stderr, "upload: --proxy %q: want http://host:port\n", o.proxy)
			return o, nil, exitUsage
		}
		o.proxyURL = u
	}
	return o, files, -1
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
