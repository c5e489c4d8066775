package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

// collector is an events endpoint (DEV_EVENTS_URL) that refuses its first
// delivery, so the bus's retry is exercised, and keeps the rest.
type collector struct {
	mu       sync.Mutex
	refused  bool
	received []events.EventBridgeEvent
	raw      [][]byte
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.refused {
		c.refused = true
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	var e events.EventBridgeEvent
	if err := json.Unmarshal(body, &e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.received = append(c.received, e)
	c.raw = append(c.raw, body)
}

func (c *collector) events() ([]events.EventBridgeEvent, [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.EventBridgeEvent(nil), c.received...), append([][]byte(nil), c.raw...)
}

// waitEvents waits for n events, then for quiet (no more arrive for a
// while), and returns all of them: a test of "exactly n" must not stop
// looking the moment n are there.
func (c *collector) waitEvents(t *testing.T, n int) ([]events.EventBridgeEvent, [][]byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, _ := c.events(); len(got) >= n {
			break
		}
		if time.Now().After(deadline) {
			got, _ := c.events()
			t.Fatalf("%d events after 30 s, want %d: %+v", len(got), n, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	return c.events()
}

// eventSchema compiles docs/events.schema.json, the schema docs/api.md
// publishes.
func eventSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "docs", "events.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("events.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every upload that completes yields one Upload Completed event, an
// aborted one one Upload Aborted event, and one that never completes none;
// each detail is the upload's record, and each event fits the published
// schema. In both function modes: the emulator runs the events bootstrap,
// whose EventBridge client puts to the stack's bus.
func TestUploadEvents(t *testing.T) {
	schema := eventSchema(t)
	for name, rie := range map[string]bool{"in-process": false, "emulator": true} {
		t.Run(name, func(t *testing.T) {
			sink := &collector{}
			srv := httptest.NewServer(sink)
			t.Cleanup(srv.Close) // after the stack's, which startStack registers later
			st := startStack(t, rie, func(c *Config) {
				c.Table, c.Bucket, c.EventsURL = "idempotency-events", "uploads-events", srv.URL
			})
			if !st.EventsEnabled {
				t.Fatal("the stack reads no stream")
			}
			owner := jwt(`{"iss":"https://issuer.example/","sub":"events-owner"}`)

			// A single PUT, completed.
			small := []byte("an upload that tells the application\n")
			var single api.Upload
			created := do(t, "POST", st.APIURL+"/uploads", "events-single-key-1", owner, createBody(small))
			if created.status != 201 || json.Unmarshal(created.body, &single) != nil {
				t.Fatalf("create: %d %s", created.status, created.body)
			}
			if code, err := testenv.PutPresigned(single, small, nil); err != nil || code != 200 {
				t.Fatalf("PUT: %d %v", code, err)
			}
			// A multipart upload, completed; another, aborted; a single
			// PUT never sent.
			data := make([]byte, 6<<20)
			_, _ = rand.Read(data)
			mp := multipartUpload(t, st, owner, "events-multipart-key-1", data)
			aborting := createMultipart(t, st, owner, "events-multipart-key-2", data)
			if r := do(t, "DELETE", st.APIURL+"/uploads/"+aborting.UploadID, "", owner, nil); r.status != 200 {
				t.Fatalf("abort: %d %s", r.status, r.body)
			}
			if r := do(t, "POST", st.APIURL+"/uploads", "events-never-sent-1", owner, createBody([]byte("never sent"))); r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}

			got, raw := sink.waitEvents(t, 3)
			if len(got) != 3 {
				t.Fatalf("%d events, want 3 (2 completed, 1 aborted): %+v", len(got), got)
			}
			want := map[string]string{single.UploadID: api.DetailTypeUploadCompleted, mp: api.DetailTypeUploadCompleted, aborting.UploadID: api.DetailTypeUploadAborted}
			for i, e := range got {
				var v any
				if err := json.Unmarshal(raw[i], &v); err != nil {
					t.Fatal(err)
				}
				if err := schema.Validate(v); err != nil {
					t.Errorf("event %s does not fit docs/events.schema.json: %v", raw[i], err)
				}
				var d api.EventDetail
				if err := json.Unmarshal(e.Detail, &d); err != nil {
					t.Fatal(err)
				}
				if e.Source != api.EventSource || want[d.UploadID] != e.DetailType {
					t.Errorf("event %s %q for upload %s, want %q", e.Source, e.DetailType, d.UploadID, want[d.UploadID])
				}
				delete(want, d.UploadID)
				checkDetail(t, st, owner, d)
			}
			if len(want) > 0 {
				t.Errorf("no event for %v", want)
			}
		})
	}
}

// checkDetail compares an event's detail with the upload's body.
func checkDetail(t *testing.T, st *Stack, auth string, d api.EventDetail) {
	t.Helper()
	r := do(t, "GET", st.APIURL+"/uploads/"+d.UploadID, "", auth, nil)
	var u api.Upload
	if r.status != 200 || json.Unmarshal(r.body, &u) != nil {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	body := api.EventDetail{UploadID: u.UploadID, Status: u.Status, Tenant: "jwt:23:https://issuer.example/:events-owner", Bucket: st.Bucket,
		StorageKey: u.StorageKey, Filename: u.Filename, ContentType: u.ContentType, Bytes: u.Bytes, SHA256: u.SHA256,
		CompositeSHA256: u.CompositeSHA256, ETag: u.ETag, CompletedAt: u.CompletedAt}
	if u.Multipart != nil {
		body.PartSize, body.PartCount = u.Multipart.PartSize, u.Multipart.PartCount
	}
	if u.Status == api.StatusAborted {
		body.AbortedAt = d.AbortedAt // the body has no abort time
		if d.AbortedAt == "" {
			t.Errorf("aborted event without abortedAt: %+v", d)
		}
	}
	if d != body {
		t.Errorf("detail\n %+v\nwant (the upload's body)\n %+v", d, body)
	}
}

// createMultipart creates a multipart upload of data in 5 MiB parts.
func createMultipart(t *testing.T, st *Stack, auth, key string, data []byte) api.Upload {
	t.Helper()
	sum := sha256.Sum256(data)
	body := fmt.Appendf(nil, `{"filename":"big.bin","contentType":"application/octet-stream","size":%d,"sha256":"%x","partSize":%d}`, len(data), sum, 5<<20)
	r := do(t, "POST", st.APIURL+"/uploads", key, auth, body)
	var u api.Upload
	if r.status != 201 || json.Unmarshal(r.body, &u) != nil || u.Multipart == nil {
		t.Fatalf("create multipart: %d %s", r.status, r.body)
	}
	return u
}

// multipartUpload sends data in 5 MiB parts, completes it and returns its
// upload id.
func multipartUpload(t *testing.T, st *Stack, auth, key string, data []byte) string {
	t.Helper()
	u := createMultipart(t, st, auth, key, data)
	base := st.APIURL + "/uploads/" + u.UploadID
	var parts [][]byte
	for off := 0; off < len(data); off += 5 << 20 {
		parts = append(parts, data[off:min(off+5<<20, len(data))])
	}
	var sign bytes.Buffer
	sign.WriteString(`{"parts":[`)
	for i, p := range parts {
		sum := sha256.Sum256(p)
		if i > 0 {
			sign.WriteByte(',')
		}
		fmt.Fprintf(&sign, `{"partNumber":%d,"sha256":"%s"}`, i+1, hex.EncodeToString(sum[:]))
	}
	sign.WriteString("]}")
	r := do(t, "POST", base+"/parts", "", auth, sign.Bytes())
	var sp api.SignedParts
	if r.status != 200 || json.Unmarshal(r.body, &sp) != nil || len(sp.Parts) != len(parts) {
		t.Fatalf("sign: %d %s", r.status, r.body)
	}
	for i, p := range sp.Parts {
		if code := testenv.PutPart(p, parts[i]); code != 200 {
			t.Fatalf("part %d: %d", i+1, code)
		}
	}
	if r := do(t, "POST", base+"/complete", "", auth, nil); r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	return u.UploadID
}

// A stack started again on its data directory goes on from the stream's
// end, as an existing event source mapping would: the events of the last
// run are not delivered again, and new uploads' are.
func TestUploadEventsAfterRestart(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	sink := &collector{refused: true}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	cfg := Config{S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-restart", Bucket: "uploads-restart", EventsURL: srv.URL}
	uploadOne := func(st *Stack, key string) string {
		content := []byte("restart " + key)
		var u api.Upload
		r := do(t, "POST", st.APIURL+"/uploads", key, "", createBody(content))
		if r.status != 201 || json.Unmarshal(r.body, &u) != nil {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
			t.Fatalf("PUT: %d %v", code, err)
		}
		return u.UploadID
	}
	ids := map[string]int{}
	for run, key := range []string{"restart-events-key-1", "restart-events-key-2"} {
		st, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ids[uploadOne(st, key)] = 0
		sink.waitEvents(t, run+1)
		st.Close()
	}
	got, _ := sink.events()
	for _, e := range got {
		var d api.EventDetail
		_ = json.Unmarshal(e.Detail, &d)
		ids[d.UploadID]++
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("upload %s: %d events over two runs, want 1", id, n)
		}
	}
}

// The example event in docs/api.md fits the schema it sits next to.
func TestDocumentedEventFitsTheSchema(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := bytes.Cut(doc[bytes.Index(doc, []byte("\n## Events\n")):], []byte("\n## Retry rules"))
	start := bytes.Index(section, []byte("```json\n"))
	end := bytes.Index(section[start+8:], []byte("```"))
	if start < 0 || end < 0 {
		t.Fatal("docs/api.md: no JSON example in the Events section")
	}
	var v any
	if err := json.Unmarshal(section[start+8:start+8+end], &v); err != nil {
		t.Fatalf("the documented event is not JSON: %v", err)
	}
	if err := eventSchema(t).Validate(v); err != nil {
		t.Errorf("the documented event does not fit docs/events.schema.json: %v", err)
	}
}
