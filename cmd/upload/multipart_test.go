package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

// partProxy is the HTTP proxy the CLI is pointed at (--proxy): it forwards
// every request, counts the part bytes it forwards to S3, can lose one
// part's answer after S3 stored it, and can hold back the part PUTs from a
// part number on (until the client goes away), telling the test when the
// parts before it were acknowledged. A whole-file PUT it can cut short: S3
// gets its first bytes, the rest is held back (until the client goes away)
// and the test told.
type partProxy struct {
	url string
	lb  *loopback
	rp  *httputil.ReverseProxy

	mu        sync.Mutex
	partBytes int64       // part body bytes forwarded to S3
	puts      map[int]int // part PUTs forwarded, by part number
	acked     int         // part answers 200 delivered to the client
	loseOnce  int         // part whose first answer is lost (0: none)
	holdFrom  int         // hold part PUTs of this number and up (0: none)
	reached   chan struct{}

	holdWholeAfter int64         // bytes of a whole-file PUT that reach S3 (0: all)
	wholeHeld      chan struct{} // closed once a whole-file PUT is held
	heldOnce       sync.Once
}

func startPartProxy(t *testing.T) *partProxy {
	t.Helper()
	p := &partProxy{puts: map[int]int{}, reached: make(chan struct{}), wholeHeld: make(chan struct{})}
	p.rp = forwardingProxy()
	p.lb = serveLoopback(t, http.HandlerFunc(p.serve))
	p.url = p.lb.url
	return p
}

// drain waits until every request of the client so far has ended at the
// proxy (S3 included), then serves again, at a new URL (p.url), for the
// next run: the counts are the proxy's, kept.
func (p *partProxy) drain(t *testing.T) {
	t.Helper()
	p.lb.drain(t)
	p.lb = serveLoopback(t, http.HandlerFunc(p.serve))
	p.url = p.lb.url
}

// forwardingProxy forwards a proxied request as it came (the CLI's
// --proxy sends absolute URLs), quietly: a killed client is the point.
func forwardingProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host },
		Transport: &http.Transport{},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
}

// loopback is an HTTP server on a free loopback port that knows when every
// request it took has ended: the test's proxies hold requests back until
// their client goes away, and a test must not read what a proxy counted,
// or end, while a request of the dead client is still running.
type loopback struct {
	srv    *http.Server
	url    string
	served chan struct{} // closed when Serve has returned
	// active counts open connections (from the Serve goroutine, at
	// StateNew) and running handlers (from inside a connection). Its Wait
	// comes only after Serve has returned, so no Add from zero can run
	// concurrently with it, which a WaitGroup forbids (and the race
	// detector reports): a handler's Add happens while its connection's
	// count is held.
	active sync.WaitGroup
}

// serveLoopback serves h until the test ends; the cleanup closes every
// connection and waits for every handler to return.
func serveLoopback(t *testing.T, h http.Handler) *loopback {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &loopback{url: "http://" + l.Addr().String(), served: make(chan struct{})}
	lb.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			lb.active.Add(1)
			defer lb.active.Done()
			h.ServeHTTP(w, r)
		}),
		ConnState: func(_ net.Conn, state http.ConnState) {
			switch state {
			case http.StateNew:
				lb.active.Add(1)
			case http.StateClosed, http.StateHijacked:
				lb.active.Done()
			}
		},
	}
	go func() {
		defer close(lb.served)
		_ = lb.srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = lb.srv.Close() // cancels every request's context: held ones end
		<-lb.served
		lb.active.Wait()
	})
	return lb
}

// drain waits until every request the server took has ended, and takes no
// more: Shutdown closes the listener first (a connection of a killed
// client still in the listen queue is refused, never served later), then
// waits for each connection to go idle; a hijacked one's handler is waited
// for too.
func (lb *loopback) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure, not a measure
	defer cancel()
	if err := lb.srv.Shutdown(ctx); err != nil {
		t.Fatalf("the proxy's requests never ended: %v", err)
	}
	<-lb.served
	lb.active.Wait()
}

type countingBody struct {
	io.ReadCloser
	p *partProxy
}

func (c countingBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.p.mu.Lock()
	c.p.partBytes += int64(n)
	c.p.mu.Unlock()
	return n, err
}

func (p *partProxy) serve(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("partNumber"))
	if r.Method != http.MethodPut {
		p.rp.ServeHTTP(w, r)
		return
	}
	if err != nil { // a whole-file PUT
		p.mu.Lock()
		after := p.holdWholeAfter
		p.mu.Unlock()
		if after > 0 {
			r.Body = &heldBody{ReadCloser: r.Body, ctx: r.Context(), left: after, held: func() { p.heldOnce.Do(func() { close(p.wholeHeld) }) }}
		}
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	hold := p.holdFrom > 0 && n >= p.holdFrom
	lose := n == p.loseOnce && p.puts[n] == 0
	if !hold {
		p.puts[n]++
	}
	p.mu.Unlock()
	if hold {
		// Never forwarded: S3 does not get this part. (Reading the body
		// lets the server notice when the client goes away.)
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	r.Body = countingBody{r.Body, p}
	if lose {
		p.rp.ServeHTTP(httptest.NewRecorder(), r) // S3 stores the part…
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // …and the client never hears of it
		return
	}
	rec := &statusWriter{ResponseWriter: w}
	p.rp.ServeHTTP(rec, r)
	if rec.status == http.StatusOK {
		p.mu.Lock()
		p.acked++
		if p.acked == p.holdFrom-1 {
			close(p.reached)
		}
		p.mu.Unlock()
	}
}

// heldBody is a request body that gives its first left bytes, then calls
// held and gives no more: it waits for the client to go away (reading the
// rest lets the server notice) and fails, so the request forwarded with it
// reaches S3 cut short.
type heldBody struct {
	io.ReadCloser
	ctx  context.Context
	left int64
	held func()
}

func (h *heldBody) Read(b []byte) (int, error) {
	if h.left <= 0 {
		h.held()
		_, _ = io.Copy(io.Discard, h.ReadCloser)
		<-h.ctx.Done()
		return 0, errors.New("held back until the client went away")
	}
	n, err := h.ReadCloser.Read(b[:min(int64(len(b)), h.left)])
	h.left -= int64(n)
	return n, err
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// A 50 MiB file in 5 MiB parts through the CLI: one part's answer is lost
// (and the part sent again), the process is killed with SIGKILL once parts
// 1 to 6 are acknowledged (parts 7 to 10 are held back at the proxy), and
// the same command run again sends exactly the 4 parts S3 lacks, counted
// in bytes through the proxy; one object, the file.
func TestCLIResumesAfterKill(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-cli-mp", Bucket: "uploads-cli-mp",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	bin := buildCLI(t, dir)
	const size, partSize, parts = 50 << 20, 5 << 20, 10
	data := make([]byte, size)
	_, _ = rand.Read(data)
	file := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.json")
	proxy := startPartProxy(t)
	proxy.mu.Lock()
	proxy.loseOnce, proxy.holdFrom = 3, 7
	proxy.mu.Unlock()
	// The proxy's URL changes when it is drained between the two runs.
	args := func() []string {
		return []string{"--api", st.APIURL, "--state", state, "--proxy", proxy.url, "--part-size", "5MiB", "--parallel", "4", "--json", file}
	}

	first := exec.Command(bin, args()...)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proxy.reached:
	case <-time.After(2 * time.Minute):
		_ = first.Process.Kill()
		t.Fatal("6 parts were never acknowledged")
	}
	_ = first.Process.Kill() // SIGKILL: no chance to tidy up
	_ = first.Wait()
	proxy.drain(t) // every request of the dead process has ended

	proxy.mu.Lock()
	lostPartSends, firstBytes := proxy.puts[3], proxy.partBytes
	proxy.mu.Unlock()
	if lostPartSends != 2 {
		t.Errorf("part 3, whose answer was lost, was sent %d times; want 2", lostPartSends)
	}
	// The retry of part 3 was told, not silent.
	if msg := firstErr.String(); !strings.Contains(msg, "big.bin: retrying in ") || !strings.Contains(msg, "s: no answer from S3") {
		t.Errorf("first run's stderr %q; want the retry told", msg)
	}
	// What S3 holds now, through the API, by the upload id the state keeps.
	raw, _ := os.ReadFile(state)
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil || len(entries) != 1 {
		t.Fatalf("state %s: %v", raw, err)
	}
	var e entry
	for _, v := range entries {
		e = v
	}
	if e.UploadID == "" || e.PartSize != partSize || e.Completed != nil {
		t.Fatalf("state entry %+v; want the upload id and part size, not completed", e)
	}
	resp, err := http.Get(st.APIURL + "/uploads/" + e.UploadID + "/parts")
	if err != nil {
		t.Fatal(err)
	}
	var list api.PartList
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	held := len(list.Parts)
	if held != 6 || firstBytes != 7*partSize {
		t.Fatalf("after the kill S3 holds %d parts, %d part bytes were sent; want parts 1 to 6, sent in 7 PUTs", held, firstBytes)
	}
	t.Logf("first run: %d part bytes forwarded, S3 holds %d of %d parts", firstBytes, held, parts)

	proxy.mu.Lock()
	proxy.holdFrom, proxy.partBytes, proxy.puts = 0, 0, map[int]int{}
	proxy.mu.Unlock()
	rerun := exec.Command(bin, args()...)
	var rerunErr bytes.Buffer
	rerun.Stderr = &rerunErr
	out, err := rerun.Output()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	// The resume says what S3 holds, in MiB, before it sends; then that
	// it completes.
	msg := rerunErr.String()
	checking := strings.Index(msg, "big.bin: checking the 6 parts S3 holds (30 MiB) against the file\n")
	resuming := strings.Index(msg, "big.bin: resuming: 6 of 10 parts are stored (30 MiB of 50 MiB); sending the other 20 MiB\n")
	if completing := strings.Index(msg, "big.bin: all bytes sent; completing the upload\n"); checking < 0 || resuming < checking || completing < resuming {
		t.Errorf("rerun's stderr %q; want the check and the resume told, then the completion", msg)
	}
	var line struct {
		Key    string
		Upload api.Upload
	}
	if err := json.Unmarshal(out, &line); err != nil || line.Key != e.Key || line.Upload.Status != api.StatusCompleted || line.Upload.UploadID != e.UploadID {
		t.Fatalf("rerun printed %s (%v); want the same key and upload, completed", out, err)
	}
	proxy.mu.Lock()
	sent, puts := proxy.partBytes, len(proxy.puts)
	proxy.mu.Unlock()
	if want := int64(parts-held) * partSize; sent != want || puts != parts-held {
		t.Errorf("rerun sent %d part bytes in %d parts; want %d in %d (only the missing parts)", sent, puts, want, parts-held)
	}
	s3c := testenv.S3Client(st.S3URL, nil)
	objs, err := s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	if err != nil || len(objs.Contents) != 1 {
		t.Fatalf("objects %v, %v; want exactly one", objs, err)
	}
	obj, err := s3c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &st.Bucket, Key: objs.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, obj.Body)
	obj.Body.Close()
	if want := sha256.Sum256(data); hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want[:]) {
		t.Fatal("the object is not the file")
	}
}

// A file whose bytes changed since its upload began, though its size and
// modification time did not (so the state file takes it for the same
// file): the rerun checks the parts S3 holds against it, refuses (exit 3)
// without sending a byte, aborts the upload and forgets the key; the next
// run uploads the file as it is now, with a new key. The completed upload
// in parts has S3's compositeSha256 and no whole-file sha256.
func TestCLIRefusesAChangedFileOnResume(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-cli-changed", Bucket: "uploads-cli-changed",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	const size, partSize = 30 << 20, 5 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	file := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(file)
	state := filepath.Join(dir, "state.json")
	proxy := startPartProxy(t)
	proxy.mu.Lock()
	proxy.holdFrom = 3 // parts 1 and 2 are stored, then the run is stopped
	proxy.mu.Unlock()
	// The proxy's URL changes when it is drained after the first run.
	args := func() []string {
		return []string{"--api", st.APIURL, "--state", state, "--proxy", proxy.url, "--part-size", "5MiB", "--parallel", "2", "--json", file}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-proxy.reached:
		case <-time.After(2 * time.Minute):
		}
		cancel()
	}()
	var out, errOut bytes.Buffer
	if code := run(ctx, args(), &out, &errOut, nil); code != exitInterrupted {
		t.Fatalf("first run: exit %d, stderr %q; want interrupted", code, errOut.String())
	}
	proxy.drain(t)

	// Other bytes in part 1, S3 holds; the same size and time.
	data[100] ^= 0xff
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	proxy.mu.Lock()
	proxy.holdFrom, proxy.partBytes = 0, 0
	proxy.mu.Unlock()
	out.Reset()
	errOut.Reset()
	code := run(context.Background(), args(), &out, &errOut, nil)
	msg := errOut.String()
	proxy.mu.Lock()
	sent := proxy.partBytes
	proxy.mu.Unlock()
	if code != exitRejected || !strings.Contains(msg, "parts_mismatch") || !strings.Contains(msg, "part 1 ") || !strings.Contains(msg, "run the same command again to upload it afresh with a new key") || sent != 0 {
		t.Fatalf("rerun on the changed file: exit %d, %d part bytes sent, stderr %q; want %d, nothing sent, the parts refused as not the file's", code, sent, msg, exitRejected)
	}
	if raw, _ := os.ReadFile(state); strings.Contains(string(raw), `"key"`) {
		t.Errorf("state %s; want the key forgotten", raw)
	}
	if !strings.Contains(msg, "aborted upload") {
		t.Errorf("stderr %q; want the upload aborted (its parts dropped)", msg)
	}

	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), args(), &out, &errOut, nil); code != exitOK {
		t.Fatalf("third run: exit %d, stderr %q", code, errOut.String())
	}
	var line struct{ Upload api.Upload }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Upload.Status != api.StatusCompleted {
		t.Fatalf("third run printed %s (%v)", out.Bytes(), err)
	}
	if u := line.Upload; u.SHA256 != "" || !strings.HasSuffix(u.CompositeSHA256, "-6") || strings.Contains(out.String(), `"sha256"`) {
		t.Errorf("completed %+v; want compositeSha256 of 6 parts and no sha256", u)
	}
	obj, err := testenv.S3Client(st.S3URL, nil).GetObject(context.Background(), &s3.GetObjectInput{Bucket: &st.Bucket, Key: &line.Upload.StorageKey})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("the object is not the file as it is now")
	}
}

// The proxies' loopback server: drain returns only once every request it
// took has ended, and then takes no more, so a test reads what a proxy
// counted only when no request of a dead client can still change it.
func TestLoopbackDrainWaitsForEveryRequest(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	lb := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(running)
		<-release
	}))
	// Registered after serveLoopback's, so it runs first: a failed test
	// still lets the handler end, and the cleanup's wait with it.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get(lb.url)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-running
	drained := make(chan struct{})
	go func() {
		lb.drain(t)
		close(drained)
	}()
	select {
	case <-drained:
		t.Fatal("drain returned while a request was still being served")
	case <-time.After(200 * time.Millisecond): // a failure would show here; a pass proves only this moment
	}
	releaseOnce.Do(func() { close(release) })
	<-drained
	if err := <-answered; err != nil {
		t.Errorf("the request drained was not answered: %v", err)
	}
	if resp, err := http.Get(lb.url); err == nil {
		resp.Body.Close()
		t.Error("the drained server still takes requests")
	}
}
