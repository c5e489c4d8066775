package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// The bootstraps the emulator runs are built once (testenv.Bootstraps)
// and removed at the end.
func TestMain(m *testing.M) { testenv.Main(m) }

// startStack starts the template's stack, its functions under the
// emulator if rie, else in process; each of with changes the config first.
func startStack(t *testing.T, rie bool, with ...func(*Config)) *Stack {
	t.Helper()
	testenv.RequireTools(t, "dynoxide")
	cfg := Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-test", Bucket: "uploads-test", RIE: rie,
	}
	if rie {
		testenv.RequireTools(t, "aws-lambda-rie")
		cfg.BootstrapDir = testenv.Bootstraps(t, "")
	}
	// The stack's warnings and errors (a function that failed, an instance
	// that did not start) are shown with a failing test: a 500 from the
	// front door says nothing of why.
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, f := range with {
		f(&cfg)
	}
	t.Cleanup(func() {
		if t.Failed() && logs.Len() > 0 {
			t.Logf("the local stack logged:\n%s", logs)
		}
	})
	st, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// lockedBuffer is a bytes.Buffer that the stack's goroutines may write to
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// call is do without an Authorization header, for the test goroutine: it
// stops the test when the request cannot be sent.
func call(t *testing.T, method, url, key string, body []byte) answer {
	t.Helper()
	a := do(t, method, url, key, "", body)
	if a.status == 0 {
		t.FailNow() // do reported why
	}
	return a
}

func createBody(content []byte) []byte {
	sum := sha256.Sum256(content)
	return fmt.Appendf(nil, `{"filename":"notes.txt","contentType":"text/plain","size":%d,"sha256":"%s"}`, len(content), hex.EncodeToString(sum[:]))
}

// The README's walkthrough, through plain HTTP, in both function modes.
func TestWalkthrough(t *testing.T) {
	for name, rie := range map[string]bool{"in-process": false, "emulator": true} {
		t.Run(name, func(t *testing.T) {
			st := startStack(t, rie)
			content := []byte("hello, exactly once\n")
			const key = "walkthrough-key-0001"

			first := call(t, "POST", st.APIURL+"/uploads", key, createBody(content))
			replay := call(t, "POST", st.APIURL+"/uploads", key, createBody(content))
			if first.status != 201 || replay.status != 201 || !bytes.Equal(first.body, replay.body) || replay.header.Get("Idempotent-Replay") != "true" {
				t.Fatalf("create %d %s\nreplay %d %v %s", first.status, first.body, replay.status, replay.header, replay.body)
			}
			if other := call(t, "POST", st.APIURL+"/uploads", key, createBody([]byte("other"))); other.status != 422 {
				t.Fatalf("other body: %d %s, want 422", other.status, other.body)
			}
			var u api.Upload
			if err := json.Unmarshal(first.body, &u); err != nil {
				t.Fatal(err)
			}

			if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
				t.Fatalf("PUT: %d %v", code, err)
			}

			// Finalize must come through the S3 server's notification, so
			// watch the record itself (a GET would complete it on its own).
			store := dynamostore.New(testenv.DynamoClient(st.DynamoURL, nil), st.Table)
			waitCompleted(t, store, u.UploadID)

			status := call(t, "GET", st.APIURL+"/uploads/"+u.UploadID, "", nil)
			done := call(t, "POST", st.APIURL+"/uploads", key, createBody(content))
			var completed api.Upload
			_ = json.Unmarshal(done.body, &completed)
			if status.status != 200 || done.status != 201 || !bytes.Equal(status.body, done.body) || completed.Status != api.StatusCompleted {
				t.Fatalf("status %d %s\nreplay %d %s", status.status, status.body, done.status, done.body)
			}

			// 50 clients race each of two new keys at once: one upload id and
			// one object per key, and every client gets its own key's upload
			// (with one key, a swapped answer would look the same).
			const n = 50
			keys := [2]string{"walkthrough-key-0002", "walkthrough-key-0003"}
			ids := make([]string, 2*n)
			var wg sync.WaitGroup
			for i := range 2 * n {
				wg.Go(func() {
					key := keys[i%2]
					raced := []byte("raced by fifty clients: " + key)
					req, _ := http.NewRequest("POST", st.APIURL+"/uploads", bytes.NewReader(createBody(raced)))
					req.Header.Set("Idempotency-Key", key)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Errorf("client %d: %v", i, err)
						return
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var v api.Upload
					err = json.Unmarshal(raw, &v)
					if resp.StatusCode != 201 || err != nil {
						t.Errorf("client %d: %d %s", i, resp.StatusCode, raw)
					} else {
						ids[i] = v.UploadID
					}
					// Once one PUT has been finalized, replays carry the completed
					// body, without upload instructions.
					if v.Upload != nil {
						_, _ = testenv.PutPresigned(v, raced, nil)
					}
				})
			}
			wg.Wait()
			for i := range 2 * n {
				id, err := upload.ParseUploadID(ids[i])
				if err != nil || ids[i] != ids[i%2] || id != idempotency.NewID(apigateway.JWTPrincipal("", LocalTenant), keys[i%2]) {
					t.Fatalf("client %d of key %s got upload %q; the first client of that key got %q", i, keys[i%2], ids[i], ids[i%2])
				}
			}
			s3c := testenv.S3Client(st.S3URL, nil)
			list, err := s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket)})
			if err != nil || len(list.Contents) != 3 {
				t.Fatalf("objects: %d, %v; want exactly 3 (one per key)", len(list.Contents), err)
			}
		})
	}
}

// The API and the bucket answer CORS preflights for the headers clients send.
func TestCORSPreflights(t *testing.T) {
	st := startStack(t, false)
	for name, tc := range map[string]struct{ url, method, headers string }{
		"api":    {st.APIURL + "/uploads", "POST", "idempotency-key,content-type,authorization"},
		"bucket": {st.S3URL + "/" + st.Bucket + "/uploads/x", "PUT", "content-type,x-amz-checksum-sha256"},
	} {
		req, _ := http.NewRequest("OPTIONS", tc.url, nil)
		req.Header.Set("Origin", "http://localhost:5173")
		req.Header.Set("Access-Control-Request-Method", tc.method)
		req.Header.Set("Access-Control-Request-Headers", tc.headers)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
			t.Errorf("%s preflight: %d %v", name, resp.StatusCode, resp.Header)
		}
	}
}

func TestAllowedOrigins(t *testing.T) {
	own := []string{"http://127.0.0.1:3000", "http://localhost:3000"}
	for _, c := range []struct {
		configured, want []string
	}{
		{nil, []string{"*"}},
		{[]string{"*"}, []string{"*"}},
		{[]string{"https://good.example", "*"}, []string{"*"}},
		{[]string{" ", ""}, []string{"*"}},
		{[]string{"https://good.example"}, append([]string{"https://good.example"}, own...)},
		{[]string{" https://good.example", "https://good.example ", "https://b.example"}, append([]string{"https://good.example", "https://b.example"}, own...)},
		{[]string{"http://localhost:3000", "https://good.example"}, []string{"http://localhost:3000", "https://good.example", "http://127.0.0.1:3000"}},
		{[]string{"http://127.0.0.1:5173"}, append([]string{"http://127.0.0.1:5173"}, own...)},
	} {
		if got := AllowedOrigins(c.configured, 3000); !slices.Equal(got, c.want) {
			t.Errorf("AllowedOrigins(%q, 3000) = %q, want %q", c.configured, got, c.want)
		}
	}
}

// With ALLOWED_ORIGINS narrowed to a site, the stack still lets its own
// demo (served at the API's address, as 127.0.0.1 or localhost) call the
// API and PUT to the bucket, and no other origin.
func TestNarrowedOriginsKeepTheDemo(t *testing.T) {
	st := startStack(t, false, func(c *Config) { c.Origins = []string{"https://good.example"} })
	port := st.APIURL[strings.LastIndex(st.APIURL, ":")+1:]
	demo := []string{"http://127.0.0.1:" + port, "http://localhost:" + port}
	if want := append([]string{"https://good.example"}, demo...); !slices.Equal(st.Origins, want) {
		t.Errorf("Origins %q, want %q", st.Origins, want)
	}
	for name, tc := range map[string]struct{ url, method, headers string }{
		"API": {st.APIURL + "/uploads", "POST", "idempotency-key,content-type"},
		"S3":  {st.S3URL + "/" + st.Bucket + "/uploads/x", "PUT", "content-type,if-none-match,x-amz-checksum-sha256"},
	} {
		for _, origin := range append([]string{"https://good.example", "https://evil.example"}, demo...) {
			req, _ := http.NewRequest("OPTIONS", tc.url, nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", tc.method)
			req.Header.Set("Access-Control-Request-Headers", tc.headers)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get("Access-Control-Allow-Origin")
			if origin == "https://evil.example" {
				if got != "" {
					t.Errorf("%s preflight from %s: %d, Access-Control-Allow-Origin %q; want it refused", name, origin, resp.StatusCode, got)
				}
				continue
			}
			if resp.StatusCode >= 300 || got != origin {
				t.Errorf("%s preflight from %s: %d, Access-Control-Allow-Origin %q; want %s allowed", name, origin, resp.StatusCode, got, origin)
			}
		}
	}
}

// Close stops every child: a second stack on the same ports and data
// directory starts cleanly (a leftover server would hold a port), and
// finds the first one's data.
func TestRestartOnSamePorts(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	var ports [3]int
	for i := range ports {
		p, err := services.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	cfg := Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-restart", Bucket: "uploads-restart",
		APIPort: ports[0], DynamoPort: ports[1], S3Port: ports[2],
	}
	first, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	created := call(t, "POST", first.APIURL+"/uploads", "restart-key-000001", createBody([]byte("kept")))
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("second start on the same ports: %v", err)
	}
	defer second.Close()
	replay := call(t, "POST", second.APIURL+"/uploads", "restart-key-000001", createBody([]byte("kept")))
	if created.status != 201 || replay.status != 201 || !bytes.Equal(created.body, replay.body) {
		t.Fatalf("before %d %s, after restart %d %s", created.status, created.body, replay.status, replay.body)
	}
}

// A JSON body with bytes that are not UTF-8 is refused, never read with
// U+FFFD in their place: the function sees the bytes that were sent.
func TestInvalidUTF8BodyIsRefused(t *testing.T) {
	st := startStack(t, false)
	body := []byte("{\"filename\":\"caf\xe9.txt\",\"contentType\":\"text/plain\",\"size\":1,\"sha256\":\"" + strings.Repeat("a", 64) + "\"}")
	r := call(t, "POST", st.APIURL+"/uploads", "invalid-utf8-key-0001", body)
	if r.status != 400 || !bytes.Contains(r.body, []byte(`"invalid_request"`)) || !bytes.Contains(r.body, []byte("UTF-8")) {
		t.Fatalf("invalid UTF-8 body: %d %s, want 400 invalid_request naming UTF-8", r.status, r.body)
	}
}

// A route's path is exact through the front door, as on API Gateway: with
// a trailing slash, every route is API Gateway's own 404 and reaches no
// function (a create there claims nothing), while the same path without
// it answers. The front door used to trim slashes, so that
// "GET /uploads/{id}/" answered the upload: more tolerant than AWS.
func TestTrailingSlashIsNoRoute(t *testing.T) {
	st := startStack(t, false)
	const key = "trailing-slash-key-0001"
	body := fmt.Appendf(nil, `{"filename":"big.bin","contentType":"application/octet-stream","size":6291456,"partSize":5242880}`)
	if r := call(t, "POST", st.APIURL+"/uploads/", key, body); r.status != 404 || string(r.body) != "{\"message\":\"Not Found\"}\n" {
		t.Fatalf("POST /uploads/: %d %q, want API Gateway's 404", r.status, r.body)
	}
	created := call(t, "POST", st.APIURL+"/uploads", key, body)
	if created.status != 201 || created.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("POST /uploads after the slashed one: %d %v %s, want a first 201 (the slashed one claimed nothing)", created.status, created.header, created.body)
	}
	var u api.Upload
	if err := json.Unmarshal(created.body, &u); err != nil {
		t.Fatal(err)
	}
	sign := []byte(`{"parts":[{"partNumber":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`)
	for _, tc := range []struct {
		method, path string
		body         []byte
		status       int // without the slash
	}{
		{"GET", "/uploads/" + u.UploadID, nil, 200},
		{"POST", "/uploads/" + u.UploadID + "/parts", sign, 200},
		{"GET", "/uploads/" + u.UploadID + "/parts", nil, 200},
		{"POST", "/uploads/" + u.UploadID + "/complete", nil, 409}, // parts_missing: nothing was sent
		{"DELETE", "/uploads/" + u.UploadID, nil, 200},
	} {
		for _, path := range []string{tc.path + "/", tc.path + "//", "/" + tc.path, strings.Replace(tc.path, "/"+u.UploadID, "//"+u.UploadID, 1)} {
			if r := call(t, tc.method, st.APIURL+path, "", tc.body); r.status != 404 || string(r.body) != "{\"message\":\"Not Found\"}\n" {
				t.Errorf("%s %s: %d %q, want API Gateway's 404", tc.method, path, r.status, r.body)
			}
		}
		if r := call(t, tc.method, st.APIURL+tc.path, "", tc.body); r.status != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, r.status, r.body, tc.status)
		}
	}
}
