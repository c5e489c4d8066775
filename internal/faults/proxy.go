// Package faults is a fault-injecting HTTP proxy for tests and the chaos
// run. Put it between the functions and DynamoDB, or between clients and
// S3, and it can drop a request before forwarding it, forward it and drop
// the response, add latency, or answer as a throttled or failing DynamoDB.
package faults

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is one kind of fault.
type Kind int

// Faults.
const (
	None         Kind = iota
	DropRequest       // close the connection without forwarding
	DropResponse      // forward, then close the connection without answering
	Latency           // forward after a delay
	Throttling        // answer DynamoDB's ThrottlingException (400)
	Provisioned       // answer ProvisionedThroughputExceededException (400)
	ServerError       // answer 500 InternalServerError
)

func (k Kind) String() string {
	return [...]string{"none", "drop-request", "drop-response", "latency", "throttling", "provisioned-throughput", "server-error"}[k]
}

// Rule picks the fault for a request; op is DynamoDB's operation name
// (from X-Amz-Target) or the HTTP method for other services.
type Rule func(op string, r *http.Request) Kind

// Always applies k to the operations listed (all when none are).
func Always(k Kind, ops ...string) Rule {
	return func(op string, _ *http.Request) Kind {
		if len(ops) == 0 {
			return k
		}
		for _, o := range ops {
			if o == op {
				return k
			}
		}
		return None
	}
}

// Random applies one of kinds to a fraction rate of requests.
func Random(rate float64, kinds ...Kind) Rule {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	return func(string, *http.Request) Kind {
		mu.Lock()
		defer mu.Unlock()
		if rnd.Float64() >= rate {
			return None
		}
		return kinds[rnd.IntN(len(kinds))]
	}
}

// Proxy forwards to a target and injects faults by its rule.
type Proxy struct {
	URL     string // where clients connect: http://127.0.0.1:PORT
	Delay   time.Duration
	rule    atomic.Pointer[Rule]
	target  *url.URL
	rp      *httputil.ReverseProxy
	srv     *http.Server
	counts  sync.Map // Kind → *atomic.Int64
	forward atomic.Int64
}

// Start listens on a free port of 127.0.0.1 and forwards to target. The
// Host header is kept, so SigV4-signed requests (presigned URLs) stay
// valid when a client dials the proxy for the target's host.
func Start(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), target: u, Delay: 200 * time.Millisecond}
	p.SetRule(Always(None))
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
		ErrorLog:  log.New(io.Discard, "", 0), // a client cut off mid-request is the point
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// SetRule replaces the rule (safe while serving).
func (p *Proxy) SetRule(r Rule) { p.rule.Store(&r) }

// Count is how many requests got fault k so far.
func (p *Proxy) Count(k Kind) int64 {
	if v, ok := p.counts.Load(k); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// Faults is the number of faults injected so far.
func (p *Proxy) Faults() int64 {
	var n int64
	for k := DropRequest; k <= ServerError; k++ {
		n += p.Count(k)
	}
	return n
}

// Requests is the number of requests seen so far.
func (p *Proxy) Requests() int64 { return p.forward.Load() }

// Close stops the proxy.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.forward.Add(1)
	op := r.Method
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		op = t[strings.LastIndex(t, ".")+1:]
	}
	k := (*p.rule.Load())(op, r)
	if k != None {
		v, _ := p.counts.LoadOrStore(k, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	switch k {
	case DropRequest:
		hangUp(w)
	case DropResponse:
		p.rp.ServeHTTP(&discard{header: http.Header{}}, r)
		hangUp(w)
	case Latency:
		time.Sleep(p.Delay)
		p.rp.ServeHTTP(w, r)
	case Throttling:
		dynamoError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ThrottlingException", "Rate of requests exceeds the allowed throughput.")
	case Provisioned:
		dynamoError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.")
	case ServerError:
		dynamoError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error")
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// dynamoError answers as DynamoDB does, CRC32 of the body included (the
// SDK checks it).
func dynamoError(w http.ResponseWriter, status int, typ, msg string) {
	body := fmt.Sprintf(`{"__type":%q,"message":%q}`, typ, msg)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", typ[strings.Index(typ, "#")+1:])
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
