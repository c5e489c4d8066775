package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

// startStack starts a local stack for the smoke command, changed by tweak.
func startStack(t *testing.T, name string, tweak func(*devstack.Config)) *devstack.Stack {
	t.Helper()
	testenv.RequireTools(t, "dynoxide")
	cfg := devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-smoke-" + name, Bucket: "uploads-smoke-" + name,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	st, err := devstack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// smokeRun runs the command with args and returns its exit code and the
// result of each check by name (PASS, FAIL, SKIP).
func smokeRun(t *testing.T, args []string, env map[string]string) (int, map[string]string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	results := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(PASS|FAIL|SKIP)  (\S+)`).FindAllStringSubmatch(out.String(), -1) {
		results[m[2]] = m[1]
	}
	t.Logf("smoke %s → %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, results, out.String()
}

// every check the command makes, in its order.
var checks = []string{"create", "replay", "key-reuse", "put", "put-again", "finalize", "status", "unsigned-header", "multipart", "cors-api", "cors-storage"}

func want(t *testing.T, results map[string]string, expected map[string]string) {
	t.Helper()
	for _, c := range checks {
		w := expected[c]
		if w == "" {
			w = "PASS"
		}
		if results[c] != w {
			t.Errorf("check %s: %q, want %s", c, results[c], w)
		}
	}
}

// The local stack, on Versity Gateway or MinIO, passes every check.
func TestSmokeLocalStack(t *testing.T) {
	st := startStack(t, "ok", func(c *devstack.Config) { c.Origins = []string{"https://app.example"} })
	code, results, out := smokeRun(t, []string{"--api", st.APIURL, "--origin", "https://app.example", "--timeout", "60s", "--run", "ok"}, nil)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	want(t, results, nil)
	for _, made := range []string{"onceupload-smoke-ok-single", "onceupload-smoke-ok-multipart", "onceupload-smoke-ok-unsigned"} {
		if !strings.Contains(out, "Idempotency-Key "+made) {
			t.Errorf("the report does not name the key %s it made", made)
		}
	}
}

// Both local servers refuse an unsigned x-amz-* header; a server that
// stores it is skipped with its reason, and on AWS S3 it is a failure.
func TestJudgeUnsigned(t *testing.T) {
	stored := &answer{what: "PUT", status: 200}
	if _, err := judgeUnsigned(stored, "127.0.0.1:9000"); !errors.As(err, new(skipped)) || !strings.Contains(err.Error(), "does not check") {
		t.Errorf("a local server that stores it: %v, want a skip saying why", err)
	}
	for _, host := range []string{"bucket.s3.eu-west-1.amazonaws.com", "s3.cn-north-1.amazonaws.com.cn"} {
		if _, err := judgeUnsigned(stored, host); err == nil || errors.As(err, new(skipped)) {
			t.Errorf("%s stores it: %v, want a failure", host, err)
		}
	}
	for _, status := range []int{400, 403} {
		if d, err := judgeUnsigned(&answer{what: "PUT", status: status, body: []byte("<Error><Code>AccessDenied</Code></Error>")}, "x.amazonaws.com"); err != nil || !strings.Contains(d, "AccessDenied") {
			t.Errorf("%d AccessDenied: %q %v, want a pass", status, d, err)
		}
	}
	if _, err := judgeUnsigned(&answer{what: "PUT", status: 500}, "x.amazonaws.com"); err == nil {
		t.Error("a 500 passes")
	}
}

// With finalize cut off (no S3 notification reaches it), the status route
// still completes a single PUT (it asks S3), so the check that fails is
// "finalize": a replay of the create, which never asks S3, stays pending.
// Nothing else fails, and the exit code says one did.
func TestSmokeSeesFinalizeMissing(t *testing.T) {
	st := startStack(t, "nofinalize", func(c *devstack.Config) {
		c.Deliver = func() (int, time.Duration) { return 0, 0 }
	})
	code, results, out := smokeRun(t, []string{"--api", st.APIURL, "--timeout", "4s", "--run", "nofinalize"}, nil)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want(t, results, map[string]string{"finalize": "FAIL", "cors-api": "SKIP", "cors-storage": "SKIP"})
	if !strings.Contains(out, "finalize did not run or failed") {
		t.Error("the finalize failure does not say why")
	}
}

// With the CORS of the API and the bucket narrowed to another origin, both
// CORS checks fail for this one, and nothing else does.
func TestSmokeSeesCORSNarrowed(t *testing.T) {
	st := startStack(t, "cors", func(c *devstack.Config) { c.Origins = []string{"https://other.example"} })
	code, results, _ := smokeRun(t, []string{"--api", st.APIURL, "--origin", "https://app.example", "--timeout", "60s", "--run", "cors"}, nil)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want(t, results, map[string]string{"cors-api": "FAIL", "cors-storage": "FAIL"})
}

// A token from ONCEUPLOAD_TOKEN is sent as the bearer (the local stack
// makes its subject the tenant) and never printed.
func TestSmokeTokenNeverPrinted(t *testing.T) {
	st := startStack(t, "token", nil)
	const token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzbW9rZS10ZXN0ZXIiLCJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIn0."
	code, results, out := smokeRun(t, []string{"--api", st.APIURL, "--timeout", "60s", "--run", "token"}, map[string]string{"ONCEUPLOAD_TOKEN": token})
	if code != 0 || results["create"] != "PASS" {
		t.Errorf("exit %d, create %s", code, results["create"])
	}
	if strings.Contains(out, token) || strings.Contains(out, "eyJ") {
		t.Error("the report prints the token")
	}
	// The same run without the token is another tenant: its keys are new
	// there, so its create is a first create again, not a replay.
	code, results, _ = smokeRun(t, []string{"--api", st.APIURL, "--timeout", "60s", "--run", "token"}, nil)
	if code != 0 || results["create"] != "PASS" {
		t.Errorf("the same run without the token: exit %d, create %s; the token was not the tenant", code, results["create"])
	}
}

// A multipart check that fails aborts the upload it made: here a proxy in
// front of the API answers every complete with 503.
func TestSmokeAbortsItsMultipartUploadOnFailure(t *testing.T) {
	st := startStack(t, "abort", nil)
	target, err := url.Parse(st.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete") {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"service_unavailable","message":"refused by the test"}`, http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	code, results, out := smokeRun(t, []string{"--api", front.URL, "--timeout", "60s", "--run", "abort"}, nil)
	if code != 1 || results["multipart"] != "FAIL" {
		t.Fatalf("exit %d, multipart %s; want 1 and FAIL", code, results["multipart"])
	}
	id := regexp.MustCompile(`made upload (\S+) \(Idempotency-Key onceupload-smoke-abort-multipart`).FindStringSubmatch(out)
	if id == nil || !strings.Contains(out, "aborted upload "+id[1]) {
		t.Fatalf("the report does not say it aborted its multipart upload")
	}
	resp, err := http.Get(st.APIURL + "/uploads/" + id[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u api.Upload
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || u.Status != api.StatusAborted {
		t.Errorf("the multipart upload after the run: %s (%v), want aborted", u.Status, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--api", "ftp://x"},
		{"--api", "http://127.0.0.1:1/?q=1"},
		{"--api", "http://127.0.0.1:1", "--origin", "https://app.example/path"},
		{"--api", "http://127.0.0.1:1", "--timeout", "0s"},
		{"--api", "http://127.0.0.1:1", "--content-type", "not a type"},
		{"--api", "http://127.0.0.1:1", "extra"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, func(string) string { return "" }, &out, &errOut); code != 2 || errOut.Len() == 0 || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want 2 and a reason", args, code, errOut.String(), out.String())
		}
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }
