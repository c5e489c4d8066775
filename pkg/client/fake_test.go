package client

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/onceupload/onceupload/pkg/api"
)

// fakeAPI is the contract in memory, API and S3 in one server, with faults
// a test can ask for. It checks what S3 checks of a part or a whole PUT:
// its length and its signed SHA-256, and for a whole PUT the If-None-Match
// its URL signs (412 once the object exists). A whole PUT completes its
// upload at once, as the server records it when S3 tells it the object
// arrived, unless lateRecord says otherwise.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	byKey     map[string]*fakeUpload
	byID      map[string]*fakeUpload
	received  int64       // part bytes S3 took in
	puts      map[int]int // PUT attempts per part number
	signed    [][]int     // part numbers of each sign request
	completes int
	// completeBodies are the bodies of the complete requests.
	completeBodies []api.CompleteRequest
	inFlight       int
	maxFlight      int

	creates []api.CreateRequest

	// Faults.
	refuseCreate bool
	loseAnswer   map[int]int // part → answers to lose after storing it
	forbid       map[int]int // part → 403s to give before taking it
	expiredToken map[int]int // part → 400 ExpiredToken answers before taking it
	refuse       map[int]int // part → status to answer, forever
	dropAtFirst  []int       // parts S3 loses before the first complete
	onStored     func(part int)
	onPut        func(part int) // a part PUT arrived (before its body is read)
	// Faults of whole PUTs: answers to lose after storing the object; 409
	// ConditionalRequestConflict answers to give instead of taking it (a
	// racing PUT of the same upload, which stores the object when
	// racerStores); status answers that still say pending once the object
	// is stored (the server has not recorded it yet).
	loseWholeAnswer int
	conflicts       int
	racerStores     bool
	lateRecord      int
	tooManyUploads  bool // 429 too_many_uploads to multipart creates

	wholeAnswers []int // the status of each whole PUT answered
	statuses     int   // status requests
}

type fakeUpload struct {
	key   string
	body  api.Upload
	parts map[int][]byte
	whole []byte // the object of a single-PUT upload
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, byKey: map[string]*fakeUpload{}, byID: map[string]*fakeUpload{}, puts: map[int]int{},
		loseAnswer: map[int]int{}, forbid: map[int]int{}, expiredToken: map[int]int{}, refuse: map[int]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /uploads", f.create)
	mux.HandleFunc("GET /uploads/{id}", f.status)
	mux.HandleFunc("POST /uploads/{id}/parts", f.sign)
	mux.HandleFunc("GET /uploads/{id}/parts", f.list)
	mux.HandleFunc("POST /uploads/{id}/complete", f.complete)
	mux.HandleFunc("PUT /s3/{id}/{part}", f.putPart)
	mux.HandleFunc("PUT /s3/{id}", f.putWhole)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: code, Message: msg})
}

func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, 400, api.CodeInvalidRequest, err.Error())
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	if req.PartSize == 0 && req.SHA256 == "" {
		apiError(w, 400, api.CodeInvalidRequest, "sha256 is required without partSize")
		return
	}
	if f.refuseCreate {
		apiError(w, 400, api.CodeInvalidRequest, "refused by the test")
		return
	}
	if u, ok := f.byKey[key]; ok {
		w.Header().Set("Idempotent-Replay", "true")
		writeJSON(w, 201, u.body)
		return
	}
	if f.tooManyUploads && req.PartSize > 0 {
		w.Header().Set("Retry-After", "1") // which must not make it retried
		apiError(w, 429, CodeTooManyUploads, "Complete or abort some of your uploads, then create this one again.")
		return
	}
	id := "u" + strconv.Itoa(len(f.byID)+1)
	u := &fakeUpload{key: key, parts: map[int][]byte{}, body: api.Upload{
		UploadID: id, Status: api.StatusPending, StorageKey: "uploads/" + id, Filename: req.Filename,
		ContentType: req.ContentType, Bytes: req.Size, SHA256: req.SHA256,
	}}
	if req.PartSize > 0 {
		u.body.Multipart = &api.Multipart{PartSize: req.PartSize, PartCount: api.PartCount(req.Size, req.PartSize)}
	} else {
		sum, _ := hex.DecodeString(req.SHA256)
		u.body.Upload = &api.PutInstructions{Method: http.MethodPut, URL: f.srv.URL + "/s3/" + id,
			Headers: map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum), "If-None-Match": "*"}, ExpiresAt: "2030-01-01T00:00:00Z"}
	}
	f.byKey[key], f.byID[id] = u, u
	writeJSON(w, 201, u.body)
}

func (f *fakeAPI) upload(w http.ResponseWriter, r *http.Request) *fakeUpload {
	u := f.byID[r.PathValue("id")]
	if u == nil {
		apiError(w, 404, api.CodeNotFound, "no such upload")
	}
	return u
}

func (f *fakeAPI) status(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses++
	u := f.upload(w, r)
	if u == nil {
		return
	}
	if u.whole != nil && u.body.Status == api.StatusPending {
		if f.lateRecord > 0 {
			f.lateRecord--
		} else {
			f.recordWholeLocked(u)
		}
	}
	writeJSON(w, 200, u.body)
}

func (f *fakeAPI) sign(w http.ResponseWriter, r *http.Request) {
	var req api.SignPartsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Parts) == 0 || len(req.Parts) > api.MaxPartsPerSign {
		apiError(w, 400, api.CodeInvalidRequest, fmt.Sprintf("%d parts (%v)", len(req.Parts), err))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.upload(w, r)
	if u == nil {
		return
	}
	if u.body.Status != api.StatusPending {
		apiError(w, 409, api.CodeUploadNotPending, u.body.Status)
		return
	}
	var out api.SignedParts
	var numbers []int
	for _, p := range req.Parts {
		sum, err := hex.DecodeString(p.SHA256)
		if err != nil || len(sum) != 32 || p.PartNumber < 1 || p.PartNumber > u.body.Multipart.PartCount {
			apiError(w, 400, api.CodeInvalidRequest, "bad part")
			return
		}
		numbers = append(numbers, p.PartNumber)
		out.Parts = append(out.Parts, api.SignedPart{PartNumber: p.PartNumber, PutInstructions: api.PutInstructions{
			Method: http.MethodPut, URL: fmt.Sprintf("%s/s3/%s/%d", f.srv.URL, u.body.UploadID, p.PartNumber),
			Headers: map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum)}, ExpiresAt: "2030-01-01T00:00:00Z",
		}})
	}
	f.signed = append(f.signed, numbers)
	writeJSON(w, 200, out)
}

func (f *fakeAPI) storedLocked(u *fakeUpload) []api.StoredPart {
	var out []api.StoredPart
	for n, b := range u.parts {
		sum := sha256.Sum256(b)
		out = append(out, api.StoredPart{PartNumber: n, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]), ETag: "e"})
	}
	slices.SortFunc(out, func(a, b api.StoredPart) int { return a.PartNumber - b.PartNumber })
	return out
}

func (f *fakeAPI) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.upload(w, r); u != nil {
		writeJSON(w, 200, api.PartList{Parts: f.storedLocked(u)})
	}
}

func (f *fakeAPI) complete(w http.ResponseWriter, r *http.Request) {
	var req api.CompleteRequest
	if raw, _ := io.ReadAll(r.Body); len(raw) > 0 {
		if err := json.Unmarshal(raw, &req); err != nil {
			apiError(w, 400, api.CodeInvalidRequest, err.Error())
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.upload(w, r)
	if u == nil {
		return
	}
	f.completes++
	f.completeBodies = append(f.completeBodies, req)
	if f.completes == 1 {
		for _, n := range f.dropAtFirst {
			delete(u.parts, n)
		}
	}
	if u.body.Status == api.StatusCompleted {
		writeJSON(w, 200, u.body)
		return
	}
	for n := 1; n <= u.body.Multipart.PartCount; n++ {
		if int64(len(u.parts[n])) != api.PartLength(u.body.Bytes, u.body.Multipart.PartSize, n) {
			apiError(w, 409, api.CodePartsMissing, fmt.Sprintf("part %d is missing", n))
			return
		}
	}
	if len(req.Parts) > 0 {
		var bad []string
		for i, p := range req.Parts {
			sum := sha256.Sum256(u.parts[p.PartNumber])
			if p.PartNumber != i+1 || p.SHA256 != hex.EncodeToString(sum[:]) {
				bad = append(bad, strconv.Itoa(p.PartNumber))
			}
		}
		if len(bad) > 0 || len(req.Parts) != u.body.Multipart.PartCount {
			apiError(w, 409, api.CodePartsMismatch, "parts whose SHA-256 differs from the declared one: "+strings.Join(bad, ", "))
			return
		}
	}
	whole, composite := sha256.New(), sha256.New()
	for n := 1; n <= u.body.Multipart.PartCount; n++ {
		whole.Write(u.parts[n])
		sum := sha256.Sum256(u.parts[n])
		composite.Write(sum[:])
	}
	declared := cmp.Or(u.body.SHA256, req.SHA256)
	if declared != "" && hex.EncodeToString(whole.Sum(nil)) != declared {
		f.t.Errorf("complete: the parts are not the file the client declared")
	}
	u.body.SHA256 = declared
	u.body.CompositeSHA256 = fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(composite.Sum(nil)), u.body.Multipart.PartCount)
	u.body.Status, u.body.ETag, u.body.CompletedAt = api.StatusCompleted, `"etag-1"`, "2026-11-29T12:00:00Z"
	writeJSON(w, 200, u.body)
}

func (f *fakeAPI) putPart(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("part"))
	f.mu.Lock()
	u := f.byID[r.PathValue("id")]
	f.puts[n]++
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	want := api.PartLength(u.body.Bytes, u.body.Multipart.PartSize, n)
	status := f.refuse[n]
	forbid := f.forbid[n] > 0
	if forbid {
		f.forbid[n]--
	}
	expired := !forbid && f.expiredToken[n] > 0
	if expired {
		f.expiredToken[n]--
	}
	onPut := f.onPut
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	if onPut != nil {
		onPut(n)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	sum := sha256.Sum256(body)
	switch {
	case status != 0:
		w.WriteHeader(status)
		return
	case forbid:
		w.WriteHeader(403)
		_, _ = io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`)
		return
	case expired: // the session credentials that signed the URL expired
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>`)
		return
	case r.ContentLength != want || int64(len(body)) != want:
		w.WriteHeader(403)
		return
	case r.Header.Get("x-amz-checksum-sha256") != base64.StdEncoding.EncodeToString(sum[:]):
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `<Error><Code>BadDigest</Code></Error>`)
		return
	}
	f.mu.Lock()
	u.parts[n] = body
	f.received += int64(len(body))
	lose := f.loseAnswer[n] > 0
	if lose {
		f.loseAnswer[n]--
	}
	onStored := f.onStored
	f.mu.Unlock()
	if onStored != nil {
		onStored(n)
	}
	if lose {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	w.Header().Set("ETag", `"e"`)
	w.WriteHeader(200)
}

// putWhole is S3 taking the object of a single-PUT upload: once, when the
// PUT sends If-None-Match: * as its URL signs; after that, 412.
func (f *fakeAPI) putWhole(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	u := f.upload(w, r)
	f.puts[0]++
	f.mu.Unlock()
	if u == nil {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	answer := func(status int, xmlBody string) {
		f.mu.Lock()
		f.wholeAnswers = append(f.wholeAnswers, status)
		f.mu.Unlock()
		if status == 200 {
			w.Header().Set("ETag", `"etag-1"`)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, xmlBody)
	}
	sum := sha256.Sum256(body)
	if int64(len(body)) != u.body.Bytes || r.Header.Get("x-amz-checksum-sha256") != base64.StdEncoding.EncodeToString(sum[:]) {
		answer(400, `<Error><Code>BadDigest</Code></Error>`)
		return
	}
	if r.Header.Get("If-None-Match") != "*" {
		answer(403, `<Error><Code>SignatureDoesNotMatch</Code></Error>`) // the URL signs it
		return
	}
	f.mu.Lock()
	if f.conflicts > 0 {
		f.conflicts--
		if f.racerStores && u.whole == nil {
			u.whole = body // the other PUT, with the same bytes, wins
		}
		f.mu.Unlock()
		answer(409, `<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress against this resource. Please try again.</Message></Error>`)
		return
	}
	if u.whole != nil {
		f.mu.Unlock()
		answer(412, `<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-None-Match</Condition></Error>`)
		return
	}
	u.whole = body
	f.received += int64(len(body))
	if f.lateRecord == 0 {
		f.recordWholeLocked(u)
	}
	lose := f.loseWholeAnswer > 0
	if lose {
		f.loseWholeAnswer--
	}
	f.mu.Unlock()
	if lose {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	answer(200, "")
}

// recordWholeLocked is the server recording the object of a single-PUT
// upload: completed.
func (f *fakeAPI) recordWholeLocked(u *fakeUpload) {
	u.body.Status, u.body.Upload, u.body.ETag, u.body.CompletedAt = api.StatusCompleted, nil, `"etag-1"`, "2026-11-29T12:00:00Z"
}

// object is the stored object of the upload with key, or nil while it is
// not completed.
func (f *fakeAPI) object(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.byKey[key]
	if u == nil || u.body.Status != api.StatusCompleted {
		return nil
	}
	if u.body.Multipart == nil {
		return u.whole
	}
	var out []byte
	for n := 1; n <= u.body.Multipart.PartCount; n++ {
		out = append(out, u.parts[n]...)
	}
	return out
}
