package devstack

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Many goroutines send distinct, mixed requests through the front door for
// several tenants: creates, replays, key reuse, status of their own uploads
// and of another tenant's, and PUTs that the S3 notifications finalize
// concurrently. Every answer must be its own request's: the front door once
// handed one request another's answer (about 1 in 23,000 under load), which
// a test that only counts statuses cannot see.
func TestEveryAnswerIsItsOwn(t *testing.T) {
	for name, rie := range map[string]bool{"in-process": false, "emulator": true} {
		t.Run(name, func(t *testing.T) {
			st := startStack(t, rie)
			const workers, tenants = 24, 6
			runFor := 6 * time.Second
			if d, err := time.ParseDuration(os.Getenv("HAMMER_DURATION")); err == nil {
				runFor = d // a longer soak: HAMMER_DURATION=2m
			}
			var checked, wrong, puts atomic.Int64
			// The run lasts runFor and at least until it has checked enough
			// traffic to mean anything, however slow the machine is today:
			// a count, not a clock, decides that it is enough. Too many
			// wrong answers end it early.
			const minAnswers, minPuts = 500, 50
			var mu sync.Mutex
			var put []ownUpload // uploads whose bytes were sent
			fail := func(format string, args ...any) {
				if wrong.Add(1) <= 5 {
					t.Errorf(format, args...)
				}
			}
			deadline := time.Now().Add(runFor)
			running := func() bool {
				enough := !time.Now().Before(deadline) && checked.Load() >= minAnswers && puts.Load() >= minPuts
				return !enough && wrong.Load() <= 5
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					tenant := fmt.Sprintf("tenant-%d", w%tenants)
					other := fmt.Sprintf("tenant-%d", (w+1)%tenants)
					auth := jwt(fmt.Sprintf(`{"sub":%q}`, tenant))
					for i := 0; running(); i++ {
						key := fmt.Sprintf("own-answer-%02d-%06d", w, i)
						content := fmt.Appendf(nil, "worker %d request %d %s", w, i, bytes.Repeat([]byte{'x'}, (w*31+i)%97))
						body := ownBody(w, i, content)
						first := do(t, "POST", st.APIURL+"/uploads", key, auth, body)
						checked.Add(1)
						u, ok := checkOwn(first, 201, tenant, key, w, i, content)
						if !ok {
							fail("%s create %s: %d %s is not its own answer", tenant, key, first.status, first.body)
							continue
						}
						switch i % 4 {
						case 0: // replay: the same bytes, marked
							replay := do(t, "POST", st.APIURL+"/uploads", key, auth, body)
							checked.Add(1)
							if replay.status != 201 || !bytes.Equal(replay.body, first.body) || replay.header.Get("Idempotent-Replay") != "true" {
								fail("%s replay %s: %d %s, want its first answer %s", tenant, key, replay.status, replay.body, first.body)
							}
						case 1: // key reuse: 422, never the first answer
							reuse := do(t, "POST", st.APIURL+"/uploads", key, auth, ownBody(w, i, append(content, '!')))
							checked.Add(1)
							if reuse.status != 422 || !bytes.Contains(reuse.body, []byte(`"idempotency_key_reuse"`)) {
								fail("%s reuse %s: %d %s, want 422", tenant, key, reuse.status, reuse.body)
							}
						case 2: // status: its own upload; another tenant gets 404
							status := do(t, "GET", st.APIURL+"/uploads/"+u.UploadID, "", auth, nil)
							checked.Add(1)
							if _, ok := checkOwn(status, 200, tenant, key, w, i, content); !ok {
								fail("%s status %s: %d %s is not its own upload", tenant, u.UploadID, status.status, status.body)
							}
							foreign := do(t, "GET", st.APIURL+"/uploads/"+u.UploadID, "", jwt(fmt.Sprintf(`{"sub":%q}`, other)), nil)
							checked.Add(1)
							if foreign.status != 404 {
								fail("%s read %s's upload: %d %s, want 404", other, tenant, foreign.status, foreign.body)
							}
						case 3: // the bytes: finalize runs from S3's notifications
							if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
								fail("PUT %s: %d %v", u.UploadID, code, err)
								continue
							}
							mu.Lock()
							put = append(put, ownUpload{tenant, key, w, i, content, u.UploadID})
							mu.Unlock()
							puts.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if wrong.Load() > 0 {
				t.Fatalf("%d of %d answers were wrong", wrong.Load(), checked.Load())
			}
			// Finalize ran concurrently for every PUT; each record completed
			// with its own object (size, and S3's MD5 ETag of its bytes).
			store := dynamostore.New(testenv.DynamoClient(st.DynamoURL, nil), st.Table)
			for _, p := range put {
				rec := waitCompleted(t, store, p.uploadID)
				sum := md5.Sum(p.content)
				if f := fieldsOf(t, rec); f.ETag != hex.EncodeToString(sum[:]) || f.Size != int64(len(p.content)) {
					t.Fatalf("upload %s completed with etag %q size %d, want its own object's %x, %d", p.uploadID, f.ETag, f.Size, sum, len(p.content))
				}
			}
			t.Logf("%d answers checked, %d uploads finalized concurrently, %d presign instances", checked.Load(), len(put), st.invokers["PresignFunction"].instances())
		})
	}
}

// hammerClient keeps its connections, so that thousands of requests do not
// use up the loopback's ephemeral ports.
var hammerClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

type ownUpload struct {
	tenant, key string
	worker, seq int
	content     []byte
	uploadID    string
}

func ownBody(worker, seq int, content []byte) []byte {
	sum := sha256.Sum256(content)
	return fmt.Appendf(nil, `{"filename":"w%d-r%d.txt","contentType":"text/plain","size":%d,"sha256":"%x"}`, worker, seq, len(content), sum)
}

// checkOwn reports whether a is the answer to the create (or status) of
// this tenant's key with this content: every field that identifies it.
func checkOwn(a answer, status int, tenant, key string, worker, seq int, content []byte) (api.Upload, bool) {
	var u api.Upload
	if a.status != status || json.Unmarshal(a.body, &u) != nil {
		return u, false
	}
	sum := sha256.Sum256(content)
	id, err := upload.ParseUploadID(u.UploadID)
	ok := err == nil && id == idempotency.NewID(apigateway.JWTPrincipal("", tenant), key) &&
		u.Filename == fmt.Sprintf("w%d-r%d.txt", worker, seq) && u.Bytes == int64(len(content)) && u.SHA256 == hex.EncodeToString(sum[:])
	if status == 201 {
		ok = ok && a.header.Get("Location") == "/uploads/"+u.UploadID
	}
	return u, ok
}

// do sends a JSON request with the Idempotency-Key and Authorization
// headers given (if not empty). A request that cannot be sent is reported
// with t.Error, so that goroutines may call it, and answered with status 0.
func do(t *testing.T, method, url, key, auth string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return answer{}
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hammerClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// waitCompleted polls the record of uploadID until it is completed, which
// only finalize (through S3's notification) does, and returns it.
func waitCompleted(t *testing.T, store *dynamostore.Store, uploadID string) recordstore.Record {
	t.Helper()
	id, _ := upload.ParseUploadID(uploadID)
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec, err := store.GetRecord(context.Background(), id)
		if err == nil && rec.State == idempotency.StateCompleted {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload %s never completed through the notification path: %+v %v", uploadID, rec, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uploadFields are the fields of an upload's record these tests check, of
// the types the service stores them as.
type uploadFields struct {
	ETag     string `dynamodbav:"etag"`
	Size     int64  `dynamodbav:"size"`
	Checksum string `dynamodbav:"checksum_sha256"`
}

// fieldsOf decodes rec's fields; a field of another type fails t.
func fieldsOf(t *testing.T, rec recordstore.Record) uploadFields {
	t.Helper()
	var f uploadFields
	if err := rec.Data.Decode(&f); err != nil {
		t.Fatalf("upload %s: %v", rec.ClaimID, err)
	}
	return f
}
