package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/faults"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// The outage matrix: for each step of the single PUT and of the upload in
// parts, and each moment an outage can strike it at, the network fails
// (the step's request is lost, or the server acts and its answer is lost,
// or a PUT's connection drops mid-body), then resets and refuses every
// attempt until outageAttempts attempts have been refused, then comes
// back. (At the create the API has not answered yet: a refused
// connection on a create's first attempt ends a run at once by design,
// ErrConnectionRefused, so the create's lost request is followed by
// outageAttempts resets instead. Its answer-lost cell is refused as any
// other: the first attempt may have created the upload, so a refusal after
// it must be retried, never end the run and lose the key.) Each cell must
// end completed, with one object (the file), one upload id (every create
// carried one key, every request named one upload, a lost create answer
// named it too) and one Upload Completed event for it, counted by upload
// id at the local stack's events endpoint once every cell has run.
// One cell: go test ./pkg/client -run 'TestOutageMatrix/parts/complete/answer-lost'.
//
// The network is two internal/tooling/faults proxies of the cell's own, one in
// front of the API (the client's base URL) and one in front of S3 (the
// client dials it for the host presigned URLs name; the proxy keeps the
// Host header, so the signatures hold). The outage ends on an event, a
// count of refused attempts, never after a time; the client's backoff is
// shortened so that no cell waits seconds.

// outageAttempts is how many attempts an outage refuses (or, before the
// API has answered, resets) before the network comes back.
const outageAttempts = 4

// matrixRetries is the cells' retry policy: the client's, with waits of
// milliseconds, and a deadline that fails a stuck cell instead of hanging.
func matrixRetries(o *client.Options) {
	o.BaseDelay, o.MaxDelay, o.Deadline = 5*time.Millisecond, 50*time.Millisecond, 2*time.Minute
}

// outageStep is a step of an upload: which request is its.
type outageStep struct {
	name string
	is   func(r *http.Request) bool
	// put: a PUT to S3, whose connection can drop mid-body.
	put bool
	// resume: asked only by an upload that resumes; the cell first stores
	// part 1 and stops.
	resume bool
}

var (
	stepCreate = outageStep{name: "create", is: func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/uploads"
	}}
	stepSign = outageStep{name: "sign", is: func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/parts")
	}}
	stepPut = outageStep{name: "put", put: true, is: func(r *http.Request) bool {
		return r.Method == http.MethodPut && !r.URL.Query().Has("partNumber")
	}}
	stepComplete = outageStep{name: "complete", is: func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete")
	}}
	// The single PUT's status: Wait's polls, GET /uploads/{id}.
	stepStatus = outageStep{name: "status", is: func(r *http.Request) bool {
		id, ok := strings.CutPrefix(r.URL.Path, "/uploads/")
		return r.Method == http.MethodGet && ok && !strings.Contains(id, "/")
	}}
	// An upload in parts asks no status (Complete answers the completed
	// body); what it asks of an upload under way is the parts S3 holds,
	// when it resumes.
	stepListParts = outageStep{name: "list-parts", resume: true, is: func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/parts")
	}}
)

func stepPart(name string, n int) outageStep {
	return outageStep{name: name, put: true, is: func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == fmt.Sprint(n)
	}}
}

// outageMoment is when the outage strikes the step's request.
type outageMoment struct {
	name string
	kind faults.Kind
}

var (
	momentLost       = outageMoment{"lost", faults.Reset}               // never reaches the server
	momentAnswerLost = outageMoment{"answer-lost", faults.DropResponse} // the server acts; its answer is lost
	momentMidBody    = outageMoment{"mid-body", faults.DropMidBody}     // half the body reaches the server
)

// outagePhase is where a cell's outage stands.
type outagePhase int

const (
	awaiting outagePhase = iota // the step's request has not come yet
	struck                      // it got the moment's fault, which is not over yet: the rest is reset
	down                        // the proxies are down: connections are refused
	over                        // the network is back
)

// outage is one cell's network: the two proxies and the rule that breaks
// them.
type outage struct {
	api, s3        *faults.Proxy
	apiAddr        string // where the client's base URL points
	s3Host, s3Addr string // the host presigned URLs name, and the proxy the client dials for it
	step           outageStep
	moment         outageMoment
	// resetsOnly: before the API has answered, a refused connection ends
	// a run at once by design when no earlier attempt may have reached the
	// server (ErrConnectionRefused: the base URL is most likely wrong), so
	// the create's lost-request outage resets outageAttempts attempts
	// instead. (Its answer-lost outage refuses them: that create reached
	// the API, and the client must retry it.)
	resetsOnly bool
	dialer     net.Dialer

	mu       sync.Mutex
	phase    outagePhase
	hitReq   *http.Request
	hit      *faults.Fault // the moment's fault, once over
	resets   int           // attempts reset during the outage
	refused  int           // attempts refused during the outage
	requests []seenRequest // every request either proxy was given
	upErr    error
}

type seenRequest struct {
	method, path, key string
}

func startOutage(t *testing.T, st *devstack.Stack, step outageStep, moment outageMoment) *outage {
	t.Helper()
	o := &outage{step: step, moment: moment, resetsOnly: step.name == stepCreate.name && moment.kind != faults.DropResponse}
	var err error
	if o.api, err = faults.Start(st.APIURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.api.Close() })
	if o.s3, err = faults.Start(st.S3URL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.s3.Close() })
	s3URL, _ := url.Parse(st.S3URL)
	o.apiAddr, o.s3Host, o.s3Addr = strings.TrimPrefix(o.api.URL, "http://"), s3URL.Host, strings.TrimPrefix(o.s3.URL, "http://")
	for _, p := range []*faults.Proxy{o.api, o.s3} {
		p.SetRule(o.rule)
		p.OnFault(o.onFault)
	}
	return o
}

// rule gives the step's first request the moment's fault, and resets
// whatever comes while that fault is under way (or, resetsOnly, the
// outageAttempts attempts after it).
func (o *outage) rule(_ string, r *http.Request) faults.Kind {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, seenRequest{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key")})
	switch o.phase {
	case awaiting:
		if o.step.is(r) {
			o.phase, o.hitReq = struck, r
			return o.moment.kind
		}
	case struck, down:
		o.resets++
		if o.resetsOnly && o.resets >= outageAttempts {
			o.phase = over
		}
		return faults.Reset
	}
	return faults.None
}

// onFault takes the network down once the moment's fault is over (the
// answer lost, the body cut): from then on connections are refused.
func (o *outage) onFault(f faults.Fault) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f.Request != o.hitReq {
		return // one of the outage's resets
	}
	o.hit = &f
	if !o.resetsOnly && o.phase == struck {
		o.phase = down
		o.api.Down()
		o.s3.Down()
	}
}

// dial is the client's dialer: S3's host through the S3 proxy; refused
// attempts are counted, and the outageAttempts-th brings the network back.
func (o *outage) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == o.s3Host {
		addr = o.s3Addr
	}
	conn, err := o.dialer.DialContext(ctx, network, addr)
	if errors.Is(err, syscall.ECONNREFUSED) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.phase == down {
			o.refused++
			if o.refused >= outageAttempts {
				o.phase = over
				o.upErr = errors.Join(o.api.Up(), o.s3.Up())
			}
		}
	}
	return conn, err
}

// client is a client of the API through the outage.
func (o *outage) client(t *testing.T) *client.Client {
	t.Helper()
	transport := client.NewTransport()
	transport.DialContext = o.dial
	c, err := client.New("http://"+o.apiAddr, matrixRetries, func(opts *client.Options) { opts.HTTPClient = &http.Client{Transport: transport} })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check fails t unless the outage ran its course: the moment's fault was
// injected into the step's request, and the network came back only after
// outageAttempts attempts were refused (reset, resetsOnly).
func (o *outage) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hit == nil || o.hit.Kind != o.moment.kind {
		t.Errorf("the %s request never got the fault %s: the cell tested nothing", o.step.name, o.moment.kind)
	}
	switch {
	case o.phase != over:
		t.Errorf("the outage is not over (phase %d): %d attempts reset, %d refused", o.phase, o.resets, o.refused)
	case o.resetsOnly && o.resets < outageAttempts, !o.resetsOnly && o.refused < outageAttempts:
		t.Errorf("%d attempts reset, %d refused; want %d", o.resets, o.refused, outageAttempts)
	}
	if o.upErr != nil {
		t.Errorf("the network did not come back: %v", o.upErr)
	}
	t.Logf("%s %s: %d attempts reset, %d refused, %d requests in all", o.step.name, o.moment.name, o.resets, o.refused, len(o.requests))
}

// sameUpload fails t unless every create carried key and every request
// about an upload named id: one upload, whatever was retried.
func (o *outage) sameUpload(t *testing.T, key, id string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys, others []string
	for _, r := range o.requests {
		if r.method == http.MethodPost && r.path == "/uploads" {
			keys = append(keys, r.key)
			continue
		}
		if rest, ok := strings.CutPrefix(r.path, "/uploads/"); ok && strings.Split(rest, "/")[0] != id {
			others = append(others, r.method+" "+r.path)
		}
	}
	for _, k := range keys {
		if k != key {
			t.Errorf("the creates carried keys %q; want %q every time", keys, key)
			break
		}
	}
	if len(others) > 0 {
		t.Errorf("requests about another upload than %s: %q", id, others)
	}
	if o.hit != nil && o.step.name == stepCreate.name && o.hit.Kind == faults.DropResponse {
		var lost api.Upload
		if err := json.Unmarshal(o.hit.Body, &lost); err != nil || lost.UploadID != id {
			t.Errorf("the lost create answer was upload %q (%v); want %s", lost.UploadID, err, id)
		}
	}
}

type outageProtocol struct {
	name     string
	size     int
	partSize int64
	steps    []outageStep
}

// TestOutageMatrix: see the top of this file. A single PUT signs no
// parts, and an upload in parts asks no status (list-parts is its
// resume's question instead); those cells do not exist.
func TestOutageMatrix(t *testing.T) {
	sink := testenv.NewEventSink(t)
	testenv.RequireTools(t, "dynoxide")
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-outages", Bucket: "uploads-outages", EventsURL: sink.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if !st.EventsEnabled {
		t.Fatal("the stack reads no stream: no events to count")
	}
	protocols := []outageProtocol{
		{"single", 256 << 10, -1, []outageStep{stepCreate, stepPut, stepStatus}},
		{"parts", 2*api.MinPartSize + 1<<20, api.MinPartSize, []outageStep{ // parts of 5, 5 and 1 MiB
			stepCreate, stepSign, stepPart("first-part", 1), stepPart("middle-part", 2), stepPart("last-part", 3), stepComplete, stepListParts}},
	}
	uploads := map[string]string{} // upload id → cell
	for _, proto := range protocols {
		for _, step := range proto.steps {
			moments := []outageMoment{momentLost, momentAnswerLost}
			if step.put {
				moments = append(moments, momentMidBody)
			}
			for _, moment := range moments {
				t.Run(proto.name+"/"+step.name+"/"+moment.name, func(t *testing.T) {
					if id := outageCell(t, st, proto, step, moment); id != "" {
						uploads[id] = t.Name()
					}
				})
			}
		}
	}
	if len(uploads) == 0 {
		return
	}
	// One more upload, after every cell's: the stack reads its stream in
	// order, so once this one's event is in, every cell's has come.
	c, _ := client.New(st.APIURL, matrixRetries)
	last, err := c.Upload(context.Background(), writeFile(t, "last.bin", 1000), client.UploadInput{})
	if err != nil {
		t.Fatal(err)
	}
	sink.OneEach(t, uploads, api.DetailTypeUploadCompleted, last.Upload.UploadID)
}

// outageCell uploads a file through an outage at step and moment, checks
// what it can at once, and returns the upload id (for the events check).
func outageCell(t *testing.T, st *devstack.Stack, proto outageProtocol, step outageStep, moment outageMoment) string {
	path := writeFile(t, "cell.bin", proto.size)
	in := client.UploadInput{Key: client.NewKey(), PartSize: proto.partSize}
	ctx := context.Background()
	before := objectCount(t, st)
	firstID := ""
	if step.resume {
		// A first run stores part 1, then S3 refuses part 2 for good.
		refusing := roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "1" {
				if r.Body != nil {
					r.Body.Close()
				}
				return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{}, Request: r,
					Body: http.NoBody}, nil
			}
			return http.DefaultTransport.RoundTrip(r)
		})
		first, _ := client.New(st.APIURL, matrixRetries, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: refusing} })
		firstIn := in
		firstIn.Parallel = 1
		firstIn.OnCreated = func(_ string, u *api.Upload) { firstID = u.UploadID }
		if _, err := first.Upload(ctx, path, firstIn); err == nil || firstID == "" {
			t.Fatalf("the first run: %v, upload %q; want it stopped after part 1", err, firstID)
		}
	}
	o := startOutage(t, st, step, moment)
	res, err := o.client(t).Upload(ctx, path, in)
	o.check(t)
	if err != nil {
		t.Fatalf("upload through the outage: %v", err)
	}
	u := res.Upload
	if u.Status != api.StatusCompleted || res.Key != in.Key {
		t.Fatalf("ended %s with key %s; want completed with key %s", u.Status, res.Key, in.Key)
	}
	o.sameUpload(t, in.Key, u.UploadID)
	if step.resume && (u.UploadID != firstID || res.PartsHeld != 1 || res.PartsSent != 2) {
		t.Errorf("resumed upload %s with %d parts held, %d sent; want upload %s, 1 held, 2 sent", u.UploadID, res.PartsHeld, res.PartsSent, firstID)
	}
	// A single PUT whose answer was lost finds its object stored when it
	// PUTs again (412 to If-None-Match): not stored twice.
	if proto.partSize < 0 {
		want := client.PutStored
		if step.name == stepPut.name && moment.kind == faults.DropResponse {
			want = client.PutAlreadyStored
		}
		if res.Put != want {
			t.Errorf("the PUT ended %s; want %s", res.Put, want)
		}
	}
	if n := objectCount(t, st); n != before+1 {
		t.Errorf("%d objects after the cell, %d before; want one more", n, before)
	}
	if !bytes.Equal(objectAt(t, st, u.StorageKey), fileBytes(t, path)) {
		t.Error("the object is not the file")
	}
	return u.UploadID
}
