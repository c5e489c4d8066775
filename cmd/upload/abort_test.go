package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// partsAPI is an API for uploads in parts, S3 included, that takes every
// part and answers as mode says: "mismatch", Complete refuses the parts
// (409 parts_mismatch); "changed", the file is written to while its first
// part is sent; "completed", the create replays an upload completed with
// another file's compositeSha256. It records the aborts.
type partsAPI struct {
	srv  *httptest.Server
	mode string
	file string

	mu     sync.Mutex
	up     api.Upload
	aborts []string
	once   sync.Once
}

func newPartsAPI(t *testing.T, mode, file string) *partsAPI {
	f := &partsAPI{mode: mode, file: file}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /uploads", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.up = api.Upload{UploadID: "u1", Status: api.StatusPending, StorageKey: "uploads/u1", Filename: req.Filename, ContentType: req.ContentType,
			Bytes: req.Size, Multipart: &api.Multipart{PartSize: req.PartSize, PartCount: api.PartCount(req.Size, req.PartSize)}}
		if f.mode == "completed" {
			w.Header().Set("Idempotent-Replay", "true")
			f.up.Status, f.up.ETag, f.up.CompletedAt = api.StatusCompleted, `"e"`, "2026-12-01T00:00:00Z"
			f.up.CompositeSHA256 = fmt.Sprintf("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=-%d", f.up.Multipart.PartCount)
		}
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(f.up)
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
		if f.mode == "changed" {
			f.once.Do(func() {
				file, err := os.OpenFile(f.file, os.O_WRONLY, 0)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = file.WriteAt([]byte("changed"), 3)
				file.Close()
				later := time.Now().Add(time.Hour)
				_ = os.Chtimes(f.file, later, later)
			})
		}
		w.Header().Set("ETag", `"e"`)
	})
	mux.HandleFunc("POST /uploads/u1/complete", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		_ = json.NewEncoder(w).Encode(api.Error{Error: api.CodePartsMismatch, Message: "parts whose SHA-256 differs from the declared one: 1"})
	})
	mux.HandleFunc("DELETE /uploads/u1", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.aborts = append(f.aborts, r.PathValue("id"))
		f.up.Status = api.StatusAborted
		_ = json.NewEncoder(w).Encode(f.up)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// A file whose key is given up because the parts under it are not the
// file's (parts_mismatch) or because it changed while it was sent
// (file_changed) has its pending upload aborted, with or without --key, so
// that its parts and the tenant's place for it do not linger; an upload
// completed with another file's bytes is left alone.
func TestGivenUpUploadsAreAborted(t *testing.T) {
	for _, tc := range []struct {
		mode, key string
		exit      int
		aborts    int
		want      string
	}{
		{"mismatch", "", exitRejected, 1, "aborted upload u1"},
		{"mismatch", "0d7f1c2e-8a4b-4c6d-9e0f-1a2b3c4d5e6f", exitRejected, 1, "give another --key"},
		{"changed", "", exitFailed, 1, "aborted upload u1"},
		{"changed", "0d7f1c2e-8a4b-4c6d-9e0f-1a2b3c4d5e6f", exitFailed, 1, "with another --key"},
		{"completed", "", exitRejected, 0, "another file"},
	} {
		t.Run(tc.mode+map[bool]string{true: "-key"}[tc.key != ""], func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "big.bin")
			if err := os.WriteFile(file, bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16), 0o644); err != nil {
				t.Fatal(err)
			}
			f := newPartsAPI(t, tc.mode, file)
			state := filepath.Join(dir, "state.json")
			args := []string{"--api", f.srv.URL, "--state", state, "--part-size", "5MiB", "--parallel", "1", "--quiet"}
			if tc.key != "" {
				args = append(args, "--key", tc.key)
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(args, file), &out, &errOut, nil)
			msg := errOut.String()
			f.mu.Lock()
			aborts := len(f.aborts)
			f.mu.Unlock()
			if code != tc.exit || aborts != tc.aborts || !strings.Contains(msg, tc.want) {
				t.Fatalf("exit %d, %d aborts, stderr %q; want %d, %d aborts, %q", code, aborts, msg, tc.exit, tc.aborts, tc.want)
			}
			// A minted key was recorded at the create; with --key the state
			// never holds one, so there is nothing to check.
			if raw, _ := os.ReadFile(state); tc.key == "" && strings.Contains(string(raw), `"key"`) {
				t.Errorf("state %s; want the key forgotten", raw)
			}
		})
	}
}
