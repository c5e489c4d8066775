package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/client"
)

func startStack(t *testing.T, env map[string]string) *devstack.Stack {
	t.Helper()
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-test", Bucket: "uploads-test",
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func objectCount(t *testing.T, st *devstack.Stack) int {
	t.Helper()
	out, err := testenv.S3Client(st.S3URL, nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

func writeFile(t *testing.T, name string, size int) string {
	t.Helper()
	b := make([]byte, size)
	_, _ = rand.Read(b)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fastRetries(o *client.Options) {
	o.BaseDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
}

func TestUploadAgainstTheLocalStack(t *testing.T) {
	st := startStack(t, nil)
	c, err := client.New(st.APIURL, fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "photo.jpg", 300<<10)
	var last int64
	res, err := c.Upload(context.Background(), path, client.UploadInput{Progress: func(sent, total int64) { last = sent }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Upload.Status != api.StatusCompleted || res.Upload.ContentType != "image/jpeg" || res.Upload.Bytes != 300<<10 || last != 300<<10 {
		t.Fatalf("result %+v, progress %d", res.Upload, last)
	}
	// Uploading again with the same key is a replay of the same upload.
	again, err := c.Upload(context.Background(), path, client.UploadInput{Key: res.Key})
	if err != nil || !again.Replayed || again.Upload.UploadID != res.Upload.UploadID {
		t.Fatalf("again = %+v, %v", again, err)
	}
	if n := objectCount(t, st); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// objectAt is the object stored under key, whole.
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

// Bytes made in memory, never a file on disk, go up through the real
// stack: in one PUT, and in parts. A run in parts that stopped after the
// first part resumes with its key, sending only the parts S3 lacks.
func TestUploadReaderAgainstTheLocalStack(t *testing.T) {
	st := startStack(t, nil)
	ctx := context.Background()
	c, err := client.New(st.APIURL, fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	photo := make([]byte, 300<<10)
	_, _ = rand.Read(photo)
	res, err := c.UploadReader(ctx, bytes.NewReader(photo), int64(len(photo)), client.UploadInput{Filename: "photo.jpg"})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Upload; u.Status != api.StatusCompleted || u.Filename != "photo.jpg" || u.ContentType != "image/jpeg" || u.Bytes != int64(len(photo)) {
		t.Fatalf("one PUT: %+v", u)
	}
	if !bytes.Equal(objectAt(t, st, res.Upload.StorageKey), photo) {
		t.Fatal("one PUT: the object is not the bytes")
	}

	report := make([]byte, 11<<20) // parts of 5, 5 and 1 MiB
	_, _ = rand.Read(report)
	in := client.UploadInput{Key: client.NewKey(), Filename: "report.bin", PartSize: api.MinPartSize, Parallel: 1}
	// The first run's transport refuses every part after the first, for
	// good: the run fails with part 1 stored.
	refusing := roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "1" {
			if r.Body != nil {
				r.Body.Close()
			}
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{}, Request: r,
				Body: io.NopCloser(strings.NewReader(`<Error><Code>InvalidRequest</Code></Error>`))}, nil
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	stopping, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: refusing} })
	var e *client.Error
	if _, err := stopping.UploadReader(ctx, bytes.NewReader(report), int64(len(report)), in); !errors.As(err, &e) || e.Op != "put part 2" {
		t.Fatalf("first run: %v, want part 2 refused", err)
	}
	res, err = c.UploadReader(ctx, bytes.NewReader(report), int64(len(report)), in)
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Upload; u.Status != api.StatusCompleted || !res.Replayed || res.PartsHeld != 1 || res.PartsSent != 2 || u.Filename != "report.bin" {
		t.Fatalf("resumed: %+v, replayed %v, %d parts held, %d sent; want completed, 1 held, 2 sent", u, res.Replayed, res.PartsHeld, res.PartsSent)
	}
	if !bytes.Equal(objectAt(t, st, res.Upload.StorageKey), report) {
		t.Fatal("in parts: the object is not the bytes")
	}
	if n := objectCount(t, st); n != 2 {
		t.Fatalf("%d objects, want 2", n)
	}
}

// answerLoser is a proxy in front of the API that lets the first request
// it is told to watch reach the server, which does the work, and then cuts
// the connection before the answer: the client never hears of it.
type answerLoser struct {
	url string

	mu   sync.Mutex
	seen []http.Header // the headers of every watched request, in order
	lost []byte        // the body of the answer that was lost
}

// loseFirstAnswer starts an answerLoser in front of the API at apiURL,
// watching the requests watch picks; it stops when the test ends.
func loseFirstAnswer(t *testing.T, apiURL string, watch func(*http.Request) bool) *answerLoser {
	t.Helper()
	target, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	l := &answerLoser{}
	l.url = serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !watch(r) {
			proxy.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Clone())
		first := len(l.seen) == 1
		l.mu.Unlock()
		if !first {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r) // the server does the work…
		l.mu.Lock()
		l.lost = rec.Body.Bytes()
		l.mu.Unlock()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // …and the client never hears of it
	})})
	return l
}

// watched returns the headers of the watched requests and the lost answer.
func (l *answerLoser) watched() ([]http.Header, []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen), l.lost
}

// The first create reaches the server, but its answer is lost. The client
// retries with the same key and the bucket ends with one object.
func TestLostCreateResponse(t *testing.T) {
	st := startStack(t, nil)
	front := loseFirstAnswer(t, st.APIURL, func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/uploads" })
	c, _ := client.New(front.url, fastRetries)
	res, err := c.Upload(context.Background(), writeFile(t, "a.bin", 1000), client.UploadInput{})
	if err != nil {
		t.Fatal(err)
	}
	creates, _ := front.watched()
	var keys []string
	for _, h := range creates {
		keys = append(keys, h.Get("Idempotency-Key"))
	}
	if !res.Replayed || len(keys) != 2 || keys[0] != keys[1] || keys[0] != res.Key {
		t.Fatalf("replayed=%v keys=%q (result key %s)", res.Replayed, keys, res.Key)
	}
	if n := objectCount(t, st); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// The first PUT reaches S3 and stores the bytes, but its answer is lost
// (the presigned URL signs S3's host, so the fault sits in the client's
// transport rather than in a proxy). The client PUTs again; one object.
func TestLostPutResponse(t *testing.T) {
	st := startStack(t, nil)
	var puts atomic.Int32
	transport := roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if r.Method == http.MethodPut && puts.Add(1) == 1 && err == nil {
			resp.Body.Close()
			return nil, errors.New("connection reset by peer (injected after S3 answered)")
		}
		return resp, err
	})
	c, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: transport} })
	res, err := c.Upload(context.Background(), writeFile(t, "a.bin", 2000), client.UploadInput{})
	if err != nil {
		t.Fatal(err)
	}
	if puts.Load() != 2 || res.Upload.Status != api.StatusCompleted {
		t.Fatalf("%d PUTs, status %s", puts.Load(), res.Upload.Status)
	}
	if n := objectCount(t, st); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// An expired presigned URL is refreshed by replaying the create.
// lateTransport holds the first PUT to S3 until its URL has expired, and
// records what each request got and which bearer token it carried.
type lateTransport struct {
	mu      sync.Mutex
	wait    time.Duration
	held    bool
	answers []string // "PUT 403", "POST 201", …
	tokens  []string
}

func (l *lateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	hold := r.Method == http.MethodPut && !l.held
	l.held = l.held || hold
	if auth := r.Header.Get("Authorization"); auth != "" {
		l.tokens = append(l.tokens, auth)
	}
	l.mu.Unlock()
	if hold {
		time.Sleep(l.wait)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.answers = append(l.answers, fmt.Sprintf("%s %d", r.Method, resp.StatusCode))
	}
	return resp, err
}

// A PUT whose URL expired on its way gets S3's 403; the client replays the
// create with the same key (the server signs a fresh URL) and PUTs again:
// one upload, one object. Every API request carries the token the Token
// option gives, and the upload is that token's tenant's.
func TestExpiredURLIsRefreshed(t *testing.T) {
	// SigV4 counts whole seconds from the signing second, so a URL of
	// PRESIGN_TTL=2s lasts between 1 and 2 s: the held PUT's has surely
	// expired after 3.1 s, and the fresh one still works when the PUT comes
	// (with 1s, it could have lasted a few milliseconds, and a busy machine
	// saw it expire too).
	st := startStack(t, map[string]string{"PRESIGN_TTL": "2s"})
	late := &lateTransport{wait: 3100 * time.Millisecond}
	token := unsignedJWT(`{"sub":"alice"}`)
	var tokenCalls atomic.Int32
	c, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) {
		o.HTTPClient = &http.Client{Transport: late}
		o.Token = func(context.Context) (string, error) { tokenCalls.Add(1); return token, nil }
	})
	path := writeFile(t, "late.bin", 500)
	res, err := c.Upload(context.Background(), path, client.UploadInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Upload.Status != api.StatusCompleted || objectCount(t, st) != 1 {
		t.Fatalf("status %s, %d objects", res.Upload.Status, objectCount(t, st))
	}
	late.mu.Lock()
	answers, tokens := strings.Join(late.answers, ", "), late.tokens
	late.mu.Unlock()
	if !strings.HasPrefix(answers, "POST 201, PUT 403, POST 201, PUT 200") {
		t.Fatalf("requests: %s; want the create, the expired PUT refused, the create replayed, the PUT again", answers)
	}
	if len(tokens) == 0 || int(tokenCalls.Load()) != len(tokens) {
		t.Fatalf("%d API requests carried a token, %d tokens asked for", len(tokens), tokenCalls.Load())
	}
	for _, got := range tokens {
		if got != "Bearer "+token {
			t.Fatalf("Authorization %q, want the Token option's", got)
		}
	}
	// The upload is alice's: her status works, another tenant's is a 404.
	if _, err := c.Status(context.Background(), res.Upload.UploadID); err != nil {
		t.Fatalf("alice's status: %v", err)
	}
	bob, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) {
		o.Token = func(context.Context) (string, error) { return unsignedJWT(`{"sub":"bob"}`), nil }
	})
	var e *client.Error
	if _, err := bob.Status(context.Background(), res.Upload.UploadID); !errors.As(err, &e) || e.StatusCode != 404 {
		t.Fatalf("bob reads alice's upload: %v, want 404", err)
	}
}

// unsignedJWT is a token the local stack reads as API Gateway's JWT
// authorizer would pass it (it checks no signature).
func unsignedJWT(claims string) string {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return enc(`{"alg":"none"}`) + "." + enc(claims) + ".sig"
}

// A request the server refuses fails at once with the server's code.
func TestRefusedUploadFailsAtOnce(t *testing.T) {
	st := startStack(t, map[string]string{"MAX_UPLOAD_BYTES": "100"})
	c, _ := client.New(st.APIURL, fastRetries)
	_, err := c.Upload(context.Background(), writeFile(t, "big.bin", 101), client.UploadInput{})
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 413 || e.Code != "file_too_large" || e.Attempts != 1 {
		t.Fatalf("err = %v", err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// Two processes upload one file with one key at once: the URL signs
// If-None-Match: *, so S3 stores the object once and the PUT that comes
// second is refused (412, or 409 ConditionalRequestConflict while the
// first is in flight, which is retried into a 412); both end completed,
// with the same upload, and the bucket holds one object.
func TestConcurrentPutsOfOneUpload(t *testing.T) {
	st := startStack(t, nil)
	path := writeFile(t, "same.bin", 4<<20)
	key := client.NewKey()
	var mu sync.Mutex
	var answers []int
	transport := roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && r.Method == http.MethodPut {
			mu.Lock()
			answers = append(answers, resp.StatusCode)
			mu.Unlock()
		}
		return resp, err
	})
	results := make([]*client.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			c, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: transport} })
			results[i], errs[i] = c.Upload(context.Background(), path, client.UploadInput{Key: key})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	a, b := results[0].Upload, results[1].Upload
	if a.Status != api.StatusCompleted || b.Status != api.StatusCompleted || a.UploadID != b.UploadID {
		t.Fatalf("results %+v and %+v; want one upload, completed", a, b)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("PUTs answered %v", answers)
	stored := 0
	for _, s := range answers {
		switch s {
		case http.StatusOK:
			stored++
		case http.StatusPreconditionFailed, http.StatusConflict:
		default:
			t.Errorf("a PUT answered %d", s)
		}
	}
	if stored != 1 || objectCount(t, st) != 1 {
		t.Fatalf("PUTs answered %v; %d objects; want one 200 and one object", answers, objectCount(t, st))
	}
	if !bytes.Equal(objectAt(t, st, a.StorageKey), fileBytes(t, path)) {
		t.Fatal("the object is not the file")
	}
}
