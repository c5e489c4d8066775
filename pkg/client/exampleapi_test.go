package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/onceupload/onceupload/pkg/api"
)

// startExampleAPI stands in for an onceupload deployment in the examples
// that run: one-PUT uploads only, stored in memory, completed as soon as
// the bytes arrive whole.
func startExampleAPI() *httptest.Server {
	var mu sync.Mutex
	uploads := map[string]*api.Upload{}
	mux := http.NewServeMux()
	var srv *httptest.Server
	reply := func(w http.ResponseWriter, status int, u api.Upload) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(u)
	}
	mux.HandleFunc("POST /uploads", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		id := "u" + strconv.Itoa(len(uploads)+1)
		u := &api.Upload{UploadID: id, Status: api.StatusPending, StorageKey: "uploads/" + id, Filename: req.Filename,
			ContentType: req.ContentType, Bytes: req.Size, SHA256: req.SHA256,
			Upload: &api.PutInstructions{Method: http.MethodPut, URL: srv.URL + "/objects/" + id}}
		uploads[id] = u
		reply(w, http.StatusCreated, *u)
	})
	mux.HandleFunc("PUT /objects/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		mu.Lock()
		defer mu.Unlock()
		u := uploads[r.PathValue("id")]
		if u == nil || int64(len(body)) != u.Bytes || hex.EncodeToString(sum[:]) != u.SHA256 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		u.Status, u.Upload = api.StatusCompleted, nil
	})
	mux.HandleFunc("GET /uploads/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if u := uploads[r.PathValue("id")]; u != nil {
			reply(w, http.StatusOK, *u)
			return
		}
		http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
	})
	srv = httptest.NewServer(mux)
	return srv
}
