package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// killProxy is the HTTP proxy the CLI is pointed at (--proxy): it forwards
// every request and records it, and holds the first one hold picks: never
// forwarded, or (loseAnswer) forwarded, the server acting, and its answer
// kept back. Once it holds it, it closes held: the test kills the process
// then, at that step and moment.
type killProxy struct {
	url string
	rp  *httputil.ReverseProxy
	lb  *loopback

	mu         sync.Mutex
	hold       func(*http.Request) bool // nil once used
	loseAnswer bool
	held       chan struct{}
	lost       []byte   // the answer kept back
	requests   []string // "POST /uploads", "PUT part 2", "PUT", … with the answer's status
}

func startKillProxy(t *testing.T, hold func(*http.Request) bool, loseAnswer bool) *killProxy {
	t.Helper()
	p := &killProxy{hold: hold, loseAnswer: loseAnswer, held: make(chan struct{})}
	p.rp = forwardingProxy()
	p.lb = serveLoopback(t, http.HandlerFunc(p.serve))
	p.url = p.lb.url
	return p
}

func (p *killProxy) serve(w http.ResponseWriter, r *http.Request) {
	what := r.Method + " " + r.URL.Path
	if r.Method == http.MethodPut {
		what = "PUT"
		if n := r.URL.Query().Get("partNumber"); n != "" {
			what = "PUT part " + n
		}
	}
	p.mu.Lock()
	hold := p.hold != nil && p.hold(r)
	if hold {
		p.hold = nil
	}
	p.mu.Unlock()
	if !hold {
		rec := &statusWriter{ResponseWriter: w}
		p.rp.ServeHTTP(rec, r)
		p.mu.Lock()
		p.requests = append(p.requests, what+" "+http.StatusText(rec.status))
		p.mu.Unlock()
		return
	}
	if p.loseAnswer {
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r) // the server acts…
		p.mu.Lock()
		p.lost = rec.Body.Bytes() // …and the answer never reaches the client
		p.mu.Unlock()
	} else {
		_, _ = io.Copy(io.Discard, r.Body) // never forwarded; read, so that the server notices the client leave
	}
	close(p.held)
	<-r.Context().Done()
}

// drain waits until every request the proxy took has ended, and takes no
// more (loopback.drain).
func (p *killProxy) drain(t *testing.T) {
	t.Helper()
	p.lb.drain(t)
}

// seen is every request forwarded so far, with its answer's status.
func (p *killProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// sent is what the rerun sent: the requests of kind ("PUT" matches parts
// too) and their count.
func (p *killProxy) sent(kind string) int {
	n := 0
	for _, r := range p.seen() {
		if strings.HasPrefix(r, kind) {
			n++
		}
	}
	return n
}

func isCreate(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/uploads" }
func isSign(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/parts")
}
func isComplete(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete")
}
func isWholePut(r *http.Request) bool {
	return r.Method == http.MethodPut && !r.URL.Query().Has("partNumber")
}
func isPart(n string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == n }
}
func isStatus(r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/uploads/")
	return r.Method == http.MethodGet && ok && !strings.Contains(id, "/")
}

// rerunOutcome is what a rerun after the kill may do: the note its line
// carries, and how many PUTs (the whole file's or parts) and completes it
// sends.
type rerunOutcome struct {
	note            string
	puts, completes int
}

// The CLI where it differs from the client: a process killed (SIGKILL: no
// chance to tidy up) at a step of its upload, before the request reached
// the server (lost) or after the server acted and before its answer came
// (answer-lost), then run again: the same key, the same upload, one
// object, one event, and only what S3 lacks sent. (Killed mid-PUT and
// mid-parts: TestCLIEndToEnd and TestCLIResumesAfterKill. The client's
// own retries through an outage: pkg/client's TestOutageMatrix.)
func TestCLIKilledAtEachStep(t *testing.T) {
	sink := testenv.NewEventSink(t)
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-cli-killed", Bucket: "uploads-cli-killed", EventsURL: sink.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	dir := t.TempDir()
	bin := buildCLI(t, dir)
	const (
		singleSize = 300 << 10
		partsSize  = 11 << 20 // parts of 5, 5 and 1 MiB
	)
	// Replayed, a single PUT the server has the object of may find it
	// recorded already (nothing sent) or not yet (a PUT, which S3
	// answers 412): the finalize that records it races the rerun.
	stored := []rerunOutcome{{"already uploaded with this key; nothing sent", 0, 0}, {"resumed with this key: S3 held the file already (an earlier run stored it)", 1, 0}}
	sentAgain := []rerunOutcome{{"resumed with this key: the create was replayed and the whole file sent", 1, 0}}
	allParts := []rerunOutcome{{"resumed with this key: S3 held none of its parts; 3 sent", 3, 1}}
	noParts := []rerunOutcome{{"resumed: 3 of 3 parts were stored already, 0 sent", 0, 1}}
	uploads := map[string]string{} // upload id → cell, for the events check
	for _, tc := range []struct {
		name       string
		size       int
		hold       func(*http.Request) bool
		loseAnswer bool
		rerun      []rerunOutcome // one of
	}{
		// The server never saw the key: the rerun creates the upload.
		{"single/create/lost", singleSize, isCreate, false, []rerunOutcome{{"", 1, 0}}},
		{"single/create/answer-lost", singleSize, isCreate, true, sentAgain},
		{"single/put/lost", singleSize, isWholePut, false, sentAgain}, // killed right after the create
		{"single/put/answer-lost", singleSize, isWholePut, true, stored},
		{"single/status/lost", singleSize, isStatus, false, stored},
		{"parts/create/lost", partsSize, isCreate, false, []rerunOutcome{{"", 3, 1}}},
		{"parts/create/answer-lost", partsSize, isCreate, true, allParts},
		{"parts/sign/lost", partsSize, isSign, false, allParts}, // killed right after the create
		{"parts/last-part/answer-lost", partsSize, isPart("3"), true, noParts},
		{"parts/complete/lost", partsSize, isComplete, false, noParts}, // after the last part, before complete
		{"parts/complete/answer-lost", partsSize, isComplete, true, []rerunOutcome{{"already uploaded with this key; nothing sent", 0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id := killedCell(t, st, bin, tc.size, tc.hold, tc.loseAnswer, tc.rerun); id != "" {
				uploads[id] = t.Name()
			}
		})
	}
	if len(uploads) == 0 {
		return
	}
	c, _ := client.New(st.APIURL)
	last, err := c.Upload(context.Background(), tempFile(t, 1000), client.UploadInput{})
	if err != nil {
		t.Fatal(err)
	}
	sink.OneEach(t, uploads, api.DetailTypeUploadCompleted, last.Upload.UploadID)
}

// killedCell runs the command on a new file of size through a killProxy
// that holds the request hold picks, kills it there, runs it again and
// checks the rerun; it returns the upload id.
func killedCell(t *testing.T, st *devstack.Stack, bin string, size int, hold func(*http.Request) bool, loseAnswer bool, outcomes []rerunOutcome) string {
	dir := t.TempDir()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	file, state := filepath.Join(dir, "f.bin"), filepath.Join(dir, "state.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	partSize := "-1"
	if size > 5<<20 {
		partSize = "5MiB"
	}
	before := objectCount(t, st)
	p := startKillProxy(t, hold, loseAnswer)
	// One part at a time: when the last part is held, the others are
	// stored.
	args := func(proxy string) []string {
		return []string{"--api", st.APIURL, "--state", state, "--proxy", proxy, "--part-size", partSize, "--parallel", "1", "--json", "--quiet", file}
	}
	first := exec.Command(bin, args(p.url)...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.held:
	case <-time.After(time.Minute): // a failure, not a measure
		_ = first.Process.Kill()
		_ = first.Wait()
		t.Fatal("the step was never reached")
	}
	_ = first.Process.Kill() // SIGKILL: no chance to tidy up
	_ = first.Wait()
	p.drain(t) // every request of the dead process has ended

	// What the first run left: its key always (stored before the first
	// request), the upload's id once the create was answered.
	raw, _ := os.ReadFile(state)
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil || len(entries) != 1 {
		t.Fatalf("state %s (%v); want one entry", raw, err)
	}
	var kept entry
	for _, e := range entries {
		kept = e
	}
	firstID := kept.UploadID
	var lost api.Upload
	if firstID == "" && json.Unmarshal(p.lost, &lost) == nil {
		firstID = lost.UploadID // the create's answer, lost
	}
	again := startKillProxy(t, nil, false) // the rerun's requests, counted
	out, err := exec.Command(bin, args(again.url)...).Output()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	var line struct {
		Key, Note string
		Replayed  bool
		Upload    api.Upload
	}
	if err := json.Unmarshal(out, &line); err != nil {
		t.Fatalf("rerun printed %q: %v", out, err)
	}
	u := line.Upload
	if line.Key != kept.Key || u.Status != api.StatusCompleted || firstID != "" && u.UploadID != firstID || line.Replayed != (firstID != "") {
		t.Errorf("rerun: key %s, upload %s %s, replayed %v; want key %s, upload %q (replayed if known), completed", line.Key, u.UploadID, u.Status, line.Replayed, kept.Key, firstID)
	}
	got := rerunOutcome{line.Note, again.sent("PUT"), again.sent("POST /uploads/" + u.UploadID + "/complete")}
	t.Logf("rerun: %q, %d PUTs, %d completes", got.note, got.puts, got.completes)
	if !slices.Contains(outcomes, got) {
		t.Errorf("rerun: note %q, %d PUTs, %d completes; want one of %+v (requests %q)", got.note, got.puts, got.completes, outcomes, again.seen())
	}
	if n := objectCount(t, st); n != before+1 {
		t.Errorf("%d objects after the cell, %d before; want one more", n, before)
	}
	if !bytes.Equal(objectAt(t, st, u.StorageKey), data) {
		t.Error("the object is not the file")
	}
	return u.UploadID
}

func objectCount(t *testing.T, st *devstack.Stack) int {
	t.Helper()
	out, err := testenv.S3Client(st.S3URL, nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

func objectAt(t *testing.T, st *devstack.Stack, key string) []byte {
	t.Helper()
	obj, err := testenv.S3Client(st.S3URL, nil).GetObject(context.Background(), &s3.GetObjectInput{Bucket: &st.Bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
