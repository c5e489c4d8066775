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

	"github.com/onceupload/onceupload/internal/devstack"
	"github.com/onceupload/onceupload/internal/faults"
	"github.com/onceupload/onceupload/internal/services"
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

func run(ctx context.Context, s settings, out io.Writer) (bool, error) {
	dir, err := os.MkdirTemp("", "onceupload-chaos-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	var eventsTotal, eventFaults, misdirected atomic.Int64
	var dynamoProxy *faults.Proxy
	var rndMu sync.Mutex
	rnd := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 11))
	random := func() float64 {
		rndMu.Lock()
		defer rndMu.Unlock()
		return rnd.Float64()
	}
	events, err := startEventCheck()
	if err != nil {
		return false, err
	}
	defer events.close()
	var busProxy *faults.Proxy
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
	st, err := devstack.Start(ctx, devstack.Config{
		EventsURL: events.proxy.URL,
		// The events function reaches the bus through a proxy too: a
		// PutEvents whose answer is lost is put again, twice on the bus.
		FunctionEventBus: proxied(&busProxy),

		DataDir: filepath.Join(dir, "stack"), Table: "idempotency-chaos", Bucket: "uploads-chaos", Logger: quiet, S3: s.s3,
		// The functions reach DynamoDB through a fault-injecting proxy.
		FunctionDynamo: proxied(&dynamoProxy),
		Env: func(k string) (string, bool) {
			if k == "PRESIGN_TTL" {
				return "2m", true
			}
			return "", false
		},
		Deliver: func() (int, time.Duration) {
			eventsTotal.Add(1)
			rndMu.Lock()
			defer rndMu.Unlock()
			if rnd.Float64() >= s.eventFaults {
				return 1, 0
			}
			eventFaults.Add(1)
			switch rnd.IntN(3) {
			case 0:
				return 0, 0 // dropped: status must heal it
			case 1:
				return 2, 0 // duplicated
			default:
				return 1, time.Duration(rnd.IntN(1500)) * time.Millisecond // delayed, so reordered
			}
		},
	})
	if err != nil {
		return false, err
	}
	defer st.Close()
	defer dynamoProxy.Close()
	defer busProxy.Close()
	if err := events.connect(ctx, st.DynamoURL, s.rate, random); err != nil {
		return false, err
	}
	eventFaultKinds := faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.ServerError)
	busProxy.SetRule(eventFaultKinds)
	events.proxy.SetRule(eventFaultKinds)
	events.dynamo.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.Throttling, faults.Provisioned, faults.ServerError))

	s3Proxy, err := faults.Start(st.S3URL)
	if err != nil {
		return false, err
	}
	defer s3Proxy.Close()
	// Between the clients and the API: answers lost after the function
	// did the work, a Complete's most often (its retry must find the
	// object and answer the same, never complete twice).
	apiProxy, err := faults.Start(st.APIURL)
	if err != nil {
		return false, err
	}
	defer apiProxy.Close()
	dynamoProxy.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.Throttling, faults.Provisioned, faults.ServerError))
	s3Proxy.SetRule(faults.Random(s.rate, faults.DropRequest, faults.DropResponse, faults.Latency, faults.ServerError))
	apiFaults := faults.Random(s.rate, faults.DropResponse)
	completeFaults := faults.Random(0.5, faults.DropResponse)
	apiProxy.SetRule(func(op string, r *http.Request) faults.Kind {
		if strings.HasSuffix(r.URL.Path, "/complete") {
			return completeFaults(op, r)
		}
		return apiFaults(op, r)
	})

	// Clients reach S3 through the proxy by dialling it for S3's address:
	// the Host header, which the presigned URL signs, stays S3's.
	s3Addr := strings.TrimPrefix(st.S3URL, "http://")
	proxyAddr := strings.TrimPrefix(s3Proxy.URL, "http://")
	var clientRequests atomic.Int64
	transport := &http.Transport{
		MaxIdleConnsPerHost: 32,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == s3Addr {
				addr = proxyAddr
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	httpClient := &http.Client{Transport: countingTransport{transport, &clientRequests}}
	c, err := client.New(apiProxy.URL, func(o *client.Options) {
		o.HTTPClient, o.MaxAttempts, o.BaseDelay, o.MaxDelay, o.MaxRetryAfter = httpClient, 10, 20*time.Millisecond, 500*time.Millisecond, 2*time.Second
		o.Deadline = 30 * time.Second
	})
	if err != nil {
		return false, err
	}

	// The run: clients keep starting uploads until the time is up.
	var (
		mu       sync.Mutex
		uploads  []*logical
		n        atomic.Int64
		wg       sync.WaitGroup
		deadline = time.Now().Add(s.duration)
	)
	// answered records a finished upload of l's key: its upload id, and a
	// misdirected answer when the id is not the key's.
	answered := func(l *logical, res *client.Result) {
		if !ownedBy(res.Upload.UploadID, l.key) {
			misdirected.Add(1)
			fmt.Fprintf(os.Stderr, "chaos: key %s was answered with upload %s\n", l.key, res.Upload.UploadID)
		}
		l.saw(res.Upload.UploadID, res.Upload.Status == api.StatusCompleted)
	}
	uploadOnce := func(l *logical, kill bool) {
		uctx := ctx
		if kill {
			var cancel context.CancelFunc
			uctx, cancel = context.WithTimeout(ctx, time.Duration(20+mrand.IntN(200))*time.Millisecond)
			defer cancel()
		}
		res, err := c.Upload(uctx, l.path, client.UploadInput{Key: l.key, PartSize: l.partSize})
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Code == client.CodeAnswerMismatch:
			misdirected.Add(1)
			fmt.Fprintf(os.Stderr, "chaos: key %s got another request's answer: %v\n", l.key, err)
		case err == nil:
			answered(l, res)
		}
	}
	sem := make(chan struct{}, s.clients)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		i := n.Add(1)
		l, err := newLogical(dir, i, s.multipartEvery > 0 && i%int64(s.multipartEvery) == 0)
		if err != nil {
			return false, err
		}
		mu.Lock()
		uploads = append(uploads, l)
		mu.Unlock()
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
	if ctx.Err() != nil {
		return false, ctx.Err()
	}

	// Faults off. Every key gets one more, clean, client retry: that is what
	// a user does, and a key that cannot complete now is wedged.
	dynamoProxy.SetRule(faults.Always(faults.None))
	s3Proxy.SetRule(faults.Always(faults.None))
	apiProxy.SetRule(faults.Always(faults.None))
	busProxy.SetRule(faults.Always(faults.None))
	events.proxy.SetRule(faults.Always(faults.None))
	events.dynamo.SetRule(faults.Always(faults.None))
	wedged := 0
	clean, _ := client.New(st.APIURL, func(o *client.Options) { o.Deadline = 30 * time.Second })
	for _, l := range uploads {
		res, err := clean.Upload(ctx, l.path, client.UploadInput{Key: l.key, PartSize: l.partSize})
		if err != nil {
			wedged++
			fmt.Fprintf(os.Stderr, "chaos: wedged key %s: %v\n", l.key, err)
			continue
		}
		answered(l, res)
	}

	// Check every key against the bucket.
	objects, err := listObjects(ctx, st)
	if err != nil {
		return false, err
	}
	duplicates, lost := 0, 0
	owned := map[string]bool{}
	for _, l := range uploads {
		if len(l.ids) > 1 {
			duplicates += len(l.ids) - 1 // one key, several uploads
			fmt.Fprintf(os.Stderr, "chaos: key %s got %d upload ids\n", l.key, len(l.ids))
		}
		for id := range l.ids {
			owned["uploads/"+id] = true
			if size, ok := objects["uploads/"+id]; !ok || size != l.size {
				lost++
				fmt.Fprintf(os.Stderr, "chaos: upload %s of key %s is not in the bucket\n", id, l.key)
			}
		}
	}
	for key := range objects {
		if !owned[key] {
			duplicates++
			fmt.Fprintf(os.Stderr, "chaos: object %s belongs to no key\n", key)
		}
	}
	// Every upload in the bucket completed, so each must have had its
	// event processed exactly once.
	completed := map[string]bool{}
	for _, l := range uploads {
		for id := range l.ids {
			if _, ok := objects["uploads/"+id]; ok {
				completed[id] = true
			}
		}
	}
	missingEvents, doubled, unexpected := 0, 0, 0
	if st.EventsEnabled {
		missingEvents, doubled, unexpected = events.settle(completed, time.Minute)
	} else {
		fmt.Fprintln(os.Stderr, "chaos: the local DynamoDB has no streams (dynalite): upload events are not checked")
	}
	if missingEvents+doubled+unexpected > 0 {
		fmt.Fprintf(os.Stderr, "chaos: events: %d completed uploads never processed, %d processed more than once, %d processed that did not complete\n", missingEvents, doubled, unexpected)
	}
	doubled += unexpected
	requests := clientRequests.Load() + dynamoProxy.Requests() + eventsTotal.Load() + busProxy.Requests() + events.proxy.Requests() + events.dynamo.Requests()
	injected := dynamoProxy.Faults() + s3Proxy.Faults() + apiProxy.Faults() + eventFaults.Load() + busProxy.Faults() + events.proxy.Faults() + events.dynamo.Faults() + events.sinkFails.Load()
	multipart := 0
	for _, l := range uploads {
		if l.partSize > 0 {
			multipart++
		}
	}
	fmt.Fprintf(out, "chaos: %d requests, %d faults, %d uploads (%d multipart), %d duplicate objects, %d lost uploads, %d wedged keys, %d misdirected answers, %d events delivered, %d missing events, %d doubled side effects\n",
		requests, injected, len(uploads), multipart, duplicates, lost, wedged, misdirected.Load(), events.delivered.Load(), missingEvents, doubled)
	return duplicates+lost+wedged+int(misdirected.Load())+missingEvents+doubled > 0, nil
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
