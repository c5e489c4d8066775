// Command smoke checks a deployed onceupload stack end to end, as a user
// relies on it: a create and its replay, a reused key, the PUT and its
// refused repeat, finalize's record and the status route, a multipart upload
// resumed and completed, an unsigned x-amz-* header refused, and CORS for an
// origin. It prints one line per check and exits 0 only if none failed.
//
//	smoke --api https://abc123.execute-api.eu-west-1.amazonaws.com [--origin https://app.example] [--timeout 120s] [--content-type text/plain]
//
// A JWT deployment's token is read from ONCEUPLOAD_TOKEN and never printed.
// Everything it makes is named onceupload-smoke-<run>-…; it prints every
// upload id and key, and aborts its own multipart upload when that check
// fails. make smoke API=… runs it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the command: flags in args, the token from getenv, the report on
// stdout, usage errors on stderr. It returns the exit code: 0 when no check
// failed, 1 when one did, 2 for bad usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	api := fs.String("api", "", "the deployed API's base URL (the stack's ApiUrl output)")
	origin := fs.String("origin", "", "a browser origin whose CORS to check on the API and the bucket (e.g. https://app.example); none skips the CORS checks")
	timeout := fs.Duration("timeout", 120*time.Second, "how long to wait for an upload to be recorded completed")
	contentType := fs.String("content-type", "text/plain", "the media type of the files it uploads (one the deployment's ALLOWED_CONTENT_TYPES allows)")
	runName := fs.String("run", "", "the run's name in what it makes (onceupload-smoke-<run>-…); default: the time and a random suffix")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: smoke --api URL [--origin ORIGIN] [--timeout 120s] [--content-type text/plain] [--run NAME]")
		fmt.Fprintln(stderr, "A JWT deployment's token comes from ONCEUPLOAD_TOKEN (never printed).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "smoke: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	base, err := parseBase(*api)
	if err != nil {
		fmt.Fprintf(stderr, "smoke: --api: %v\n", err)
		return 2
	}
	if *origin != "" {
		if o, err := url.Parse(*origin); err != nil || (o.Scheme != "http" && o.Scheme != "https") || o.Host == "" || (o.Path != "" && o.Path != "/") {
			fmt.Fprintf(stderr, "smoke: --origin %q is not an origin (scheme://host[:port])\n", *origin)
			return 2
		}
	}
	if mt, _, err := mime.ParseMediaType(*contentType); err != nil || mt != strings.ToLower(*contentType) {
		fmt.Fprintf(stderr, "smoke: --content-type %q is not a media type (type/subtype, lower case)\n", *contentType)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "smoke: --timeout must be positive")
		return 2
	}
	name := *runName
	if name == "" {
		name = newRunName(time.Now())
	}
	s := &smoke{
		api: base, origin: *origin, token: getenv("ONCEUPLOAD_TOKEN"), contentType: *contentType, timeout: *timeout, run: name,
		http: &http.Client{Timeout: 60 * time.Second}, out: stdout, poll: time.Second,
	}
	if s.runChecks(ctx) > 0 {
		return 1
	}
	return 0
}

// parseBase checks the API's base URL: http or https, a host, no query.
func parseBase(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("required (the stack's ApiUrl output)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q has a query or fragment", raw)
	}
	return u, nil
}

// newRunName is the time and 4 random hex digits: two runs in one second
// still make different keys and files.
func newRunName(now time.Time) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b)
}
