package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/pkg/api"
)

// recordingBar is a progress bar that remembers what it was told.
type recordingBar struct {
	mu             sync.Mutex
	total, max     int64
	finished, exit bool
}

func (b *recordingBar) Set64(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max(b.max, n)
	return nil
}
func (b *recordingBar) Finish() error { b.mu.Lock(); b.finished = true; b.mu.Unlock(); return nil }
func (b *recordingBar) Exit() error   { b.mu.Lock(); b.exit = true; b.mu.Unlock(); return nil }
func (b *recordingBar) Clear() error  { return nil }

func tempFile(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(p, bytes.Repeat([]byte{'z'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A refused connection before any answer is most likely the wrong --api:
// the command says which URL it tried and how to change it, at once.
func TestRefusedFirstConnectionGivesAdvice(t *testing.T) {
	port, err := services.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	apiURL := "http://127.0.0.1:" + strconv.Itoa(port)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", apiURL, "--state", filepath.Join(t.TempDir(), "s.json"), tempFile(t, 10)}, &out, &errOut, nil)
	msg := errOut.String()
	if code != exitFailed || !strings.Contains(msg, apiURL) || !strings.Contains(msg, "--api") || !strings.Contains(msg, "ONCEUPLOAD_API") {
		t.Errorf("exit %d, stderr %q; want %d naming %s, --api and ONCEUPLOAD_API", code, msg, exitFailed, apiURL)
	}
}

// An API that answered once and then keeps failing is retried until the
// budget runs out: exit 4, with how to resume.
func TestRetriesRunOut(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"error":"service_unavailable","message":"busy"}`)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--state", filepath.Join(t.TempDir(), "s.json"), "--retry-budget", "600ms", tempFile(t, 10)}, &out, &errOut, nil)
	if code != exitExhausted || calls.Load() < 2 || !strings.Contains(errOut.String(), "run the same command again") {
		t.Errorf("exit %d after %d requests, stderr %q; want %d after retries, with how to resume", code, calls.Load(), errOut.String(), exitExhausted)
	}
}

// singleServer is the API and S3 for one single-PUT upload; the PUT reads
// half the body and then waits for the test.
type singleServer struct {
	srv      *httptest.Server
	requests atomic.Int32
	halfway  chan struct{}
	release  chan struct{}
}

func newSingleServer(t *testing.T) *singleServer {
	s := &singleServer{halfway: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Method == http.MethodPost {
			var req api.CreateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.WriteHeader(201)
			_ = json.NewEncoder(w).Encode(api.Upload{UploadID: "u1", Status: api.StatusPending, Filename: req.Filename, ContentType: req.ContentType,
				Bytes: req.Size, SHA256: req.SHA256, Upload: &api.PutInstructions{Method: http.MethodPut, URL: s.srv.URL + "/s3/u1", Headers: map[string]string{}}})
			return
		}
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		once.Do(func() { close(s.halfway) })
		<-s.release // the server never notices a client that left mid-body
	}))
	t.Cleanup(func() { close(s.release); s.srv.Close() })
	return s
}

// Ctrl-C mid-upload: exit 130, how to resume, the bar left where it was
// (never filled), and the key kept for the rerun.
func TestInterruptKeepsTheBarAndTheKey(t *testing.T) {
	s := newSingleServer(t)
	state := filepath.Join(t.TempDir(), "s.json")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.halfway:
		case <-time.After(30 * time.Second): // the test fails below
		}
		cancel()
	}()
	bar := &recordingBar{}
	var out, errOut bytes.Buffer
	const size = 32 << 20 // more than loopback's socket buffers hold
	code := run(ctx, []string{"--api", s.srv.URL, "--state", state, tempFile(t, size)}, &out, &errOut, func(total int64, _ string, _ io.Writer) meter {
		bar.total = total
		return bar
	})
	if code != exitInterrupted || !strings.Contains(errOut.String(), "run the same command again") {
		t.Errorf("exit %d, stderr %q; want %d with how to resume", code, errOut.String(), exitInterrupted)
	}
	if bar.finished || !bar.exit || bar.max >= size || bar.total != size {
		t.Errorf("bar: finished %v, exited %v, at %d of %d; want left short of full", bar.finished, bar.exit, bar.max, bar.total)
	}
	raw, _ := os.ReadFile(state)
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil || len(entries) != 1 {
		t.Fatalf("state %s: %v", raw, err)
	}
	for _, e := range entries {
		if e.Key == "" || e.UploadID != "u1" || e.Completed != nil {
			t.Errorf("state entry %+v; want the key and upload id, not completed", e)
		}
	}
}

// A file that completed within the window: "already uploaded", the upload
// id, and no request at all. After the window it is a new upload.
func TestAlreadyUploadedSendsNothing(t *testing.T) {
	s := newSingleServer(t)
	statePath := filepath.Join(t.TempDir(), "s.json")
	file := tempFile(t, 10)
	id, err := identify(s.srv.URL, file)
	if err != nil {
		t.Fatal(err)
	}
	st := &stateFile{path: statePath, window: time.Hour}
	done := time.Now().UTC().Add(-30 * time.Minute)
	if err := st.save(map[string]entry{id: {Key: "key-0123456789abcdef", UploadID: "u9", Completed: &done,
		Upload: &api.Upload{UploadID: "u9", Status: api.StatusCompleted}}}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", s.srv.URL, "--state", statePath, "--idempotency-window", "1h", file}, &out, &errOut, nil)
	if code != exitOK || !strings.Contains(out.String(), "already uploaded") || !strings.Contains(out.String(), "u9") || s.requests.Load() != 0 {
		t.Errorf("exit %d, stdout %q, %d requests; want \"already uploaded\" with u9 and no request", code, out.String(), s.requests.Load())
	}
	// With a window of 20 minutes the entry has expired: a new upload.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.halfway; cancel() }()
	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"--api", s.srv.URL, "--state", statePath, "--idempotency-window", "20m", file}, &out, &errOut, nil)
	if code != exitInterrupted || s.requests.Load() != 2 {
		t.Errorf("after the window: exit %d, %d requests; want a new upload (create and PUT)", code, s.requests.Load())
	}
	if !strings.Contains(errOut.String(), "(key ") || strings.Contains(errOut.String(), "key-0123456789abcdef") {
		t.Errorf("after the window: stderr %q; want a new key, not the expired one", errOut.String())
	}
}

// The API refuses a new upload in parts with 429 too_many_uploads: one
// request, no retry (whatever its Retry-After), exit 3 with what to do and
// the unfinished uploads the state file knows, and the file's entry gone
// (the create was refused for good: a rerun starts afresh).
func TestTooManyUploadsEndsTheRun(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "too_many_uploads", Message: "You have as many multipart uploads in progress as this service allows. Complete or abort some of them, then create this one again."})
	}))
	defer srv.Close()
	statePath := filepath.Join(t.TempDir(), "s.json")
	st := &stateFile{path: statePath, window: time.Hour}
	other := srv.URL + "|/data/other.bin|104857600|1"
	done := time.Now().UTC()
	if err := st.save(map[string]entry{
		other:                                   {Key: "key-0123456789abcdef", UploadID: "u7", PartSize: 8 << 20},
		srv.URL + "|/data/one-put.bin|100|1":    {Key: "key-1123456789abcdef", UploadID: "u8"},
		srv.URL + "|/data/done.bin|104857600|1": {Key: "key-2123456789abcdef", UploadID: "u9", PartSize: 8 << 20, Completed: &done},
	}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--state", statePath, "--part-size", "5MiB", tempFile(t, 10)}, &out, &errOut, nil)
	msg := errOut.String()
	if code != exitRejected || requests.Load() != 1 {
		t.Fatalf("exit %d after %d requests, stderr %q; want %d after one", code, requests.Load(), msg, exitRejected)
	}
	for _, want := range []string{"429 too_many_uploads", "Finish some", "abort them", "/data/other.bin (upload u7)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q; want it to say %q", msg, want)
		}
	}
	for _, not := range []string{"one-put.bin", "done.bin", "run the same command again"} {
		if strings.Contains(msg, not) {
			t.Errorf("stderr %q; want no %q", msg, not)
		}
	}
	entries, err := st.load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := entries[other]; !ok || len(entries) != 3 {
		t.Errorf("state %v; want the three other entries only", entries)
	}
}

// API Gateway's authorizer refusing the token is told as such (not as a
// foreign URL): exit 3, and the key kept for a rerun with a valid token.
func TestAuthorizerRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
	}))
	defer srv.Close()
	statePath := filepath.Join(t.TempDir(), "s.json")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--state", statePath, "--token", "expired", tempFile(t, 10)}, &out, &errOut, nil)
	msg := errOut.String()
	if code != exitRejected || !strings.Contains(msg, "refused the token") || !strings.Contains(msg, "Unauthorized") || strings.Contains(msg, "not a onceupload API") {
		t.Errorf("exit %d, stderr %q; want %d saying the authorizer refused the token", code, msg, exitRejected)
	}
	raw, _ := os.ReadFile(statePath)
	if !strings.Contains(string(raw), `"key"`) {
		t.Errorf("state %s; want the key kept", raw)
	}
}

// A missing file, a directory or an empty file is refused before anything
// is sent, with every bad file named: exit 2, no request, no state entry.
func TestBadFilesAreRefusedFirst(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); w.WriteHeader(500) }))
	defer srv.Close()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(dir, "s.json")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--state", statePath, tempFile(t, 10), filepath.Join(dir, "missing.bin"), dir, empty}, &out, &errOut, nil)
	msg := errOut.String()
	if code != exitUsage || requests.Load() != 0 {
		t.Errorf("exit %d after %d requests; want %d and none", code, requests.Load(), exitUsage)
	}
	for _, want := range []string{"missing.bin: no such file", dir + ": is a directory", "empty.txt: is empty", "nothing uploaded"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q; want %q", msg, want)
		}
	}
	if _, err := os.Stat(statePath); err == nil {
		t.Errorf("a state file was written")
	}
}

// fakeAPI is a whole API for one-PUT uploads: create (after the scripted
// failures), PUT, and status.
type fakeAPI struct {
	srv      *httptest.Server
	failures []func(w http.ResponseWriter)
	creates  atomic.Int32
}

func newFakeAPI(t *testing.T, failures ...func(w http.ResponseWriter)) *fakeAPI {
	f := &fakeAPI{failures: failures}
	var up api.Upload
	var mu sync.Mutex
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost:
			if n := int(f.creates.Add(1)); n <= len(f.failures) {
				f.failures[n-1](w)
				return
			}
			var req api.CreateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			up = api.Upload{UploadID: "u1", Status: api.StatusPending, Filename: req.Filename, ContentType: req.ContentType,
				Bytes: req.Size, SHA256: req.SHA256, Upload: &api.PutInstructions{Method: http.MethodPut, URL: f.srv.URL + "/s3/u1", Headers: map[string]string{}}}
			w.WriteHeader(201)
			_ = json.NewEncoder(w).Encode(up)
		case r.Method == http.MethodPut:
			_, _ = io.Copy(io.Discard, r.Body)
			up.Status, up.Upload = api.StatusCompleted, nil
		default:
			_ = json.NewEncoder(w).Encode(up)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func answer(status int, retryAfter, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// A retry is told as it happens, with its wait and why; once the bytes are
// sent, the command says it completes. (Retry-After: 0: no real wait.)
func TestRetriesAndCompletionAreTold(t *testing.T) {
	f := newFakeAPI(t,
		answer(503, "0", `{"error":"service_unavailable","message":"busy"}`),
		answer(429, "0", `{"message":"Too Many Requests"}`))
	file := tempFile(t, 100)
	var out, errOut bytes.Buffer
	bar := &recordingBar{}
	code := run(context.Background(), []string{"--api", f.srv.URL, "--state", filepath.Join(t.TempDir(), "s.json"), file}, &out, &errOut, func(total int64, _ string, _ io.Writer) meter {
		bar.total = total
		return bar
	})
	msg := errOut.String()
	want := "upload: " + file + ": retrying in 0 s: the API answered 503 service_unavailable\n" +
		"upload: " + file + ": retrying in 0 s: API Gateway answered 429 Too Many Requests\n" +
		"upload: " + file + ": all bytes sent; completing the upload\n"
	if code != exitOK || msg != want || !bar.finished || bar.total != 100 {
		t.Errorf("exit %d, stderr %q, bar %+v; want %d, stderr %q, the bar filled", code, msg, bar, exitOK, want)
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"--api", f.srv.URL, "--quiet", "--state", filepath.Join(t.TempDir(), "s.json"), file}, &out, &errOut, nil); code != exitOK || errOut.Len() != 0 {
		t.Errorf("--quiet: exit %d, stderr %q; want nothing said", code, errOut.String())
	}
}

// A create refused for good leaves no entry (a rerun starts afresh); one
// that got no answer, a 5xx, or a refused token keeps its key, since the
// server may hold an upload with it.
func TestWhichFailedCreatesKeepTheKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		exit   int
		keep   bool
	}{
		{"400", answer(400, "", `{"error":"invalid_request","message":"no"}`), exitRejected, false},
		{"415", answer(415, "", `{"error":"unsupported_media_type","message":"no"}`), exitRejected, false},
		{"503", answer(503, "0", `{"error":"service_unavailable","message":"busy"}`), exitExhausted, true},
		{"lost", func(w http.ResponseWriter) { conn, _, _ := w.(http.Hijacker).Hijack(); conn.Close() }, exitExhausted, true},
		{"401", answer(401, "", `{"error":"unauthenticated","message":"no principal"}`), exitRejected, true},
		{"403", answer(403, "", `{"message":"Forbidden"}`), exitRejected, true},
	} {
		f := newFakeAPI(t, tc.answer, tc.answer, tc.answer)
		statePath := filepath.Join(t.TempDir(), "s.json")
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", f.srv.URL, "--state", statePath, "--max-attempts", "2", "--retry-budget", "0", tempFile(t, 10)}, &out, &errOut, nil)
		raw, _ := os.ReadFile(statePath)
		if kept := strings.Contains(string(raw), `"key"`); code != tc.exit || kept != tc.keep {
			t.Errorf("%s: exit %d, key kept %v (stderr %q); want %d, kept %v", tc.name, code, kept, errOut.String(), tc.exit, tc.keep)
		}
	}
}

func TestUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 700 << 20: "700 MiB", 30 << 20: "30 MiB", 1536 << 20: "1.5 GiB"} {
		if got := iec(n); got != want {
			t.Errorf("iec(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0 s", 4 * time.Second: "4 s", 340 * time.Millisecond: "0.3 s", 19500 * time.Millisecond: "20 s"} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// A create whose answer was lost, then answered until the budget ran out
// by something in front of the API (a proxy's 503 page while the API is
// out of its reach): the run gave up retrying (exit 4), it did not find
// --api wrong, and the key, which may stand for an upload the server
// made, is kept: the rerun replays that upload.
func TestForeignAnswersWhileRetryingKeepTheKey(t *testing.T) {
	f := newReplayAPI(t, "store")
	f.loseCreate = true
	target, _ := url.Parse(f.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // the lost answer is the point
	var reached, out atomic.Bool
	out.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if out.Load() && reached.Swap(true) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<html><body>503 Service Unavailable</body></html>")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	state, file := filepath.Join(t.TempDir(), "s.json"), tempFile(t, 100)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--api", front.URL, "--state", state, "--quiet", "--retry-budget", "500ms", file}, &stdout, &stderr, nil)
	if code != exitExhausted || !strings.Contains(stderr.String(), "run the same command again") || strings.Contains(stderr.String(), "Point --api") {
		t.Errorf("exit %d, stderr %q; want %d, saying how to resume, not that --api is wrong", code, stderr.String(), exitExhausted)
	}
	if raw, _ := os.ReadFile(state); !strings.Contains(string(raw), `"key"`) {
		t.Fatalf("state %s; want the key kept", raw)
	}
	t.Logf("the first run said %q", stderr.String())
	out.Store(false)
	stdout.Reset()
	code = run(context.Background(), []string{"--api", front.URL, "--state", state, "--quiet", "--json", file}, &stdout, &stderr, nil)
	var line struct{ Replayed bool }
	if err := json.Unmarshal(stdout.Bytes(), &line); code != exitOK || err != nil || !line.Replayed {
		t.Errorf("rerun: exit %d, stdout %q; want %d, the create replayed (one upload)", code, stdout.String(), exitOK)
	}
}

// Once the API has answered, a foreign answer (a proxy's 403 page, a
// captive portal) is no answer: the second file's create is retried until
// the budget runs out (exit 4), --api is not called wrong, and its key is
// kept, for the create may have reached the API before the proxy cut in.
func TestForeignAnswersAfterTheAPIAnsweredKeepTheKey(t *testing.T) {
	f := newFakeAPI(t)
	target, _ := url.Parse(f.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var posts atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) == 2 || posts.Load() >= 2 {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Server", "squid")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "<html><body>Access denied</body></html>")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	state, first, second := filepath.Join(t.TempDir(), "s.json"), tempFile(t, 100), tempFile(t, 200)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--api", front.URL, "--state", state, "--quiet", "--max-attempts", "3", "--retry-budget", "2s", first, second}, &stdout, &stderr, nil)
	if code != exitExhausted || strings.Contains(stderr.String(), "Point --api") || strings.Contains(stderr.String(), "not a onceupload API") {
		t.Errorf("exit %d, stderr %q; want %d (retried, given up), not that --api is wrong", code, stderr.String(), exitExhausted)
	}
	raw, _ := os.ReadFile(state)
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil || len(entries) != 2 {
		t.Errorf("state %s (%v); want both files' keys kept", raw, err)
	}
}
