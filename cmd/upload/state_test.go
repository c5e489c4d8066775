package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
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
)

// keyedAPI is an API for one-PUT uploads that keeps one upload per
// Idempotency-Key, as the server does: a create with a known key replays
// it. It counts the creates of each key and the objects stored.
type keyedAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	creates map[string]int         // by key, replays included
	uploads map[string]*api.Upload // by key
	held    map[string]string      // key → id of an upload the server holds from an earlier run
	objects int
}

func newKeyedAPI(t *testing.T) *keyedAPI {
	k := &keyedAPI{creates: map[string]int{}, uploads: map[string]*api.Upload{}, held: map[string]string{}}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/uploads":
			key := r.Header.Get("Idempotency-Key")
			k.creates[key]++
			up, ok := k.uploads[key]
			if !ok {
				var req api.CreateRequest
				_ = json.NewDecoder(r.Body).Decode(&req)
				id, held := k.held[key]
				if !held {
					id = fmt.Sprintf("u%d", len(k.uploads)+1)
				}
				ok = held
				up = &api.Upload{UploadID: id, Status: api.StatusPending, Filename: req.Filename, ContentType: req.ContentType,
					Bytes: req.Size, SHA256: req.SHA256, Upload: &api.PutInstructions{Method: http.MethodPut, URL: k.srv.URL + "/s3/" + id, Headers: map[string]string{}}}
				k.uploads[key] = up
			}
			if ok {
				w.Header().Set("Idempotent-Replay", "true")
			}
			w.WriteHeader(201)
			_ = json.NewEncoder(w).Encode(up)
		case r.Method == http.MethodPut:
			_, _ = io.Copy(io.Discard, r.Body)
			for _, up := range k.uploads {
				if "/s3/"+up.UploadID == r.URL.Path && up.Status == api.StatusPending {
					up.Status, up.Upload = api.StatusCompleted, nil
					k.objects++
				}
			}
		case r.Method == http.MethodGet:
			for _, up := range k.uploads {
				if "/uploads/"+up.UploadID == r.URL.Path {
					_ = json.NewEncoder(w).Encode(up)
					return
				}
			}
			w.WriteHeader(404)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *keyedAPI) counts() (creates map[string]int, objects int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.creates), k.objects
}

// spellings are ways of typing the base URL of the API at base
// (http://127.0.0.1:PORT): one API.
func spellings(base string) []string {
	return []string{base, base + "/", base + "//", "HTTP://" + strings.TrimPrefix(base, "http://") + "//"}
}

// oldID is the id the state file held for file before identify normalised
// the API: the URL as typed.
func oldID(t *testing.T, apiURL, file string) string {
	t.Helper()
	abs, _ := filepath.Abs(file)
	info, err := os.Stat(abs)
	if err != nil {
		t.Fatal(err)
	}
	return fileID{api: apiURL, path: abs, size: info.Size(), mtime: info.ModTime().UnixNano()}.String()
}

func readState(t *testing.T, path string) map[string]entry {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatalf("state %s: %v", raw, err)
	}
	return entries
}

type jsonLine struct {
	Key      string     `json:"key"`
	Replayed bool       `json:"replayed"`
	Note     string     `json:"note"`
	Upload   api.Upload `json:"upload"`
}

// The same file sent with --api spelled four ways is one upload: one key,
// one create, one object; the reruns say "already uploaded" and send
// nothing.
func TestEverySpellingOfTheAPIIsOneUpload(t *testing.T) {
	k := newKeyedAPI(t)
	file := tempFile(t, 100)
	statePath := filepath.Join(t.TempDir(), "s.json")
	var keys []string
	for i, apiURL := range spellings(k.srv.URL) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", apiURL, "--quiet", "--json", "--state", statePath, file}, &out, &errOut, nil)
		var l jsonLine
		if err := json.Unmarshal(out.Bytes(), &l); code != exitOK || err != nil {
			t.Fatalf("--api %s: exit %d, stdout %q, stderr %q; want %d and a JSON line", apiURL, code, out.String(), errOut.String(), exitOK)
		}
		keys = append(keys, l.Key)
		if i > 0 && !strings.Contains(l.Note, "already uploaded") {
			t.Errorf("--api %s: note %q; want \"already uploaded\"", apiURL, l.Note)
		}
	}
	creates, objects := k.counts()
	if len(slices.Compact(slices.Clone(keys))) != 1 || len(creates) != 1 || creates[keys[0]] != 1 || objects != 1 {
		t.Errorf("keys %v, creates per key %v, %d objects; want one key, created once, one object", keys, creates, objects)
	}
	entries := readState(t, statePath)
	id, _ := identify(k.srv.URL, file)
	if _, ok := entries[id]; !ok || len(entries) != 1 {
		t.Errorf("state %v; want one entry, under %q", entries, id)
	}
}

// Against a real local stack: the bucket holds one object after the four
// runs, and the three reruns send no request.
func TestEverySpellingOfTheAPIStoresOneObject(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-spellings", Bucket: "uploads-spellings",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	file := tempFile(t, 10_000)
	statePath := filepath.Join(t.TempDir(), "s.json")
	var ids []string
	for _, apiURL := range spellings(st.APIURL) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", apiURL, "--quiet", "--json", "--state", statePath, file}, &out, &errOut, nil)
		var l jsonLine
		if err := json.Unmarshal(out.Bytes(), &l); code != exitOK || err != nil || l.Upload.Status != api.StatusCompleted {
			t.Fatalf("--api %s: exit %d, stdout %q, stderr %q; want %d and a completed upload", apiURL, code, out.String(), errOut.String(), exitOK)
		}
		ids = append(ids, l.Upload.UploadID)
	}
	listed, err := testenv.S3Client(st.S3URL, nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(slices.Compact(slices.Clone(ids))) != 1 || len(listed.Contents) != 1 {
		t.Errorf("upload ids %v, %d objects in the bucket; want one upload, one object", ids, len(listed.Contents))
	}
}

// Entries left by the old state file under several spellings of one API,
// for one file, fold into one under the normalised id, saved: the winner is
// a completed entry (within the window), else a pending one with an upload
// id, else a bare key; within a class, the most recently started, then the
// smallest key. Entries of other files, and ids that are not the state
// file's, are left alone.
func TestStateFoldsSpellingsOfTheAPI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(minutes int) time.Time { return now.Add(time.Duration(minutes) * time.Minute) }
	done := func(minutes int) *time.Time { t := at(minutes); return &t }
	completed := func(key string, started, finished int) entry {
		return entry{Key: key, Started: at(started), UploadID: "u-" + key, Completed: done(finished), Upload: &api.Upload{UploadID: "u-" + key, Status: api.StatusCompleted}}
	}
	pending := func(key string, started int) entry {
		return entry{Key: key, Started: at(started), UploadID: "u-" + key, PartSize: 8 << 20}
	}
	bare := func(key string, started int) entry { return entry{Key: key, Started: at(started)} }

	const base = "http://127.0.0.1:3000"
	const path = "/data/a|b.bin" // a '|' in the path: the id is read from both ends
	id := func(apiURL string) string { return apiURL + "|" + path + "|100|5" }
	for _, tc := range []struct {
		name    string
		entries map[string]entry // under spellings of base, for one file
		want    string           // the key kept
	}{
		{"completed, pending and bare", map[string]entry{
			id(base + "/"):                completed("key-completed", -50, -40),
			id(base):                      pending("key-pending", -10),
			id("HTTP://127.0.0.1:3000//"): bare("key-bare", -5),
		}, "key-completed"},
		{"pending and bare", map[string]entry{
			id(base + "//"): bare("key-bare", -5),
			id(base + "/"):  pending("key-pending", -30),
		}, "key-pending"},
		{"two completed: the most recently started", map[string]entry{
			id(base):       completed("key-older", -50, -10),
			id(base + "/"): completed("key-newer", -40, -30),
		}, "key-newer"},
		{"two pending: the most recently started", map[string]entry{
			id(base + "/"):  pending("key-older", -30),
			id(base + "//"): pending("key-newer", -20),
			id(base):        bare("key-bare", -1),
		}, "key-newer"},
		{"two bare keys started at once: the smaller key", map[string]entry{
			id(base + "/"): bare("key-b", -3),
			id(base):       bare("key-a", -3),
		}, "key-a"},
		{"a completed entry past the window does not count", map[string]entry{
			id(base + "/"): completed("key-expired", -25*60, -24*60),
			id(base):       pending("key-pending", -10),
		}, "key-pending"},
		{"one old spelling alone is respelled", map[string]entry{
			id("http://127.0.0.1:3000/"): bare("key-bare", -1),
		}, "key-bare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others := map[string]entry{
				base + "|/data/other.bin|100|5":   bare("key-other-file", -1),
				base + "/|/data/a|b.bin|100|6":    bare("key-other-mtime", -1), // another version of the file: its own entry, respelled
				"file-1":                          bare("key-not-an-id", -1),
				base + "|data/relative.bin|100|5": bare("key-relative", -1),
				base + "|/data/x.bin|big|5":       bare("key-bad-size", -1),
				"ftp://h|/data/a|b.bin|100|5":     bare("key-ftp", -1),
			}
			s := &stateFile{path: filepath.Join(t.TempDir(), "s.json"), window: 24 * time.Hour, now: func() time.Time { return now }}
			written := maps.Clone(others)
			maps.Copy(written, tc.entries)
			if err := s.save(written); err != nil {
				t.Fatal(err)
			}
			// Any run's first look at the state folds it, and saves.
			e, err := s.entryFor(id(base), func() string { return "key-minted" })
			if err != nil || e.Key != tc.want {
				t.Fatalf("entryFor = %+v, %v; want the entry of %s", e, err, tc.want)
			}
			got := readState(t, s.path)
			want := map[string]string{id(base): tc.want, base + "|/data/a|b.bin|100|6": "key-other-mtime"}
			for id, e := range others {
				if id != base+"/|/data/a|b.bin|100|6" {
					want[id] = e.Key
				}
			}
			gotKeys := map[string]string{}
			for id, e := range got {
				gotKeys[id] = e.Key
			}
			if !maps.Equal(gotKeys, want) {
				t.Errorf("state saved %v\nwant %v", gotKeys, want)
			}
		})
	}
}

// Hand-written entries of one file under spellings of the API: a run finds
// the winner. Completed, pending and bare: "already uploaded" with the
// completed entry's upload id and no request. Pending and bare: the run
// resumes the pending upload with its key (the server replays it) and
// creates nothing under the bare key.
func TestRerunResumesTheFoldedEntry(t *testing.T) {
	t.Run("completed wins", func(t *testing.T) {
		k := newKeyedAPI(t)
		file := tempFile(t, 100)
		statePath := filepath.Join(t.TempDir(), "s.json")
		started := time.Now().UTC().Add(-time.Hour)
		finished := started.Add(time.Minute)
		s := &stateFile{path: statePath, window: 24 * time.Hour}
		sp := spellings(k.srv.URL)
		if err := s.save(map[string]entry{
			oldID(t, sp[1], file): {Key: "key-completed-0123", Started: started, UploadID: "u-done", Completed: &finished, Upload: &api.Upload{UploadID: "u-done", Status: api.StatusCompleted}},
			oldID(t, sp[0], file): {Key: "key-pending-012345", Started: started.Add(30 * time.Minute), UploadID: "u-pending"},
			oldID(t, sp[3], file): {Key: "key-bare-012345678", Started: started.Add(40 * time.Minute)},
		}); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", sp[2], "--quiet", "--state", statePath, file}, &out, &errOut, nil)
		creates, objects := k.counts()
		if code != exitOK || !strings.Contains(out.String(), "u-done") || !strings.Contains(out.String(), "already uploaded") || len(creates) != 0 || objects != 0 {
			t.Errorf("exit %d, stdout %q, stderr %q, creates %v, %d objects; want \"already uploaded\" with u-done and no request", code, out.String(), errOut.String(), creates, objects)
		}
		entries := readState(t, statePath)
		id, _ := identify(k.srv.URL, file)
		if e, ok := entries[id]; !ok || len(entries) != 1 || e.Key != "key-completed-0123" {
			t.Errorf("state %v; want the completed entry alone, under %q", entries, id)
		}
	})
	t.Run("pending wins", func(t *testing.T) {
		k := newKeyedAPI(t)
		k.held["key-pending-012345"] = "u-pending" // created by the run that wrote the entry
		file := tempFile(t, 100)
		statePath := filepath.Join(t.TempDir(), "s.json")
		started := time.Now().UTC().Add(-time.Hour)
		s := &stateFile{path: statePath, window: 24 * time.Hour}
		sp := spellings(k.srv.URL)
		if err := s.save(map[string]entry{
			oldID(t, sp[1], file): {Key: "key-pending-012345", Started: started, UploadID: "u-pending"},
			oldID(t, sp[2], file): {Key: "key-bare-012345678", Started: started.Add(time.Minute)},
		}); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", sp[0], "--quiet", "--json", "--state", statePath, file}, &out, &errOut, nil)
		var l jsonLine
		_ = json.Unmarshal(out.Bytes(), &l)
		creates, objects := k.counts()
		if code != exitOK || l.Key != "key-pending-012345" || !l.Replayed || l.Upload.UploadID != "u-pending" || l.Upload.Status != api.StatusCompleted {
			t.Errorf("exit %d, stdout %q, stderr %q; want u-pending completed with key-pending-012345, replayed", code, out.String(), errOut.String())
		}
		if len(creates) != 1 || creates["key-pending-012345"] != 1 || objects != 1 {
			t.Errorf("creates per key %v, %d objects; want key-pending-012345's create only, one object", creates, objects)
		}
		entries := readState(t, statePath)
		id, _ := identify(k.srv.URL, file)
		if e, ok := entries[id]; !ok || len(entries) != 1 || e.Key != "key-pending-012345" || e.Completed == nil {
			t.Errorf("state %v; want the pending entry alone, completed, under %q", entries, id)
		}
	})
}

// The unfinished uploads in parts named after a 429 too_many_uploads are
// the API's however it is spelled, in the state file or on the command line.
func TestUnfinishedFindsEverySpelling(t *testing.T) {
	const base = "http://127.0.0.1:3000"
	s := &stateFile{path: filepath.Join(t.TempDir(), "s.json"), window: time.Hour}
	if err := s.save(map[string]entry{
		base + "/|/data/a.bin|104857600|1":                {Key: "key-a", UploadID: "u-a", PartSize: 8 << 20},
		"HTTP://127.0.0.1:3000//|/data/b.bin|104857600|1": {Key: "key-b", UploadID: "u-b", PartSize: 8 << 20},
		base + "|/data/c|d.bin|104857600|1":               {Key: "key-c", UploadID: "u-c", PartSize: 8 << 20},
		"http://localhost:3000|/data/e.bin|104857600|1":   {Key: "key-e", UploadID: "u-e", PartSize: 8 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	for _, apiURL := range []string{base, base + "//"} {
		got, err := s.unfinished(apiURL)
		want := []string{"/data/a.bin (upload u-a)", "/data/b.bin (upload u-b)", "/data/c|d.bin (upload u-c)"}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("unfinished(%q) = %q, %v; want %q", apiURL, got, err, want)
		}
	}
}

func TestParseID(t *testing.T) {
	for id, want := range map[string]fileID{
		"http://h:3000|/data/a.bin|10|5":     {api: "http://h:3000", path: "/data/a.bin", size: 10, mtime: 5},
		"http://h:3000|/data/a|b|c.bin|10|5": {api: "http://h:3000", path: "/data/a|b|c.bin", size: 10, mtime: 5},
		"http://h:3000/|/a.bin|10|-5":        {api: "http://h:3000/", path: "/a.bin", size: 10, mtime: -5},
	} {
		if got, ok := parseID(id); !ok || got != want || got.String() != id {
			t.Errorf("parseID(%q) = %+v, %v; want %+v", id, got, ok, want)
		}
	}
	for _, id := range []string{"", "a", "file-1", "http://h|/a.bin|10", "http://h|/a.bin|x|5", "http://h|/a.bin|10|y", "http://h|rel.bin|10|5", "|||", "http://h/a|b|/a.bin|10|5"} {
		if got, ok := parseID(id); ok {
			t.Errorf("parseID(%q) = %+v; want it left alone", id, got)
		}
	}
}
