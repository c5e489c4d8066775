package consumer_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/examples/upload-events/consumer"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

var dynoxide = testenv.SharedDynoxide()

func TestMain(m *testing.M) { testenv.Main(m, dynoxide) }

// sink counts the calls to Index and keeps the uploads indexed. fail, if
// set, makes the n-th call fail; entered and block, if set, announce each
// call and hold it until block is closed.
type sink struct {
	calls   atomic.Int64
	fail    func(n int64) error
	entered chan struct{}
	block   chan struct{}

	mu      sync.Mutex
	indexed []api.EventDetail
}

func (s *sink) Index(_ context.Context, u api.EventDetail) error {
	n := s.calls.Add(1)
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.block != nil {
		<-s.block
	}
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexed = append(s.indexed, u)
	return nil
}

// uploads is the ids indexed, in order.
func (s *sink) uploads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.indexed))
	for i, u := range s.indexed {
		ids[i] = u.UploadID
	}
	return ids
}

type env struct {
	consumer *consumer.Consumer
	sink     *sink
	client   *dynamodb.Client
	table    string
}

// newEnv is the consumer as deployed: the real store on a table shaped as
// template.yaml declares it, on a local DynamoDB.
func newEnv(t *testing.T) *env {
	t.Helper()
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	table := testenv.NewTableWithKey(t, client, "pk", "")
	store := dynamostore.New(client, table)
	s := &sink{}
	c := consumer.New(store, s, func(o *consumer.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	return &env{consumer: c, sink: s, client: client, table: table}
}

// completed is an Upload Completed detail for upload id.
func completed(id string) api.EventDetail {
	return api.EventDetail{
		UploadID: id, Status: "completed", Tenant: "anonymous", Bucket: "uploads",
		StorageKey: "uploads/anonymous/" + id, Filename: "report.pdf", ContentType: "application/pdf",
		Bytes: 1 << 20, SHA256: strings.Repeat("ab", 32), ETag: `"9b2cf535f27731c974343645a3985328"`,
		CompletedAt: "2026-12-01T17:00:00Z",
	}
}

// event is d as EventBridge delivers it: every delivery, and every
// re-published event, has an id and a time of its own.
func event(t *testing.T, detailType string, d api.EventDetail) events.EventBridgeEvent {
	t.Helper()
	detail, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return events.EventBridgeEvent{
		Version: "0", ID: rand.Text(), DetailType: detailType, Source: api.EventSource,
		AccountID: "123456789012", Time: time.Now().UTC().Truncate(time.Second), Region: "us-east-1",
		Resources: []string{}, Detail: detail,
	}
}

// handle invokes the consumer as Lambda would, with a deadline.
func (e *env) handle(ev events.EventBridgeEvent) (consumer.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.consumer.Handle(ctx, ev)
}

func (e *env) mustHandle(t *testing.T, ev events.EventBridgeEvent) consumer.Result {
	t.Helper()
	res, err := e.handle(ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return res
}

// states is the state of each record in the table.
func (e *env) states(t *testing.T) []string {
	t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, item := range out.Items {
		s, _ := item["state"].(*types.AttributeValueMemberS)
		if s == nil {
			t.Fatalf("record without a state: %v", item)
		}
		states = append(states, s.Value)
	}
	return states
}

func ptr[T any](v T) *T { return &v }

func wantIndexed(t *testing.T, s *sink, want ...string) {
	t.Helper()
	if got := s.uploads(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("indexed %v, want %v", got, want)
	}
}

func TestHandle(t *testing.T) {
	t.Run("delivered twice, indexed once", func(t *testing.T) {
		e := newEnv(t)
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		first := e.mustHandle(t, ev)
		second := e.mustHandle(t, ev)
		if first != (consumer.Result{UploadID: "u-1", Status: "completed"}) {
			t.Errorf("first: %+v", first)
		}
		if second != (consumer.Result{UploadID: "u-1", Status: "completed", Replayed: true}) {
			t.Errorf("second: %+v, want the first's, replayed", second)
		}
		wantIndexed(t, e.sink, "u-1")
		if got := e.states(t); fmt.Sprint(got) != "[completed]" {
			t.Errorf("records %v, want one completed", got)
		}
	})
	t.Run("re-published with a new id and time, indexed once", func(t *testing.T) {
		e := newEnv(t)
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		e.mustHandle(t, ev)
		again := ev
		again.ID, again.Time = rand.Text(), ev.Time.Add(36*time.Hour)
		// The same detail, written by another encoder: members in another
		// order, with white space.
		var m map[string]any
		if err := json.Unmarshal(ev.Detail, &m); err != nil {
			t.Fatal(err)
		}
		again.Detail, _ = json.MarshalIndent(m, "", "  ")
		if res := e.mustHandle(t, again); !res.Replayed {
			t.Errorf("re-published: %+v, want a replay", res)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("re-published with a detail member a later version adds, indexed once", func(t *testing.T) {
		e := newEnv(t)
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		e.mustHandle(t, ev)
		var m map[string]any
		if err := json.Unmarshal(ev.Detail, &m); err != nil {
			t.Fatal(err)
		}
		m["storageClass"] = "STANDARD"
		again := ev
		again.ID = rand.Text()
		again.Detail, _ = json.Marshal(m)
		if res, err := e.handle(again); err != nil || !res.Replayed {
			t.Errorf("re-published with a new member: %+v, %v; want a replay", res, err)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("a record made when the whole event was the request is replayed", func(t *testing.T) {
		// The consumer's records before the request became the detail
		// alone: MakeIdempotent over the whole event, at the same paths.
		// A redelivery after an upgrade must find them (the same key and
		// fingerprint), even for a detail in a form the producer does not
		// write (a null, an empty member, one missing, white space).
		e := newEnv(t)
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		ev.Detail = json.RawMessage(`{ "uploadId": "u-1", "status": "completed", "tenant": "anonymous", "bucket": "uploads",
			"storageKey": "uploads/anonymous/u-1", "filename": null, "contentType": "application/pdf", "bytes": 1048576, "etag": "" }`)
		before := idempotency.MakeIdempotent(dynamostore.New(e.client, e.table),
			func(context.Context, events.EventBridgeEvent) (consumer.Result, error) {
				return consumer.Result{UploadID: "u-1", Status: "completed"}, nil
			},
			func(h *idempotency.HandlerOptions[events.EventBridgeEvent, consumer.Result]) {
				h.KeyPath, h.Scope = "detail.uploadId", consumer.DefaultScope
				h.FingerprintPaths = []string{
					"detail.uploadId", "detail.status", "detail.tenant", "detail.bucket",
					"detail.storageKey", "detail.filename", "detail.contentType", "detail.bytes",
					"detail.sha256", "detail.compositeSha256", "detail.etag",
					"detail.completedAt", "detail.abortedAt", "detail.partSize", "detail.partCount",
				}
				h.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			})
		if _, err := before(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		again := ev
		again.ID = rand.Text()
		if res, err := e.handle(again); err != nil || res != (consumer.Result{UploadID: "u-1", Status: "completed", Replayed: true}) {
			t.Errorf("redelivered: %+v, %v; want the record's answer, replayed", res, err)
		}
		wantIndexed(t, e.sink)
	})
	t.Run("two uploads, indexed twice", func(t *testing.T) {
		e := newEnv(t)
		e.mustHandle(t, event(t, api.DetailTypeUploadCompleted, completed("u-1")))
		e.mustHandle(t, event(t, api.DetailTypeUploadCompleted, completed("u-2")))
		e.mustHandle(t, event(t, api.DetailTypeUploadCompleted, completed("u-1")))
		wantIndexed(t, e.sink, "u-1", "u-2")
		if got := e.states(t); len(got) != 2 {
			t.Errorf("records %v, want two", got)
		}
	})
	t.Run("concurrent duplicate deliveries, indexed once", func(t *testing.T) {
		e := newEnv(t)
		e.sink.entered, e.sink.block = make(chan struct{}, 8), make(chan struct{})
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		const n = 8
		var (
			wg         sync.WaitGroup
			inProgress atomic.Int64
			results    [n]consumer.Result
			errs       [n]error
		)
		for i := range n {
			wg.Go(func() {
				d := ev
				d.ID = rand.Text() // each delivery as EventBridge retries it
				for {
					results[i], errs[i] = e.handle(d)
					if !errors.Is(errs[i], idempotency.ErrInProgress) {
						return
					}
					// A sender retries later (Lambda's asynchronous retry,
					// the HTTP sender after Retry-After); sooner here.
					inProgress.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		select {
		case <-e.sink.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery reached the sink")
		}
		for deadline := time.Now().Add(10 * time.Second); inProgress.Load() < n-1; {
			if time.Now().After(deadline) {
				t.Fatalf("%d in-progress answers while the first delivery indexed, want %d or more", inProgress.Load(), n-1)
			}
			time.Sleep(time.Millisecond)
		}
		close(e.sink.block)
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("delivery %d: %v", i, errs[i])
			}
			if !results[i].Replayed {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%d deliveries indexed, want 1 and %d replays", fresh, n-1)
		}
		if c := e.sink.calls.Load(); c != 1 {
			t.Errorf("the sink was called %d times, want 1", c)
		}
	})
	t.Run("another detail under the same upload id is refused", func(t *testing.T) {
		e := newEnv(t)
		e.mustHandle(t, event(t, api.DetailTypeUploadCompleted, completed("u-1")))
		changed := completed("u-1")
		changed.Bytes++
		res, err := e.handle(event(t, api.DetailTypeUploadCompleted, changed))
		var conflict *idempotency.ConflictError
		if !errors.Is(err, idempotency.ErrKeyReused) || !errors.As(err, &conflict) {
			t.Fatalf("Handle: %+v, %v; want an *idempotency.ConflictError (ErrKeyReused)", res, err)
		}
		wantIndexed(t, e.sink, "u-1")
		// The original detail is still answered from its record.
		if res := e.mustHandle(t, event(t, api.DetailTypeUploadCompleted, completed("u-1"))); !res.Replayed {
			t.Errorf("the original again: %+v, want a replay", res)
		}
	})
	t.Run("a failing sink releases the upload id", func(t *testing.T) {
		e := newEnv(t)
		sinkErr := errors.New("index unavailable")
		e.sink.fail = func(n int64) error {
			if n == 1 {
				return sinkErr
			}
			return nil
		}
		ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
		if _, err := e.handle(ev); !errors.Is(err, sinkErr) {
			t.Fatalf("Handle: %v, want the sink's error", err)
		}
		if got := e.states(t); len(got) != 0 {
			t.Fatalf("records %v after the failure, want none", got)
		}
		if res := e.mustHandle(t, ev); res.Replayed {
			t.Errorf("retry: %+v, want it indexed afresh", res)
		}
		wantIndexed(t, e.sink, "u-1")
		if c := e.sink.calls.Load(); c != 2 {
			t.Errorf("the sink was called %d times, want 2", c)
		}
	})
	t.Run("events of another detail-type or source are ignored, unrecorded", func(t *testing.T) {
		e := newEnv(t)
		aborted := completed("u-1")
		aborted.Status, aborted.ETag, aborted.CompletedAt, aborted.AbortedAt = "aborted", "", "", "2026-12-01T17:00:00Z"
		other := event(t, api.DetailTypeUploadCompleted, completed("u-2"))
		other.Source = "someone.else"
		for _, ev := range []events.EventBridgeEvent{event(t, api.DetailTypeUploadAborted, aborted), other} {
			if res := e.mustHandle(t, ev); res != (consumer.Result{Ignored: true}) {
				t.Errorf("%s from %s: %+v, want ignored", ev.DetailType, ev.Source, res)
			}
		}
		wantIndexed(t, e.sink)
		if got := e.states(t); len(got) != 0 {
			t.Errorf("records %v, want none", got)
		}
	})
	t.Run("a detail that is not an upload's is refused, unrecorded", func(t *testing.T) {
		e := newEnv(t)
		for _, detail := range []string{``, `null`, `{}`, `[1]`, `{"uploadId":""}`, `{"uploadId":7}`} {
			ev := event(t, api.DetailTypeUploadCompleted, completed("u-1"))
			ev.Detail = json.RawMessage(detail)
			if _, err := e.handle(ev); !errors.Is(err, consumer.ErrInvalidEvent) {
				t.Errorf("detail %q: %v, want ErrInvalidEvent", detail, err)
			}
		}
		wantIndexed(t, e.sink)
		if got := e.states(t); len(got) != 0 {
			t.Errorf("records %v, want none", got)
		}
	})
}

// envelope is an event as the dev stack POSTs it: EventBridge's JSON
// envelope, written out.
func envelope(t *testing.T, d api.EventDetail) string {
	t.Helper()
	detail, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"Upload Completed","source":"onceupload","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":%s}`,
		rand.Text(), time.Now().UTC().Format(time.RFC3339), detail)
}

type answer struct {
	status int
	header http.Header
	body   string
}

// send POSTs body to url as the dev stack does.
func send(url, body string) (answer, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}, err
}

func post(t *testing.T, url, body string) answer {
	t.Helper()
	a, err := send(url, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func result(t *testing.T, a answer) consumer.Result {
	t.Helper()
	var r consumer.Result
	if err := json.Unmarshal([]byte(a.body), &r); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	return r
}

func errorCode(t *testing.T, a answer) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	return e.Error
}

func TestServeHTTP(t *testing.T) {
	t.Run("200 once indexed and recorded", func(t *testing.T) {
		e := newEnv(t)
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		a := post(t, srv.URL+"/events", envelope(t, completed("u-1")))
		if a.status != http.StatusOK || result(t, a) != (consumer.Result{UploadID: "u-1", Status: "completed"}) {
			t.Fatalf("answer %d %s", a.status, a.body)
		}
		// By the time the sender has its 200, the side effect is done and
		// recorded.
		wantIndexed(t, e.sink, "u-1")
		if got := e.states(t); fmt.Sprint(got) != "[completed]" {
			t.Errorf("records %v, want one completed", got)
		}
	})
	t.Run("a duplicate POST is answered 200 without indexing again", func(t *testing.T) {
		e := newEnv(t)
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		first := post(t, srv.URL, envelope(t, completed("u-1")))
		dup := post(t, srv.URL, envelope(t, completed("u-1"))) // a new id and time
		if first.status != http.StatusOK || dup.status != http.StatusOK {
			t.Fatalf("answers %d, %d; want 200 twice", first.status, dup.status)
		}
		if !result(t, dup).Replayed {
			t.Errorf("duplicate: %s, want replayed", dup.body)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("500 when the sink fails, then 200 on the retry", func(t *testing.T) {
		e := newEnv(t)
		e.sink.fail = func(n int64) error {
			if n == 1 {
				return errors.New("index unavailable")
			}
			return nil
		}
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		body := envelope(t, completed("u-1"))
		failed := post(t, srv.URL, body)
		if failed.status != http.StatusInternalServerError || errorCode(t, failed) != api.CodeInternal {
			t.Fatalf("answer %d %s, want 500 internal_error", failed.status, failed.body)
		}
		if strings.Contains(failed.body, "index unavailable") {
			t.Errorf("the answer %s names the sink's error", failed.body)
		}
		retry := post(t, srv.URL, body)
		if retry.status != http.StatusOK || result(t, retry).Replayed {
			t.Fatalf("retry: %d %s, want a fresh 200", retry.status, retry.body)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("409 with Retry-After while another delivery indexes", func(t *testing.T) {
		e := newEnv(t)
		e.sink.entered, e.sink.block = make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		done := make(chan answer, 1)
		body := envelope(t, completed("u-1"))
		go func() {
			a, err := send(srv.URL, body)
			if err != nil {
				a.body = err.Error()
			}
			done <- a
		}()
		select {
		case <-e.sink.entered:
		case a := <-done:
			t.Fatalf("the first POST ended without indexing: %d %s", a.status, a.body)
		}
		busy := post(t, srv.URL, envelope(t, completed("u-1")))
		close(e.sink.block)
		first := <-done
		if busy.status != http.StatusConflict || errorCode(t, busy) != api.CodeInProgress {
			t.Errorf("second: %d %s, want 409 idempotency_in_progress", busy.status, busy.body)
		}
		// The lease is the delivery's time, consumer.DefaultHTTPTimeout.
		if s, err := strconv.Atoi(busy.header.Get("Retry-After")); err != nil || s < 1 || s > int(consumer.DefaultHTTPTimeout.Seconds()) {
			t.Errorf("Retry-After %q, want 1 to %v seconds", busy.header.Get("Retry-After"), consumer.DefaultHTTPTimeout.Seconds())
		}
		if first.status != http.StatusOK {
			t.Errorf("first: %d %s", first.status, first.body)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("422 for another detail under the same upload id", func(t *testing.T) {
		e := newEnv(t)
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		post(t, srv.URL, envelope(t, completed("u-1")))
		changed := completed("u-1")
		changed.SHA256 = strings.Repeat("cd", 32)
		a := post(t, srv.URL, envelope(t, changed))
		if a.status != http.StatusUnprocessableEntity || errorCode(t, a) != api.CodeKeyReuse {
			t.Errorf("answer %d %s, want 422 idempotency_key_reuse", a.status, a.body)
		}
		wantIndexed(t, e.sink, "u-1")
	})
	t.Run("refusals that a retry cannot mend", func(t *testing.T) {
		e := newEnv(t)
		srv := httptest.NewServer(e.consumer)
		defer srv.Close()
		for _, tc := range []struct {
			name, body string
			status     int
		}{
			{"not JSON", `upload u-1 done`, http.StatusBadRequest},
			{"two envelopes", envelope(t, completed("u-1")) + envelope(t, completed("u-2")), http.StatusBadRequest},
			{"no upload id", strings.Replace(envelope(t, completed("u-1")), `"uploadId":"u-1"`, `"uploadId":""`, 1), http.StatusBadRequest},
			{"over 256 KiB", envelope(t, api.EventDetail{UploadID: "u-1", Filename: strings.Repeat("x", consumer.MaxEventBytes)}), http.StatusRequestEntityTooLarge},
		} {
			if a := post(t, srv.URL, tc.body); a.status != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
			}
		}
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("GET: %d, Allow %q; want 405, POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
		wantIndexed(t, e.sink)
		if got := e.states(t); len(got) != 0 {
			t.Errorf("records %v, want none", got)
		}
	})
}
