// Package web_test drives the browser client and demo page (web/) in
// Debian's headless Chromium against the whole local stack, and checks what
// a user sees, what the browser sent, and what ended up in the bucket.
//
// It builds nothing: run `make web` (npm ci, npm run build, npm test in web/)
// first. Without web/dist, web/node_modules, node, /usr/bin/chromium or the
// local servers the test is skipped, or fails under REQUIRE_INTEGRATION=1.
package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

const chromiumPath = "/usr/bin/chromium"

// need skips the test, or fails it under REQUIRE_INTEGRATION=1.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("REQUIRE_INTEGRATION") == "1" {
		t.Fatal(err)
	}
	t.Skipf("%v (set REQUIRE_INTEGRATION=1 to fail instead)", err)
}

func prerequisites(t *testing.T) (node string) {
	t.Helper()
	testenv.SkipShort(t) // the local stack and Chromium: not under make unit
	for _, tool := range []string{"dynoxide", testenv.S3().Binary()} {
		_, err := services.Binary(tool)
		need(t, err)
	}
	for _, f := range []string{"dist/index.html", "dist/demo.js", "node_modules/playwright-core/package.json"} {
		if _, err := os.Stat(f); err != nil {
			need(t, errors.New("web/"+f+" is missing: run `make web` (cd web && npm ci && npm run build && npm test) first"))
		}
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		need(t, errors.New(chromiumPath+" is missing: apt-get install -y chromium"))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, errors.New("node is not on PATH"))
	}
	return node
}

// seen is one request as the proxy saw it, with the upstream's answer.
type seen struct {
	Method, Path, Key string
	// ACRM and ACRH are a preflight's Access-Control-Request-Method and -Headers.
	ACRM, ACRH string
	Origin     string
	Status     int
	Replay     bool
	// Dropped: the upstream answered, but the proxy closed the browser's
	// connection without passing the answer on.
	Dropped bool
}

// proxy stands in front of the stack's API, records every request and,
// when dropFirstCreate is set, loses the answer to the first POST /uploads:
// the request reaches the server, which does the work, and the browser sees
// its connection closed without a response.
type proxy struct {
	*httptest.Server
	upstream        string
	dropFirstCreate bool

	mu      sync.Mutex
	log     []seen
	dropped bool
}

func newProxy(t *testing.T, upstream string, dropFirstCreate bool) *proxy {
	p := &proxy{upstream: upstream, dropFirstCreate: dropFirstCreate}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	return p
}

var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}

	rec := seen{
		Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"), Origin: r.Header.Get("Origin"),
		ACRM: r.Header.Get("Access-Control-Request-Method"), ACRH: r.Header.Get("Access-Control-Request-Headers"),
		Status: resp.StatusCode, Replay: resp.Header.Get("Idempotent-Replay") == "true",
	}
	p.mu.Lock()
	if p.dropFirstCreate && !p.dropped && r.Method == http.MethodPost && r.URL.Path == "/uploads" {
		p.dropped, rec.Dropped = true, true
	}
	p.log = append(p.log, rec)
	p.mu.Unlock()

	if rec.Dropped {
		hangUp(w)
		return
	}
	writeAnswerHead(w, resp)
	_, _ = w.Write(respBody)
}

// hangUp closes the browser's connection without an answer: a lost
// answer, as the page sees one.
func hangUp(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// writeAnswerHead writes resp's status and end-to-end headers, asking for a
// fresh connection for every request: Chromium silently resends a request
// whose reused keep-alive connection closes without an answer, which would
// hide a lost answer from the page.
func writeAnswerHead(w http.ResponseWriter, resp *http.Response) {
	for k, v := range resp.Header {
		if !slices.Contains(hopByHop, k) {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Connection", "close")
	w.WriteHeader(resp.StatusCode)
}

func (p *proxy) seen() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// result is what test/e2e.mjs printed.
type result struct {
	Scenario string `json:"scenario"`
	Files    []struct {
		Name        string `json:"name"`
		Size        int64  `json:"size"`
		SHA256      string `json:"sha256"`
		ContentType string `json:"contentType"`
	} `json:"files"`
	Rows      []row `json:"rows"`
	StatusLog []struct {
		Key  string `json:"key"`
		Text string `json:"text"`
	} `json:"statusLog"`
	Stored []stored `json:"stored"`
	Posts  []struct {
		URL  string `json:"url"`
		Key  string `json:"key"`
		Body string `json:"body"`
	} `json:"posts"`
	Puts []struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Status  int               `json:"status"`
	} `json:"puts"`
	Failed []struct {
		Method, URL, Error string
	} `json:"failed"`
	Preflights []struct {
		URL             string            `json:"url"`
		RequestHeaders  map[string]string `json:"requestHeaders"`
		Status          int               `json:"status"`
		ResponseHeaders map[string]string `json:"responseHeaders"`
	} `json:"preflights"`
	Console []string `json:"console"`
	Workers []string `json:"workers"`
	// The client's no-cors probes of the storage (GET of its origin's "/").
	Probes []struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
	} `json:"probes"`
	// matrix: each cell's observations
	Cells []cellResult `json:"cells"`

	// reload, restart
	Before       row      `json:"before"`
	StoredBefore []stored `json:"storedBefore"`
	Listed       row      `json:"listed"`
	// resume: the row after another file of the same size was picked
	Wrong             row      `json:"wrong"`
	StoredAfterReload []stored `json:"storedAfterReload"`
	ServerAfterReload string   `json:"serverAfterReload"`
	// several
	Screenshot string `json:"screenshot"`
	// worker-sends: what the page's thread got from its workers, and the part PUTs it made
	WorkerTraffic struct {
		Messages  int   `json:"messages"`
		WithBytes int   `json:"withBytes"`
		Bytes     int64 `json:"bytes"`
		Holds     int   `json:"holds"`
		MaxHeld   int   `json:"maxHeld"`
		AsBlob    int   `json:"asBlob"`
		PagePuts  int   `json:"pagePuts"`
	} `json:"workerTraffic"`
	// too-many
	Refused            row      `json:"refused"`
	StoredRefused      []stored `json:"storedRefused"`
	CreatesWhenRefused int      `json:"createsWhenRefused"`

	// ux: what the scenario checked, by name, and what it saw (for the messages)
	Checks map[string]bool `json:"checks"`
	Seen   map[string]any  `json:"seen"`

	// large files, ux
	Screenshots []string `json:"screenshots"`
	PartsBefore int      `json:"partsBefore"`
	PartCount   int      `json:"partCount"`
	Paused      row      `json:"paused"`
	During      row      `json:"during"`
	MainThread  struct {
		Tasks     int       `json:"tasks"`
		LongestMs float64   `json:"longestMs"`
		Over50    int       `json:"over50"`
		Top       []float64 `json:"top"`
	} `json:"mainThread"`
	// bench: ms from the pick to each mark (phase:…, first-part-stored)
	Timings map[string]int64 `json:"timings"`
	// big: the demo's onceupload:timing events
	TimingMarks []struct {
		Mark string  `json:"mark"`
		Key  string  `json:"key"`
		At   float64 `json:"at"`
	} `json:"timingMarks"`
	LongTasks []struct {
		Start    float64 `json:"start"`
		Duration float64 `json:"duration"`
	} `json:"longTasks"`
}

type row struct {
	Name       string   `json:"name"`
	Key        string   `json:"key"`
	UploadID   string   `json:"uploadId"`
	StorageKey string   `json:"storageKey"`
	Phase      string   `json:"phase"`
	Replay     string   `json:"replay"`
	Status     string   `json:"status"`
	Progress   float64  `json:"progress"`
	Buttons    []string `json:"buttons"`
	HashedIn   string   `json:"hashedIn"` // the client's "hashed-in" event, as the row keeps it: worker or page
}

type stored struct {
	Key      string `json:"key"`
	Phase    string `json:"phase"`
	UploadID string `json:"uploadId"`
	HasFile  bool   `json:"hasFile"`
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

type harness struct {
	t    *testing.T
	node string
	st   *devstack.Stack
	s3   *s3.Client
}

// run runs one scenario of test/e2e.mjs, with the page pointed at apiURL
// ("" for the page's own origin).
func (h *harness) run(t *testing.T, scenario, apiURL string) result {
	t.Helper()
	return h.runWith(t, scenario, apiURL, 90*time.Second)
}

// runWith runs a scenario with a time limit and more of its environment
// (PROXY_URL, FILE_PATH, …).
func (h *harness) runWith(t *testing.T, scenario, apiURL string, limit time.Duration, env ...string) result {
	t.Helper()
	// Its own process group, so a timeout also ends the browser it started.
	env = append([]string{"APP_URL=" + h.st.APIURL, "API_URL=" + apiURL, "OUT_DIR=test-results", "CHROMIUM=" + chromiumPath}, env...)
	stdout := testenv.Script(t, "", limit, env, h.node, filepath.Join("test", "e2e.mjs"), scenario)
	var res result
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("e2e output: %v\n%s", err, stdout)
	}
	// The page's console was logged above, with the driver's progress; an
	// uncaught exception in the page is a failure whatever the scenario.
	for _, line := range res.Console {
		if strings.HasPrefix(line, "pageerror:") {
			t.Errorf("the page threw: %s", line)
		}
	}
	return res
}

func (h *harness) objects(t *testing.T) map[string]int64 {
	t.Helper()
	return testenv.Objects(t, h.s3, h.st.Bucket)
}

// newObjects is what is in the bucket now and was not before.
func (h *harness) newObjects(t *testing.T, before map[string]int64) []string {
	t.Helper()
	return testenv.NewObjects(t, h.s3, h.st.Bucket, before)
}

// checkFiles checks that every file the scenario made shows completed, that
// its object holds exactly its bytes, that the API says completed, that
// every create the browser sent for it carried one key, and that the
// browser forgot the key afterwards. It returns the rows by file name.
func (h *harness) checkFiles(t *testing.T, res result) map[string]row {
	t.Helper()
	byName := map[string]row{}
	for _, r := range res.Rows {
		byName[r.Name] = r
	}
	if len(res.Rows) != len(res.Files) {
		t.Errorf("%d rows on the page, want %d: %+v", len(res.Rows), len(res.Files), res.Rows)
	}
	keys := map[string]bool{}
	for _, f := range res.Files {
		r, ok := byName[f.Name]
		if !ok {
			t.Errorf("no row for %s", f.Name)
			continue
		}
		if r.Phase != "completed" || r.Status != "Completed" || r.Progress != 100 {
			t.Errorf("%s: phase %q, status %q, progress %v; want completed, Completed, 100", f.Name, r.Phase, r.Status, r.Progress)
		}
		if !uuidV4.MatchString(r.Key) {
			t.Errorf("%s: key %q is not a crypto.randomUUID()", f.Name, r.Key)
		}
		if keys[r.Key] {
			t.Errorf("%s: key %s is shared with another file", f.Name, r.Key)
		}
		keys[r.Key] = true

		// Every create the browser sent for this file carried the row's key.
		creates := 0
		for _, p := range res.Posts {
			var body struct{ Filename string }
			if err := json.Unmarshal([]byte(p.Body), &body); err != nil || body.Filename != f.Name {
				continue
			}
			creates++
			if p.Key != r.Key {
				t.Errorf("%s: a create carried key %q, the row shows %q", f.Name, p.Key, r.Key)
			}
		}
		if creates == 0 {
			t.Errorf("%s: the browser sent no create", f.Name)
		}

		if r.StorageKey == "" || !strings.HasSuffix(r.StorageKey, r.UploadID) {
			t.Errorf("%s: storage key %q, upload id %q", f.Name, r.StorageKey, r.UploadID)
			continue
		}
		obj, err := h.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(h.st.Bucket), Key: aws.String(r.StorageKey)})
		if err != nil {
			t.Errorf("%s: object %s: %v", f.Name, r.StorageKey, err)
			continue
		}
		// Streamed into the hash: a 1 GiB object read whole costs minutes
		// under -race (the copies, and GC waiting on them), not seconds.
		hash := sha256.New()
		n, err := io.Copy(hash, obj.Body)
		obj.Body.Close()
		sum := hash.Sum(nil)
		if err != nil || n != f.Size || hex.EncodeToString(sum) != f.SHA256 || aws.ToString(obj.ContentType) != f.ContentType {
			t.Errorf("%s: object has %d bytes (%v), sha256 %x, type %q; want %d, %s, %q", f.Name, n, err, sum, aws.ToString(obj.ContentType), f.Size, f.SHA256, f.ContentType)
		}

		resp, err := http.Get(h.st.APIURL + "/uploads/" + r.UploadID)
		if err != nil {
			t.Fatal(err)
		}
		var status struct {
			Status, SHA256, Filename string
			CompositeSHA256          string `json:"compositeSha256"`
			Bytes                    int64
		}
		_ = json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		// A multipart upload created without the file's SHA-256 has none,
		// and S3's composite checksum instead; the object's bytes were checked above.
		sumOK := status.SHA256 == f.SHA256 || status.SHA256 == "" && status.CompositeSHA256 != ""
		if resp.StatusCode != 200 || status.Status != "completed" || !sumOK || status.Bytes != f.Size || status.Filename != f.Name {
			t.Errorf("%s: GET /uploads/%s: %d %+v", f.Name, r.UploadID, resp.StatusCode, status)
		}
	}
	if len(res.Stored) != 0 {
		t.Errorf("IndexedDB still holds %+v after completion", res.Stored)
	}
	return byName
}

// proxyCreates checks that every create the proxy passed carried key.
func proxyCreates(t *testing.T, p *proxy, key string) []seen {
	t.Helper()
	var creates []seen
	for _, s := range p.seen() {
		if s.Method == http.MethodPost && s.Path == "/uploads" {
			creates = append(creates, s)
			if s.Key != key {
				t.Errorf("the proxy saw a create with key %q, want %q", s.Key, key)
			}
		}
	}
	return creates
}

func hasStatus(res result, key string, re *regexp.Regexp) bool {
	for _, s := range res.StatusLog {
		if (key == "" || s.Key == key) && re.MatchString(s.Text) {
			return true
		}
	}
	return false
}

func headerList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// newHarness starts the local stack, serving dist/, for a test's browser
// scenarios.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessServing(t, "dist")
}

// newHarnessServing starts the local stack serving the page built in
// static (TestBrowserPackage's scratch application).
func newHarnessServing(t *testing.T, static string) *harness {
	t.Helper()
	return newHarnessWith(t, static)
}

// newHarnessWith starts the local stack serving static, its configuration
// changed by each of with (TestBrowserOutage's takes the stack's events).
func newHarnessWith(t *testing.T, static string, with ...func(*devstack.Config)) *harness {
	t.Helper()
	node := prerequisites(t)
	// CORS narrowed to another site, as ALLOWED_ORIGINS=https://good.example
	// make dev does: the demo, served at the API's address, is allowed all
	// the same (the stack always allows its own origins), which every
	// scenario served from there shows; "cors-refused" serves it from an
	// origin the bucket leaves out.
	cfg := devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-browser", Bucket: "uploads-browser", StaticDir: static,
		Origins: []string{"https://good.example"},
	}
	for _, f := range with {
		f(&cfg)
	}
	st, err := devstack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &harness{t: t, node: node, st: st, s3: testenv.S3Client(st.S3URL, nil)}
}

// TestMain starts each run with an empty test-results/ (screenshots).
func TestMain(m *testing.M) {
	if err := os.RemoveAll("test-results"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestBrowser and TestBrowserLarge each have a stack of their own and run
// side by side: a browser scenario mostly waits, and together they are the
// longest package of make test. (TestBrowserPackage runs before both: its
// npm pack builds dist/ again, which they serve.)
func TestBrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.st

	t.Run("upload", func(t *testing.T) {
		before := h.objects(t)
		res := h.run(t, "upload", "")
		rows := h.checkFiles(t, res)
		r := rows["hello.txt"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		if len(res.Posts) != 1 || r.Replay != "false" {
			t.Errorf("creates %d (replay %q), want one first-time create", len(res.Posts), r.Replay)
		}
		// The client hashes on the page's thread when the worker does not start, and still uploads.
		if r.HashedIn != "worker" {
			t.Errorf("the file was hashed in %q, want worker (data-hashed-in)", r.HashedIn)
		}
		for _, want := range []string{"Preparing…", "Creating upload…", "Uploading…", "Completed"} {
			if !hasStatus(res, "", regexp.MustCompile("^"+regexp.QuoteMeta(want)+"$")) {
				t.Errorf("the status line never showed %q: %+v", want, res.StatusLog)
			}
		}
		// The PUT carried the signed headers, If-None-Match: * among them.
		sum, _ := hex.DecodeString(res.Files[0].SHA256)
		if len(res.Puts) != 1 || res.Puts[0].Status != 200 || res.Puts[0].Headers["content-type"] != "text/plain" ||
			res.Puts[0].Headers["x-amz-checksum-sha256"] != base64.StdEncoding.EncodeToString(sum) || res.Puts[0].Headers["if-none-match"] != "*" ||
			!strings.HasPrefix(res.Puts[0].URL, st.S3URL+"/") {
			t.Errorf("PUTs: %+v", res.Puts)
		}
	})

	t.Run("lost-response", func(t *testing.T) {
		p := newProxy(t, st.APIURL, true)
		before := h.objects(t)
		res := h.run(t, "lost-response", p.URL)
		rows := h.checkFiles(t, res)
		r := rows["lost-answer.json"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		creates := proxyCreates(t, p, r.Key)
		// The first create reached the server and succeeded, but its answer
		// was lost; the page's own retry got the recorded answer.
		if len(creates) < 2 || !creates[0].Dropped || creates[0].Status != 201 || creates[0].Replay || !creates[1].Replay || creates[1].Status != 201 {
			t.Errorf("creates seen by the proxy: %+v; want a dropped 201 then a replayed 201", creates)
		}
		lost := false
		for _, f := range res.Failed {
			lost = lost || (f.Method == "POST" && strings.HasPrefix(f.URL, p.URL))
		}
		if !lost {
			t.Errorf("the browser never saw the create fail: %+v", res.Failed)
		}
		if !hasStatus(res, r.Key, regexp.MustCompile(`^Retrying create in \d+ s \(no answer from `+regexp.QuoteMeta(p.URL)+`/uploads: .+\)$`)) {
			t.Errorf("the page never said it was retrying the create, naming the URL: %+v", res.StatusLog)
		}
		// Idempotent-Replay is readable cross-origin (exposed by CORS).
		if r.Replay != "true" {
			t.Errorf("the page did not see Idempotent-Replay: true on the retried create (replay %q)", r.Replay)
		}
		// Only the create's answer was lost: one PUT, stored, and nothing
		// the page took for a failure.
		if len(res.Puts) != 1 || res.Puts[0].Status != 200 {
			t.Errorf("PUTs: %+v; want one, answered 200", res.Puts)
		}
		if hasStatus(res, r.Key, regexp.MustCompile(`^Failed|HTTP 412`)) {
			t.Errorf("the page reported a failure: %+v", res.StatusLog)
		}
	})

	// The first PUT's answer is lost after S3 stored the object: the retry
	// meets S3's 412 (the URL signs If-None-Match: *), which the page takes
	// as stored, not as a failure, and the status route completes it.
	t.Run("lost-put", func(t *testing.T) {
		s3Host := hostOf(t, st.S3URL)
		p := newNetProxy(t)
		lost := false // read and set under the proxy's lock
		p.loseAnswer = func(r *http.Request) bool {
			if !lost && r.Method == http.MethodPut && r.URL.Host == s3Host && !r.URL.Query().Has("partNumber") {
				lost = true
				return true
			}
			return false
		}
		before := h.objects(t)
		res := h.runWith(t, "lost-put", "", 90*time.Second, "PROXY_URL="+p.URL())
		rows := h.checkFiles(t, res)
		r := rows["lost-put.bin"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		var puts []proxied
		for _, e := range p.seen() {
			if e.Method == http.MethodPut && e.Host == s3Host {
				puts = append(puts, e)
			}
		}
		// S3 may answer a retry's If-None-Match 412 before it has read the
		// body and close the connection (Versity Gateway does), so a retry
		// can itself end in a reset, and the page tries again: between the
		// lost answer and the 412, only such transport failures.
		between := func(n int, failed func(i int) bool) bool {
			for i := 1; i < n-1; i++ {
				if !failed(i) {
					return false
				}
			}
			return true
		}
		if n := len(puts); n < 2 || puts[0].Status != 200 || !puts[0].Lost || puts[n-1].Status != http.StatusPreconditionFailed || puts[n-1].Lost ||
			!between(n, func(i int) bool { return puts[i].Status == 0 && puts[i].Err != "" && !puts[i].Lost }) {
			t.Errorf("PUTs through the proxy: %+v; want one stored (200) with its answer lost, then one answered 412 (with only transport failures between)", puts)
		}
		if n := len(res.Puts); n < 2 || n != len(puts) || res.Puts[n-1].Status != http.StatusPreconditionFailed || res.Puts[n-1].Headers["if-none-match"] != "*" ||
			!between(n, func(i int) bool { return res.Puts[i].Status == 0 }) {
			t.Errorf("PUTs the page saw answered: %+v; want the lost one, then 412 to If-None-Match: * (with only transport failures between)", res.Puts)
		}
		if len(res.Posts) != 1 {
			t.Errorf("%d creates; want one (no URL refresh)", len(res.Posts))
		}
		for _, want := range []string{`^Retrying upload in \d+ s \(no answer from the server\)$`, `^Already stored; confirming…$`} {
			if !hasStatus(res, r.Key, regexp.MustCompile(want)) {
				t.Errorf("the status line never matched %s: %+v", want, res.StatusLog)
			}
		}
		if hasStatus(res, r.Key, regexp.MustCompile(`^Failed|HTTP 412|Storage refused`)) {
			t.Errorf("the page took the 412 for a failure: %+v", res.StatusLog)
		}
	})

	// The page is reloaded, or the browser closed and started again on its
	// profile, in the middle of the PUT; the upload is listed and resumes
	// with the same key.
	for _, how := range []string{"reload", "restart"} {
		t.Run(how, func(t *testing.T) {
			p := newProxy(t, st.APIURL, false)
			before := h.objects(t)
			res := h.run(t, how, p.URL)
			rows := h.checkFiles(t, res)
			r := rows["big.bin"]
			if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
				t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
			}
			b := res.Before
			if b.Phase != "uploading" || b.Progress < 5 || b.Progress >= 100 || b.Key != r.Key || b.UploadID != r.UploadID {
				t.Errorf("before the %s: %+v; after: %+v", how, b, r)
			}
			if len(res.StoredBefore) != 1 || res.StoredBefore[0].Key != r.Key || res.StoredBefore[0].Phase != "uploading" || !res.StoredBefore[0].HasFile {
				t.Errorf("IndexedDB before the %s: %+v", how, res.StoredBefore)
			}
			if len(res.StoredAfterReload) != 1 || res.StoredAfterReload[0] != res.StoredBefore[0] {
				t.Errorf("IndexedDB after the %s: %+v, before: %+v", how, res.StoredAfterReload, res.StoredBefore)
			}
			if res.ServerAfterReload != "pending" {
				t.Errorf("after the %s the server says %q; the upload was not interrupted mid-way", how, res.ServerAfterReload)
			}
			l := res.Listed
			if l.Key != r.Key || !strings.HasPrefix(l.Status, "Interrupted") || !slices.Contains(l.Buttons, "Resume upload of big.bin") {
				t.Errorf("after the %s the page lists %+v", how, l)
			}
			creates := proxyCreates(t, p, r.Key)
			if len(creates) != 2 || creates[0].Replay || !creates[1].Replay {
				t.Errorf("creates seen by the proxy: %+v; want the first one and one replay on resume", creates)
			}
			if len(res.Puts) != 2 || res.Puts[1].Status != 200 {
				t.Errorf("PUTs %+v; want the interrupted PUT and the resumed one", res.Puts)
			}
			if how == "reload" {
				aborted := false
				for _, f := range res.Failed {
					aborted = aborted || (f.Method == "PUT" && strings.HasPrefix(f.URL, st.S3URL+"/"))
				}
				if !aborted {
					t.Errorf("the browser saw no PUT cut short by the reload: %+v", res.Failed)
				}
			}
		})
	}

	t.Run("cors", func(t *testing.T) {
		p := newProxy(t, st.APIURL, false)
		before := h.objects(t)
		res := h.run(t, "cors", p.URL)
		rows := h.checkFiles(t, res)
		r := rows["cors.csv"]
		if added := h.newObjects(t, before); len(added) != 1 {
			t.Errorf("new objects %v, want one", added)
		}
		proxyCreates(t, p, r.Key)
		origin := st.APIURL
		type want struct {
			name, prefix, method string
			headers              []string
		}
		for _, w := range []want{
			{"API", p.URL + "/uploads", "POST", []string{"idempotency-key", "content-type"}},
			{"S3", st.S3URL + "/" + st.Bucket + "/", "PUT", []string{"content-type", "if-none-match", "x-amz-checksum-sha256"}},
		} {
			found := false
			for _, pf := range res.Preflights {
				if !strings.HasPrefix(pf.URL, w.prefix) {
					continue
				}
				found = true
				rq, rs := pf.RequestHeaders, pf.ResponseHeaders
				requested := headerList(rq["access-control-request-headers"])
				allowed := headerList(rs["access-control-allow-headers"])
				if rq["access-control-request-method"] != w.method || rq["origin"] != origin {
					t.Errorf("%s preflight asked %q from %q, want %s from %s", w.name, rq["access-control-request-method"], rq["origin"], w.method, origin)
				}
				if pf.Status < 200 || pf.Status > 299 {
					t.Errorf("%s preflight: status %d", w.name, pf.Status)
				}
				if ao := rs["access-control-allow-origin"]; ao != "*" && ao != origin {
					t.Errorf("%s preflight: Access-Control-Allow-Origin %q", w.name, ao)
				}
				if !slices.Contains(headerList(rs["access-control-allow-methods"]), strings.ToLower(w.method)) {
					t.Errorf("%s preflight: Access-Control-Allow-Methods %q", w.name, rs["access-control-allow-methods"])
				}
				for _, hd := range w.headers {
					if !slices.Contains(requested, hd) || !slices.Contains(allowed, hd) {
						t.Errorf("%s preflight: %s requested %v, allowed %v", w.name, hd, requested, allowed)
					}
				}
			}
			if !found {
				t.Errorf("no %s preflight seen: %+v", w.name, res.Preflights)
			}
		}
		// The API's preflight as the server side saw it.
		sawOptions := false
		for _, s := range p.seen() {
			if s.Method == http.MethodOptions && s.Path == "/uploads" {
				sawOptions = s.ACRM == "POST" && slices.Contains(headerList(s.ACRH), "idempotency-key") && s.Origin == origin && s.Status < 300
			}
		}
		if !sawOptions {
			t.Errorf("the proxy saw no successful OPTIONS /uploads asking for Idempotency-Key: %+v", p.seen())
		}
		if len(res.Puts) != 1 || res.Puts[0].Status != 200 {
			t.Errorf("PUTs: %+v", res.Puts)
		}
	})

	// The demo opened as http://localhost:PORT, the other name of its own
	// origin: the API and the bucket allow it as they allow 127.0.0.1.
	t.Run("localhost", func(t *testing.T) {
		origin := strings.Replace(st.APIURL, "127.0.0.1", "localhost", 1)
		res := h.runWith(t, "upload", "", 90*time.Second, "APP_URL="+origin)
		h.checkFiles(t, res)
		s3Preflights, preflightStatus := 0, 200
		if testenv.S3() == services.MinIO {
			preflightStatus = 204 // MinIO's answer; AWS's and Versity's is 200
		}
		for _, pf := range res.Preflights {
			if strings.HasPrefix(pf.URL, st.S3URL+"/") {
				s3Preflights++
				if pf.RequestHeaders["origin"] != origin || pf.Status != preflightStatus || pf.ResponseHeaders["access-control-allow-origin"] != origin {
					t.Errorf("S3 preflight from %s: %+v", origin, pf)
				}
			}
		}
		if s3Preflights == 0 || len(res.Puts) != 1 || res.Puts[0].Status != 200 {
			t.Errorf("%d S3 preflights, PUTs %+v; want the PUT preflighted and stored", s3Preflights, res.Puts)
		}
	})

	// The page's origin is not one the bucket's CORS rules allow, but its
	// API answers (a proxy of the stack's front door on another port: the
	// page and its API calls are same-origin). Every PUT fails at once,
	// with no status, while the storage answers a no-cors request (the
	// evidence: it is reachable, and refuses the origin); the page infers
	// the refusal at the third try (transport.ts NO_ANSWER_TRIES), says
	// so, stops, and offers Resume. A second file, whose name holds a RIGHT-TO-LEFT
	// OVERRIDE, is refused by the API: its row shows the name escaped.
	t.Run("cors-refused", func(t *testing.T) {
		p := newProxy(t, st.APIURL, false)
		before := h.objects(t)
		res := h.runWith(t, "cors-refused", "", 90*time.Second, "APP_URL="+p.URL)
		byName := map[string]row{}
		for _, r := range res.Rows {
			byName[r.Name] = r
		}
		const shown = `invoice\u202Efdp.exe` // as the page prints it: escaped, not "invoiceexe.pdf"
		spoof, ok := byName[shown]
		if !ok || len(res.Rows) != 2 || spoof.Phase != "failed" || !strings.HasPrefix(spoof.Status, "Failed: ") || !slices.Contains(spoof.Buttons, "Remove "+shown) {
			t.Errorf("rows %+v; want one named %s, refused, with its Remove button naming it so", res.Rows, shown)
		}
		r := byName["cors.bin"]
		want := regexp.MustCompile(`^Failed: The storage never answered this page: 3 tries .*probably refused by the storage's CORS rules for this origin \(` +
			regexp.QuoteMeta(p.URL) + `\): Resume once they allow it\.$`)
		if r.Phase != "failed" || !want.MatchString(r.Status) || !slices.Contains(r.Buttons, "Resume upload of cors.bin") {
			t.Errorf("row %+v; want failed, saying %s, with Resume", r, want)
		}
		// The API answered the one create; the PUTs never got an answer.
		var creates []seen
		for _, s := range p.seen() {
			if s.Method == http.MethodPost && s.Path == "/uploads" && s.Key == r.Key {
				creates = append(creates, s)
			}
		}
		if len(creates) != 1 || creates[0].Status != 201 {
			t.Errorf("creates of cors.bin %+v; want one, answered 201", creates)
		}
		if len(res.Puts) != 3 {
			t.Errorf("PUTs %+v; want 3 tries, then none", res.Puts)
		}
		// The evidence: the storage answered the page's no-cors probes (CORS
		// does not govern them) before and after the third PUT got no answer.
		if len(res.Probes) != 2 || !strings.HasPrefix(res.Probes[0].URL, st.S3URL+"/") || res.Probes[0].Status == 0 || res.Probes[1].Status == 0 {
			t.Errorf("probes %+v; want two of %s/, both answered", res.Probes, st.S3URL)
		}
		for _, put := range res.Puts {
			if put.Status != 0 {
				t.Errorf("a PUT got HTTP %d; want no answer (CORS)", put.Status)
			}
		}
		for _, pf := range res.Preflights {
			if strings.HasPrefix(pf.URL, st.S3URL+"/") && (pf.RequestHeaders["origin"] != p.URL || pf.ResponseHeaders["access-control-allow-origin"] != "") {
				t.Errorf("S3 preflight %+v; want it from %s, refused", pf, p.URL)
			}
		}
		// Stopped: the failure is the last thing the row said.
		var last string
		for _, e := range res.StatusLog {
			if e.Key == r.Key {
				last = e.Text
			}
		}
		if last != r.Status {
			t.Errorf("status log %+v; want the row's to end with its failure", res.StatusLog)
		}
		if added := h.newObjects(t, before); len(added) != 0 {
			t.Errorf("new objects %v, want none", added)
		}
	})

	// A new user's first hour: each state of the page checked in the
	// browser (test/e2e.mjs ux) and photographed.
	t.Run("ux", func(t *testing.T) {
		res := h.run(t, "ux", "")
		want := []string{
			"idleEmpty", "tokenIsPassword", "tokenKeptInTab", "tokenInSessionStorageOnly", "progressShowsBytesSpeedAndTimeLeft", "sizeInMiB",
			"pauseButtonSaysPause", "pausedBarShowsNothingKept", "pausedOffersResume", "tokenSent", "historyAfterReload", "clearHistoryShown",
			"errorShown", "refusedSentToken", "historyCleared",
		}
		for _, c := range want {
			if ok, found := res.Checks[c]; !found || !ok {
				t.Errorf("check %s: %v (found %v); seen %+v", c, ok, found, res.Seen)
			}
		}
		if len(res.Checks) != len(want) {
			t.Errorf("checks %v, want %v", res.Checks, want)
		}
		screenshotsExist(t, res.Screenshots, 6)
	})

	t.Run("several", func(t *testing.T) {
		before := h.objects(t)
		res := h.run(t, "several", "")
		rows := h.checkFiles(t, res)
		added := h.newObjects(t, before)
		var want []string
		for _, r := range rows {
			want = append(want, r.StorageKey)
		}
		slices.Sort(want)
		if !slices.Equal(added, want) || len(added) != 3 {
			t.Errorf("new objects %v, want %v", added, want)
		}
		png, err := os.ReadFile(res.Screenshot)
		if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("screenshot %s: %d bytes, %v", res.Screenshot, len(png), err)
		}
		abs, _ := filepath.Abs(res.Screenshot)
		t.Logf("screenshot: %s", abs)
	})
}
