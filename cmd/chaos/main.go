// Command chaos is a bounded chaos run (`make chaos`): many Go clients
// upload many files through the local stack while faults are injected
// between the functions and DynamoDB, between the clients and S3, and
// between the clients and the API (answers lost after the work was done,
// Complete's above all), some keys are shared by concurrent clients, some
// clients are killed and restarted mid-upload (mid-part for the multipart
// uploads mixed in), and S3 events are duplicated, delayed (so reordered)
// or dropped. Upload events flow as well, with faults between the events
// function and the bus and between the bus and the example consumer
// (examples/upload-events), whose side effect is counted. It then checks
// every key against the bucket and the table, and every completed upload
// against the consumer, and prints one line:
//
//	chaos: R requests, F faults, U uploads, D duplicate objects, L lost uploads, W wedged keys, M misdirected answers, E events delivered, X missing events, Y doubled side effects
//
// D, L, W, M, X and Y must be 0; the exit status is 1 otherwise. M counts answers
// that belong to another request: the client refuses a create answer that
// does not echo its own request, and every upload id must be its key's.
//
// The stack's S3 is Versity Gateway, or MinIO with --s3 minio (or
// CHAOS_S3=minio make chaos).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/faults"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
)

type settings struct {
	duration       time.Duration
	clients        int
	rate           float64
	shareEvery     int
	killEvery      int
	multipartEvery int
	eventFaults    float64
	s3             services.S3Server
}

func main() {
	var s settings
	flag.DurationVar(&s.duration, "duration", time.Minute, "how long clients keep starting uploads")
	flag.IntVar(&s.clients, "clients", 8, "concurrent clients")
	flag.Float64Var(&s.rate, "rate", 0.1, "fraction of DynamoDB and S3 requests that get a fault")
	flag.IntVar(&s.shareEvery, "share-every", 5, "every Nth upload's key is shared by two concurrent clients")
	flag.IntVar(&s.killEvery, "kill-every", 7, "every Nth upload's client is killed mid-upload and restarted")
	flag.IntVar(&s.multipartEvery, "multipart-every", 10, "every Nth upload is a multipart upload (two or three 5 MiB parts)")
	flag.Float64Var(&s.eventFaults, "event-faults", 0.3, "fraction of S3 events duplicated, delayed or dropped")
	s3Name := flag.String("s3", os.Getenv("CHAOS_S3"), "the S3 server: versity (the default) or minio")
	flag.Parse()
	var err error
	if s.s3, err = services.ParseS3Server(*s3Name); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: --s3:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "chaos: S3 is %s\n", s.s3.Title())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bad, err := run(ctx, s, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if bad {
		os.Exit(1)
	}
}

// logical is one logical upload: a file and its key, shared by the clients
// that upload it.
type logical struct {
	key, path string
	size      int64
	partSize  int64 // 0: a single PUT
	mu        sync.Mutex
	ids       map[string]bool // upload ids clients were given
	completed bool            // a client was told it completed
}

func (l *logical) saw(id string, completed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids[id] = true
	l.completed = l.completed || completed
}

// run is the chaos run: set up the stack behind its fault proxies, load it
// with clients until the time is up, give every key one clean retry, then
// check the bucket and the events. It reports whether anything was lost,
// doubled, wedged or misdirected.
func run(ctx context.Context, s settings, out io.Writer) (bool, error) {
	r := &chaosRun{s: s}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return false, err
	}
	if err := r.load(ctx); err != nil {
		return false, err
	}
	wedged := r.retryEveryKey(ctx)
	t, err := r.verify(ctx)
	if err != nil {
		return false, err
	}
	t.wedged = wedged
	r.report(out, t)
	return t.bad(), nil
}

// chaosRun is one run: the stack, the proxies between its parts, the
// client, the logical uploads and the counts.
type chaosRun struct {
	s      settings
	dir    string
	closes []func() // what set-up started, stopped in reverse order

	rndMu sync.Mutex
	rnd   *mrand.Rand

	st                                       *devstack.Stack
	events                                   *eventCheck
	dynamoProxy, busProxy, s3Proxy, apiProxy *faults.Proxy
	c                                        *client.Client

	uploads                                               []*logical
	eventsTotal, eventFaults, misdirected, clientRequests atomic.Int64
}

// closing adds what set-up started to what close stops.
func (r *chaosRun) closing(fns ...func() error) {
	for _, fn := range fns {
		r.closes = append(r.closes, func() { _ = fn() })
	}
}

func (r *chaosRun) close() {
	for i := len(r.closes) - 1; i >= 0; i-- {
		r.closes[i]()
	}
}

// random is the run's shared random source, for the functions that need
// one: the event faults, the consumer's table.
func (r *chaosRun) random() float64 {
	r.rndMu.Lock()
	defer r.rndMu.Unlock()
	return r.rnd.Float64()
}

// setUp starts the local stack with fault-injecting proxies between the
// functions and DynamoDB and the bus, between the clients and S3 and the
// API, and between the bus and the example consumer; and the client.
func (r *chaosRun) setUp(ctx context.Context) error {
	s := r.s
	var err error
	if r.dir, err = os.MkdirTemp("", "onceupload-chaos-"); err != nil {
		return err
	}
	r.closes = append(r.closes, func() { os.RemoveAll(r.dir) })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.rnd = mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 11))
	if r.events, err = startEventCheck(); err != nil {
		return err
	}
	r.closes = append(r.closes, r.events.close)
	// proxied starts a fault-injecting proxy in front of a server and keeps it
	// in *dst, so the run can inject faults and close it.
	proxied := func(dst **faults.Proxy) func(string) (string, error) {
		return func(server string) (string, error) {
			p, err := faults.Start(server)
			*dst = p
			if err != nil {
				return "", err
			}
			return p.URL, nil
		}
	}
	r.st, err = devstack.Start(ctx, devstack.Config{
		EventsURL: r.events.proxy.URL,
		// The events function reaches the bus through a proxy too: a
		// PutEvents whose answer is lost is put again, twice on the bus.
		FunctionEventBus: proxied(&r.busProxy),

		DataDir: filepath.Join(r.dir, "stack"), Table: "idempotency-chaos", Bucket: "uploads-chaos", Logger: quiet, S3: s.s3,
		// The functions reach DynamoDB through a fault-injecting proxy.
		FunctionDynamo: proxied(&r.dynamoProxy),
		Env: func(k string) (string, bool) {
			if k == "PRESIGN_TTL" {
				return "2m", true
			}
			return "", false
		},
		Deliver: func() (int, time.Duration) {
			r.eventsTotal.Add(1)
			r.rndMu.Lock()
			defer r.rndMu.Unlock()
			if r.rnd.Float64() >= s.eventFaults {
				return 1, 0
			}
			r.eventFaults.Add(1)
			switch r.rnd.IntN(3) {
			case 0:
				return 0, 0 // dropped: status must heal it
			case 1:
				return 2, 0 // duplicated
			default:
				return 1, time.Duration(r.rnd.IntN(1500)) * time.Millisecond // delayed, so reordered
			}
		},
	})
	if err != nil {
		return err
	}
	r.closing(r.st.Close, r.dynamoProxy.Close, r.busProxy.Close)
	if err := r.events.connect(ctx, r.st.DynamoURL, s.rate, r.random); err != nil {
		return err
	}
	eventFaultKinds := faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.ServerError)
	r.busProxy.SetRule(eventFaultKinds)
	r.events.proxy.SetRule(eventFaultKinds)
	r.events.dynamo.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.Throttling, faults.Provisioned, faults.ServerError))

	if r.s3Proxy, err = faults.Start(r.st.S3URL); err != nil {
		return err
	}
	r.closing(r.s3Proxy.Close)
	// Between the clients and the API: answers lost after the function
	// did the work, a Complete's most often (its retry must find the
	// object and answer the same, never complete twice).
	if r.apiProxy, err = faults.Start(r.st.APIURL); err != nil {
		return err
	}
	r.closing(r.apiProxy.Close)
	r.dynamoProxy.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.Throttling, faults.Provisioned, faults.ServerError))
	r.s3Proxy.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.ServerError))
	apiFaults := faults.Random(s.rate, faults.DropResponse)
	completeFaults := faults.Random(0.5, faults.DropResponse)
	r.apiProxy.SetRule(func(op string, req *http.Request) faults.Kind {
		if strings.HasSuffix(req.URL.Path, "/complete") {
			return completeFaults(op, req)
		}
		return apiFaults(op, req)
	})

	// Clients reach S3 through the proxy by dialling it for S3's address:
	// the Host header, which the presigned URL signs, stays S3's.
	s3Addr := strings.TrimPrefix(r.st.S3URL, "http://")
	proxyAddr := strings.TrimPrefix(r.s3Proxy.URL, "http://")
	transport := &http.Transport{
		MaxIdleConnsPerHost: 32,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == s3Addr {
				addr = proxyAddr
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	httpClient := &http.Client{Transport: countingTransport{transport, &r.clientRequests}}
	r.c, err = client.New(r.apiProxy.URL, func(o *client.Options) {
		o.HTTPClient, o.MaxAttempts, o.BaseDelay, o.MaxDelay, o.MaxRetryAfter = httpClient, 10, 20*time.Millisecond, 500*time.Millisecond, 2*time.Second
		o.Deadline = 30 * time.Second
	})
	return err
}

// answered records a finished upload of l's key: its upload id, and a
// misdirected answer when the id is not the key's.
func (r *chaosRun) answered(l *logical, res *client.Result) {
	if !ownedBy(res.Upload.UploadID, l.key) {
		r.misdirected.Add(1)
		fmt.Fprintf(os.Stderr, "chaos: key %s was answered with upload %s\n", l.key, res.Upload.UploadID)
	}
	l.saw(res.Upload.UploadID, res.Upload.Status == api.StatusCompleted)
}

// load has the clients keep starting uploads until the time is up: some
// keys shared by two concurrent clients, some clients killed mid-upload
// and restarted with the same key, some uploads in parts.
func (r *chaosRun) load(ctx context.Context) error {
	s := r.s
	var (
		n        atomic.Int64
		wg       sync.WaitGroup
		deadline = time.Now().Add(s.duration)
	)
	uploadOnce := func(l *logical, kill bool) {
		uctx := ctx
		if kill {
			var cancel context.CancelFunc
			uctx, cancel = context.WithTimeout(ctx, time.Duration(20+mrand.IntN(200))*time.Millisecond)
			defer cancel()
		}
		res, err := r.c.Upload(uctx, l.path, client.UploadInput{Key: l.key, PartSize: l.partSize})
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Code == client.CodeAnswerMismatch:
			r.misdirected.Add(1)
			fmt.Fprintf(os.Stderr, "chaos: key %s got another request's answer: %v\n", l.key, err)
		case err == nil:
			r.answered(l, res)
		}
	}
	sem := make(chan struct{}, s.clients)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		i := n.Add(1)
		l, err := newLogical(r.dir, i, s.multipartEvery > 0 && i%int64(s.multipartEvery) == 0)
		if err != nil {
			wg.Wait()
			return err
		}
		r.uploads = append(r.uploads, l)
		sharers := 1
		if s.shareEvery > 0 && i%int64(s.shareEvery) == 0 {
			sharers = 2
		}
		kill := s.killEvery > 0 && i%int64(s.killEvery) == 0
		for range sharers {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if kill {
					uploadOnce(l, true) // killed mid-upload…
				}
				uploadOnce(l, false) // …and restarted with the same key
			})
		}
	}
	wg.Wait()
	return ctx.Err()
}

// retryEveryKey turns the faults off and gives every key one more, clean,
// client retry: that is what a user does, and a key that cannot complete
// now is wedged. It returns how many are.
func (r *chaosRun) retryEveryKey(ctx context.Context) (wedged int) {
	for _, p := range []*faults.Proxy{r.dynamoProxy, r.s3Proxy, r.apiProxy, r.busProxy, r.events.proxy, r.events.dynamo} {
		p.SetRule(faults.Always(faults.None))
	}
	clean, _ := client.New(r.st.APIURL, func(o *client.Options) { o.Deadline = 30 * time.Second })
	for _, l := range r.uploads {
		res, err := clean.Upload(ctx, l.path, client.UploadInput{Key: l.key, PartSize: l.partSize})
		if err != nil {
			wedged++
			fmt.Fprintf(os.Stderr, "chaos: wedged key %s: %v\n", l.key, err)
			continue
		}
		r.answered(l, res)
	}
	return wedged
}

// tally is what the checks found: each count must be 0.
type tally struct {
	duplicates, lost, wedged, missingEvents, doubled int
	misdirected                                      int64
}

func (t tally) bad() bool {
	return t.duplicates+t.lost+t.wedged+int(t.misdirected)+t.missingEvents+t.doubled > 0
}

// verify checks every key against the bucket (one object per key, of its
// file's size, and no object of no key) and every completed upload against
// the consumer (its side effect exactly once).
func (r *chaosRun) verify(ctx context.Context) (tally, error) {
	t := tally{misdirected: r.misdirected.Load()}
	objects, err := listObjects(ctx, r.st)
	if err != nil {
		return t, err
	}
	owned := map[string]bool{}
	for _, l := range r.uploads {
		if len(l.ids) > 1 {
			t.duplicates += len(l.ids) - 1 // one key, several uploads
			fmt.Fprintf(os.Stderr, "chaos: key %s got %d upload ids\n", l.key, len(l.ids))
		}
		for id := range l.ids {
			owned["uploads/"+id] = true
			if size, ok := objects["uploads/"+id]; !ok || size != l.size {
				t.lost++
				fmt.Fprintf(os.Stderr, "chaos: upload %s of key %s is not in the bucket\n", id, l.key)
			}
		}
	}
	for key := range objects {
		if !owned[key] {
			t.duplicates++
			fmt.Fprintf(os.Stderr, "chaos: object %s belongs to no key\n", key)
		}
	}
	// Every upload in the bucket completed, so each must have had its
	// event processed exactly once.
	completed := map[string]bool{}
	for _, l := range r.uploads {
		for id := range l.ids {
			if _, ok := objects["uploads/"+id]; ok {
				completed[id] = true
			}
		}
	}
	unexpected := 0
	if r.st.EventsEnabled {
		t.missingEvents, t.doubled, unexpected = r.events.settle(completed, time.Minute)
	} else {
		fmt.Fprintln(os.Stderr, "chaos: the local DynamoDB has no streams (dynalite): upload events are not checked")
	}
	if t.missingEvents+t.doubled+unexpected > 0 {
		fmt.Fprintf(os.Stderr, "chaos: events: %d completed uploads never processed, %d processed more than once, %d processed that did not complete\n", t.missingEvents, t.doubled, unexpected)
	}
	t.doubled += unexpected
	return t, nil
}

// report prints the run's one line.
func (r *chaosRun) report(out io.Writer, t tally) {
	e := r.events
	requests := r.clientRequests.Load() + r.dynamoProxy.Requests() + r.eventsTotal.Load() + r.busProxy.Requests() + e.proxy.Requests() + e.dynamo.Requests()
	injected := r.dynamoProxy.Faults() + r.s3Proxy.Faults() + r.apiProxy.Faults() + r.eventFaults.Load() + r.busProxy.Faults() + e.proxy.Faults() + e.dynamo.Faults() + e.sinkFails.Load()
	multipart := 0
	for _, l := range r.uploads {
		if l.partSize > 0 {
			multipart++
		}
	}
	fmt.Fprintf(out, "chaos: %d requests, %d faults, %d uploads (%d multipart), %d duplicate objects, %d lost uploads, %d wedged keys, %d misdirected answers, %d events delivered, %d missing events, %d doubled side effects\n",
		requests, injected, len(r.uploads), multipart, t.duplicates, t.lost, t.wedged, t.misdirected, e.delivered.Load(), t.missingEvents, t.doubled)
}

// ownedBy reports whether uploadID belongs to key: upload ids start with
// the hash of (tenant, key), and every chaos client is the local tenant.
func ownedBy(uploadID, key string) bool {
	id, err := upload.ParseUploadID(uploadID)
	return err == nil && id == idempotency.NewID(apigateway.JWTPrincipal("", devstack.LocalTenant), key)
}

func newLogical(dir string, i int64, multipart bool) (*logical, error) {
	size := 1 + mrand.IntN(64<<10)
	var partSize int64
	if multipart {
		// Two or three parts of the smallest size S3 takes.
		partSize = api.MinPartSize
		size = api.MinPartSize + 1 + mrand.IntN(api.MinPartSize+api.MinPartSize/2)
	}
	b := make([]byte, size)
	_, _ = rand.Read(b)
	path := filepath.Join(dir, fmt.Sprintf("file-%06d.bin", i))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return &logical{key: client.NewKey(), path: path, size: int64(size), partSize: partSize, ids: map[string]bool{}}, nil
}

func listObjects(ctx context.Context, st *devstack.Stack) (map[string]int64, error) {
	s3c := s3.NewFromConfig(services.AWSConfig(), func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(st.S3URL), true })
	objects := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(s3c, &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			objects[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return objects, nil
}

type countingTransport struct {
	http.RoundTripper
	n *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.RoundTripper.RoundTrip(r)
}
