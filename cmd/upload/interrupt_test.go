package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// replayAPI is the API and S3 for single-PUT uploads that remembers keys:
// a create with a key it knows is a replay (Idempotent-Replay: true) of
// the upload as it stands. Each PUT does what puts says, in turn: "hold"
// reads half the body, tells halfway and waits for the client to leave
// (nothing is stored), "store" stores the file (the upload completes),
// "412" answers PreconditionFailed (S3 held the object already: an
// earlier PUT stored it and its answer was lost; the upload completes).
// "complete" completes the upload without a PUT (the server recorded an
// earlier run's object meanwhile) before the next create. With
// loseCreate, the first create's answer is lost (the upload is created).
type replayAPI struct {
	srv     *httptest.Server
	halfway chan struct{}

	mu         sync.Mutex
	ups        map[string]*api.Upload
	puts       []string
	loseCreate bool
}

func newReplayAPI(t *testing.T, puts ...string) *replayAPI {
	f := &replayAPI{halfway: make(chan struct{}), ups: map[string]*api.Upload{}, puts: puts}
	var once sync.Once
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			var req api.CreateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			f.mu.Lock()
			key := r.Header.Get("Idempotency-Key")
			up, known := f.ups[key]
			if !known {
				up = &api.Upload{UploadID: "u1", Status: api.StatusPending, Filename: req.Filename, ContentType: req.ContentType,
					Bytes: req.Size, SHA256: req.SHA256, Upload: &api.PutInstructions{Method: http.MethodPut, URL: f.srv.URL + "/s3/u1", Headers: map[string]string{"If-None-Match": "*"}}}
				f.ups[key] = up
			} else {
				w.Header().Set("Idempotent-Replay", "true")
				if len(f.puts) > 0 && f.puts[0] == "complete" {
					f.puts = f.puts[1:]
					up.Status, up.Upload = api.StatusCompleted, nil
				}
			}
			body, _ := json.Marshal(up)
			lose := f.loseCreate
			f.loseCreate = false
			f.mu.Unlock()
			if lose {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			w.WriteHeader(201)
			_, _ = w.Write(body)
		case http.MethodPut:
			f.mu.Lock()
			what := f.puts[0]
			f.puts = f.puts[1:]
			f.mu.Unlock()
			switch what {
			case "hold":
				_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
				once.Do(func() { close(f.halfway) })
				_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leave
				<-r.Context().Done()
				return
			case "412":
				_, _ = io.Copy(io.Discard, r.Body)
				f.complete()
				w.WriteHeader(http.StatusPreconditionFailed)
				_, _ = io.WriteString(w, `<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`)
			default:
				_, _ = io.Copy(io.Discard, r.Body)
				f.complete()
			}
		default:
			f.mu.Lock()
			var body []byte
			for _, up := range f.ups {
				body, _ = json.Marshal(up)
			}
			f.mu.Unlock()
			_, _ = w.Write(body)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *replayAPI) complete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, up := range f.ups {
		up.Status, up.Upload = api.StatusCompleted, nil
	}
}

// interruptAtHalfway runs the command on file and presses Ctrl-C once
// the PUT is half sent: it must exit 130, saying what S3 holds.
func interruptAtHalfway(t *testing.T, f *replayAPI, state, file string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.halfway:
		case <-time.After(30 * time.Second): // the test fails below
		}
		cancel()
	}()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"--api", f.srv.URL, "--state", state, file}, &out, &errOut, nil); code != exitInterrupted {
		t.Fatalf("interrupted: exit %d, stderr %q; want %d", code, errOut.String(), exitInterrupted)
	}
	return errOut.String()
}

// A single PUT interrupted part-way stores nothing: the command says so
// (S3 holds none of it, a rerun sends it all), and the rerun, which
// replays the create and sends the whole file again, says that, not
// "already uploaded": that is only said when nothing was sent. The result
// line labels the upload id.
func TestRerunAfterAnInterruptedPutSaysWhatHappened(t *testing.T) {
	const size = 32 << 20 // more than loopback's socket buffers hold
	for _, tc := range []struct {
		name  string
		puts  []string
		note  string
		state bool // the rerun's line (from the state file) once more
	}{
		{"sent again", []string{"hold", "store"}, "resumed with this key: the create was replayed and the whole file sent", true},
		{"stored already", []string{"hold", "412"}, "resumed with this key: S3 held the file already (an earlier run stored it)", false},
		{"completed already", []string{"hold", "complete"}, "already uploaded with this key; nothing sent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReplayAPI(t, tc.puts...)
			state := filepath.Join(t.TempDir(), "s.json")
			file := tempFile(t, size)
			msg := interruptAtHalfway(t, f, state, file)
			if want := file + ": interrupted: S3 holds none of it (one PUT stores nothing until it completes); run the same command again to resume: it sends all 32 MiB (key "; !strings.Contains(msg, want) {
				t.Errorf("interrupted: stderr %q; want %q", msg, want)
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"--api", f.srv.URL, "--state", state, "--quiet", file}, &out, &errOut, nil)
			if want := fmt.Sprintf("%s\tcompleted\tupload u1 (%s)\n", file, tc.note); code != exitOK || out.String() != want {
				t.Errorf("rerun: exit %d, stdout %q (stderr %q); want %d, %q", code, out.String(), errOut.String(), exitOK, want)
			}
			if f.mu.Lock(); len(f.puts) != 0 {
				t.Errorf("PUTs %v not made", f.puts)
			}
			f.mu.Unlock()
			if !tc.state {
				return
			}
			out.Reset()
			code = run(context.Background(), []string{"--api", f.srv.URL, "--state", state, "--quiet", file}, &out, &errOut, nil)
			if prefix := file + "\tcompleted\tupload u1 (already uploaded with this key at "; code != exitOK || !strings.HasPrefix(out.String(), prefix) || !strings.HasSuffix(out.String(), "; nothing sent)\n") {
				t.Errorf("third run: exit %d, stdout %q; want %q…; nothing sent)", code, out.String(), prefix)
			}
		})
	}
}

// heldPartsAPI is the API and S3 for one upload in parts: S3 takes the
// parts below hold (answering 200) and holds part hold (its body read,
// no answer) until the client leaves, after telling reached.
type heldPartsAPI struct {
	srv     *httptest.Server
	hold    int
	reached chan struct{}
}

func newHeldPartsAPI(t *testing.T, hold int) *heldPartsAPI {
	f := &heldPartsAPI{hold: hold, reached: make(chan struct{})}
	var up api.Upload
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("POST /uploads", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		up = api.Upload{UploadID: "u1", Status: api.StatusPending, StorageKey: "uploads/u1", Filename: req.Filename, ContentType: req.ContentType,
			Bytes: req.Size, Multipart: &api.Multipart{PartSize: req.PartSize, PartCount: api.PartCount(req.Size, req.PartSize)}}
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(up)
	})
	mux.HandleFunc("POST /uploads/u1/parts", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignPartsRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		var out api.SignedParts
		for _, p := range req.Parts {
			out.Parts = append(out.Parts, api.SignedPart{PartNumber: p.PartNumber, PutInstructions: api.PutInstructions{
				Method: http.MethodPut, URL: fmt.Sprintf("%s/s3/%d", f.srv.URL, p.PartNumber), Headers: map[string]string{}, ExpiresAt: "2030-01-01T00:00:00Z"}})
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("PUT /s3/{part}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.PathValue("part") == fmt.Sprint(f.hold) {
			once.Do(func() { close(f.reached) })
			<-r.Context().Done()
			return
		}
		w.Header().Set("ETag", `"e"`)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// Ctrl-C during an upload in parts: the bar shows what was sent, the
// part in flight included, but S3 holds only the parts it answered; the
// command says that, and what a rerun sends.
func TestInterruptSaysWhatS3Holds(t *testing.T) {
	f := newHeldPartsAPI(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.reached:
		case <-time.After(30 * time.Second): // the test fails below
		}
		cancel()
	}()
	bar := &recordingBar{}
	file := tempFile(t, 4*5<<20) // 4 parts of 5 MiB
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"--api", f.srv.URL, "--state", filepath.Join(t.TempDir(), "s.json"), "--part-size", "5MiB", "--parallel", "1", file}, &out, &errOut, func(total int64, _ string, _ io.Writer) meter {
		bar.total = total
		return bar
	})
	msg := errOut.String()
	want := file + ": interrupted: S3 holds 2 of 4 parts (10 MiB of 20 MiB); run the same command again to resume: it sends the other 10 MiB (key "
	if code != exitInterrupted || !strings.Contains(msg, want) {
		t.Errorf("exit %d, stderr %q; want %d, saying %q", code, msg, exitInterrupted, want)
	}
	if bar.finished || !bar.exit {
		t.Errorf("bar: finished %v, exited %v; want left as it was", bar.finished, bar.exit)
	}
	t.Logf("the bar reached %d of %d bytes; S3 holds %d", bar.max, bar.total, 10<<20)
}

// A replayed create is not an earlier run: when this run minted the key
// (the first create's answer was lost and its retry replayed), the result
// line has no note.
func TestALostCreateAnswerIsNoEarlierRun(t *testing.T) {
	f := newReplayAPI(t, "store")
	f.loseCreate = true
	file := tempFile(t, 100)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", f.srv.URL, "--state", filepath.Join(t.TempDir(), "s.json"), "--quiet", file}, &out, &errOut, nil)
	if want := file + "\tcompleted\tupload u1\n"; code != exitOK || out.String() != want {
		t.Errorf("exit %d, stdout %q (stderr %q); want %d, %q", code, out.String(), errOut.String(), exitOK, want)
	}
}
