package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	ctx := context.Background()
	if code := run(ctx, []string{"--help"}, &out, &errOut, nil); code != exitOK || !strings.Contains(errOut.String(), "Usage: upload") {
		t.Errorf("--help: %d %q", code, errOut.String())
	}
	for _, args := range [][]string{
		{}, {"--key", "k-0123456789abcdef", "a", "b"}, {"--key", "short", "a"}, {"--nope"}, {"--api", "ftp://x", "a"},
		{"--part-size", "4MiB", "a"}, {"--part-size", "6GiB", "a"}, {"--part-size", "lots", "a"}, {"--part-size", "-2", "a"},
		{"--proxy", "nowhere", "a"},
	} {
		errOut.Reset()
		if code := run(ctx, args, &out, &errOut, nil); code != exitUsage || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want %d with a message", args, code, errOut.String(), exitUsage)
		}
	}
	if code := run(ctx, []string{"--state", filepath.Join(t.TempDir(), "s.json"), "/no/such/file"}, &out, &errOut, nil); code != exitUsage {
		t.Errorf("missing file: exit %d, want %d", code, exitUsage)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "-1": -1, "5MiB": 5 << 20, "8M": 8 << 20, "16 MB": 16 << 20, "1GiB": 1 << 30, "5242880": 5 << 20, "5g": 5 << 30} {
		if got, err := parseSize(in); got != want || err != nil {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1KiB", "5242879", "6GiB", "-1MiB", "99999999999999G"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestStateFile(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &stateFile{path: filepath.Join(t.TempDir(), "dir", "pending.json"), window: 24 * time.Hour, now: func() time.Time { return now }}
	n := 0
	mint := func() string { n++; return "key-" + strings.Repeat("x", n) }
	e1, err := s.entryFor("a", mint)
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := s.entryFor("a", mint)
	e3, _ := s.entryFor("b", mint)
	if e1.Key != e2.Key || e1.Key == e3.Key || n != 2 {
		t.Fatalf("keys %s %s %s after %d mints", e1.Key, e2.Key, e3.Key, n)
	}
	if err := s.forget("a"); err != nil {
		t.Fatal(err)
	}
	if e4, _ := s.entryFor("a", mint); e4.Key == e1.Key {
		t.Fatal("a forgotten key came back")
	}

	// Created: the upload id and part size are kept for a resume.
	if err := s.created("b", &api.Upload{UploadID: "u-b", Multipart: &api.Multipart{PartSize: 8 << 20, PartCount: 3}}); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.entryFor("b", mint); e.Key != e3.Key || e.UploadID != "u-b" || e.PartSize != 8<<20 || e.Completed != nil {
		t.Fatalf("after created: %+v", e)
	}
	// Completed: kept with its body for the window, then forgotten.
	if err := s.completed("b", api.Upload{UploadID: "u-b", Status: api.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(24*time.Hour - time.Second)
	if e, _ := s.entryFor("b", mint); e.Key != e3.Key || e.Completed == nil || e.Upload == nil || e.Upload.Status != api.StatusCompleted {
		t.Fatalf("within the window: %+v", e)
	}
	now = now.Add(time.Second)
	if e, _ := s.entryFor("b", mint); e.Key == e3.Key || e.Completed != nil {
		t.Fatalf("after the window: %+v, want a new key", e)
	}
}

// The CLI against a real local stack: uploads, replays with the same key,
// resumes after being killed mid-PUT, and exits with the documented codes.
func TestCLIEndToEnd(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-cli", Bucket: "uploads-cli",
		Env: func(k string) (string, bool) {
			if k == "MAX_UPLOAD_BYTES" {
				return "3000000", true
			}
			return "", false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	bin := buildCLI(t, dir)
	state := filepath.Join(dir, "state", "pending.json")
	cli := func(args ...string) *exec.Cmd {
		return exec.Command(bin, append([]string{"--api", st.APIURL, "--state", state, "--json"}, args...)...)
	}
	type line struct {
		Key, File, Note string
		Replayed        bool
		Upload          struct{ UploadID, Status string }
	}
	runJSON := func(args ...string) line {
		t.Helper()
		out, err := cli(args...).Output()
		if err != nil {
			t.Fatalf("upload %q: %v\n%s", args, err, out)
		}
		var l line
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		return l
	}
	objects := func() int {
		out, err := testenv.S3Client(st.S3URL, nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	file := func(name string, size int) string {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	small := file("small.bin", 10_000)
	first := runJSON(small)
	if first.Upload.Status != "completed" || first.Replayed {
		t.Fatalf("first = %+v", first)
	}
	again := runJSON("--key", first.Key, small)
	if again.Upload.UploadID != first.Upload.UploadID || !again.Replayed || objects() != 1 {
		t.Fatalf("again = %+v, objects %d", again, objects())
	}

	// Killed mid-PUT, then run again: the same key, one object. The proxy
	// passes the first 200 kB of the PUT on to S3 and holds back the rest;
	// once it holds them the command is killed.
	big := file("big.bin", 2_000_000)
	proxy := startPartProxy(t)
	proxy.mu.Lock()
	proxy.holdWholeAfter = 200_000
	proxy.mu.Unlock()
	slow := cli("--limit-rate", "400000", "--proxy", proxy.url, big)
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proxy.wholeHeld:
	case <-time.After(time.Minute):
		_ = slow.Process.Kill()
		_ = slow.Wait()
		t.Fatal("the PUT never reached the proxy")
	}
	_ = slow.Process.Kill()
	_ = slow.Wait()
	proxy.drain(t) // the PUT cut short has ended, at S3 too
	// The key was stored before the first request, the upload id once
	// created: both are there for the rerun.
	var stored, uploadID string
	raw, _ := os.ReadFile(state)
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatalf("state %s: %v", raw, err)
	}
	for _, e := range entries {
		if e.Completed == nil { // the small file's entry stays, completed
			stored, uploadID = e.Key, e.UploadID
		}
	}
	if stored == "" || uploadID == "" || objects() != 1 {
		t.Fatalf("before the rerun: stored key %q, upload %q, %d objects", stored, uploadID, objects())
	}
	resumed := runJSON(big)
	if resumed.Key != stored || resumed.Upload.UploadID != uploadID || resumed.Upload.Status != "completed" || objects() != 2 {
		t.Fatalf("resumed = %+v (stored key %s, upload %s), objects %d", resumed, stored, uploadID, objects())
	}
	// The PUT cut short stored nothing: the rerun sent the whole file, and
	// says so, not "already uploaded".
	if want := "resumed with this key: the create was replayed and the whole file sent"; resumed.Note != want {
		t.Errorf("resumed note %q; want %q", resumed.Note, want)
	}
	// Run again: "already uploaded", from the state file, with nothing sent
	// (through a proxy where nothing listens, any request would fail).
	port, _ := services.FreePort()
	var outBuf bytes.Buffer
	again2 := exec.Command(bin, "--api", st.APIURL, "--state", state, "--proxy", "http://127.0.0.1:"+strconv.Itoa(port), big)
	again2.Stdout = &outBuf
	if err := again2.Run(); err != nil || !strings.Contains(outBuf.String(), "already uploaded") || !strings.HasPrefix(outBuf.String(), big+"\tcompleted\tupload "+resumed.Upload.UploadID+" (") {
		t.Errorf("again after completion: %v, %q; want \"already uploaded\" with upload %s", err, outBuf.String(), resumed.Upload.UploadID)
	}

	// Rejected by the server: exit 3.
	tooBig := file("huge.bin", 3_000_001)
	if err := cli(tooBig).Run(); exitCode(err) != exitRejected {
		t.Errorf("too large: %v, want exit %d", err, exitRejected)
	}

	// Tokens that expire mid-upload. In front of the API, a gateway that
	// takes JWT number 1 for the create only (it "expires" then).
	jwt := func(n int) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"cli-tokens","n":%d}`, n))) + ".sig"
	}
	target, _ := url.Parse(st.APIURL)
	var refusals atomic.Int32
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/uploads" {
			if r.Header.Get("Authorization") == "Bearer "+jwt(1) {
				refusals.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
				return
			}
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer gateway.Close()
	before := objects()
	// --token-command: run again for a fresh token on the 401; the upload
	// goes on.
	counter := filepath.Join(dir, "token-count")
	command := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; case $n in 1) echo %[2]s;; *) echo %[3]s;; esac`, counter, jwt(1), jwt(2))
	viaCommand := file("token-command.bin", 5000)
	var errOut bytes.Buffer
	cmd := exec.Command(bin, "--api", gateway.URL, "--state", state, "--token-command", command, viaCommand)
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil || refusals.Load() != 1 || !strings.Contains(errOut.String(), "the API refused the token (401); with a fresh one") || objects() != before+1 {
		ran, _ := os.ReadFile(counter)
		t.Errorf("--token-command: %v after %d refusals, command run %s times, stderr %q, %d new objects; want done after one refusal, the command run twice",
			err, refusals.Load(), bytes.TrimSpace(ran), errOut.String(), objects()-before)
	}
	if ran, _ := os.ReadFile(counter); string(bytes.TrimSpace(ran)) != "2" {
		t.Errorf("--token-command ran %s times; want 2 (once, then once for the fresh token)", bytes.TrimSpace(ran))
	}
	// --token, fixed: the 401 ends the run (exit 3, no repeat with the same
	// token); run again with a new token, it resumes: the same key and
	// upload, one object.
	refusals.Store(0)
	viaFixed := file("token-fixed.bin", 5000)
	errOut.Reset()
	cmd = exec.Command(bin, "--api", gateway.URL, "--state", state, "--token", jwt(1), viaFixed)
	cmd.Stderr = &errOut
	if err := cmd.Run(); exitCode(err) != exitRejected || refusals.Load() != 1 || !strings.Contains(errOut.String(), "the same command again with a valid token") {
		t.Errorf("--token expired: %v after %d refusals, stderr %q; want exit %d after one, with how to resume", err, refusals.Load(), errOut.String(), exitRejected)
	}
	var fixedKey string
	raw, _ = os.ReadFile(state)
	entries = nil
	_ = json.Unmarshal(raw, &entries)
	for id, e := range entries {
		if strings.Contains(id, "token-fixed.bin") && e.Completed == nil {
			fixedKey = e.Key
		}
	}
	out, err := exec.Command(bin, "--api", gateway.URL, "--state", state, "--json", "--token", jwt(2), viaFixed).Output()
	var l line
	_ = json.Unmarshal(out, &l)
	if err != nil || fixedKey == "" || l.Key != fixedKey || !l.Replayed || l.Upload.Status != "completed" || objects() != before+2 {
		t.Errorf("rerun with a new token: %v, %s; want the kept key %q replayed and completed, one object", err, out, fixedKey)
	}

	// Pointed at something that is not the API (a wrong path, S3): one
	// line saying so and what answered, exit 1, and no entry left behind.
	other := file("other.bin", 1000)
	s3Answer := "PreconditionFailed" // Versity's answer to a POST of a create
	if testenv.S3() == services.MinIO {
		s3Answer = "BadRequest"
	}
	for _, wrong := range []struct{ url, answered string }{{st.APIURL + "/v1", "404"}, {st.S3URL, s3Answer}} {
		var errOut bytes.Buffer
		cmd := exec.Command(bin, "--api", wrong.url, "--state", state, "--retry-budget", "1s", other)
		cmd.Stderr = &errOut
		err := cmd.Run()
		msg := errOut.String()
		if exitCode(err) != exitFailed || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, wrong.url+" is not a onceupload API") || !strings.Contains(msg, wrong.answered) {
			t.Errorf("--api %s: %v, stderr %q; want exit %d and one line saying it is not a onceupload API, with %q", wrong.url, err, msg, exitFailed, wrong.answered)
		}
		raw, _ := os.ReadFile(state)
		if strings.Contains(string(raw), wrong.url+"|") {
			t.Errorf("--api %s: state %s keeps an entry for it", wrong.url, raw)
		}
	}
}

// buildCLI builds the command into dir, to run it as a user does.
func buildCLI(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "upload")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// Runs of the command sharing one state file never lose each other's
// entries: each file keeps the one key it was given.
func TestStateFileUnderConcurrentRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	const runs = 16
	keys := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			s := &stateFile{path: path}
			id := fmt.Sprintf("file-%d", i)
			e, err := s.entryFor(id, func() string { return fmt.Sprintf("key-%d", i) })
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = e.Key
			if err := s.created(id, &api.Upload{UploadID: fmt.Sprintf("upload-%d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	entries, err := (&stateFile{path: path}).load()
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		e := entries[fmt.Sprintf("file-%d", i)]
		if e.Key != keys[i] || e.UploadID != fmt.Sprintf("upload-%d", i) {
			t.Errorf("file-%d: stored %+v; its run got key %q and upload-%d", i, e, keys[i], i)
		}
	}
}
