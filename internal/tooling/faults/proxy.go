// Package faults is a fault-injecting HTTP proxy for tests and the chaos
// run. Put it between the functions and DynamoDB, or between clients and
// S3, and it can drop a request before forwarding it, forward it and drop
// the response, reset the connection, cut a request's body half-way, add
// latency, or answer as a throttled or failing DynamoDB; and it can go
// down (its port refuses connections) and come back up.
package faults

import (
	"context"
	"errors"
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
	Reset             // reset the connection (a TCP RST) without forwarding
	DropMidBody       // forward the first half of the request's body, then reset the connection: the request never arrives whole
)

// lastKind is the last Kind, for loops over them all.
const lastKind = DropMidBody

func (k Kind) String() string {
	return [...]string{"none", "drop-request", "drop-response", "latency", "throttling", "provisioned-throughput", "server-error", "reset", "drop-mid-body"}[k]
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
	onFault atomic.Pointer[func(Fault)]
	target  *url.URL
	rp      *httputil.ReverseProxy
	srv     *http.Server
	counts  sync.Map // Kind → *atomic.Int64
	forward atomic.Int64

	mu    sync.Mutex
	addr  string                // the address it listens on, again after Up
	l     net.Listener          // nil while down
	conns map[net.Conn]struct{} // open client connections, to cut when it goes down
}

// Fault is a fault the proxy injected, as OnFault reports it once the
// fault is done (the connection hung up or reset).
type Fault struct {
	Op      string // as the Rule was given it
	Request *http.Request
	Kind    Kind
	// Status and Body are the answer the client never got: the target's
	// answer to a request forwarded under DropResponse (Body up to 1 MiB);
	// 0 and nil when there was none.
	Status int
	Body   []byte
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
	p := &Proxy{URL: "http://" + l.Addr().String(), target: u, Delay: 200 * time.Millisecond, addr: l.Addr().String(), l: l, conns: map[net.Conn]struct{}{}}
	p.SetRule(Always(None))
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
		ErrorLog:  log.New(io.Discard, "", 0), // a client cut off mid-request is the point
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second, ConnState: p.track}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// SetRule replaces the rule (safe while serving).
func (p *Proxy) SetRule(r Rule) { p.rule.Store(&r) }

// OnFault sets fn to be called, from the request's goroutine, after each
// fault is injected: a test can act on a fault's end (take the network
// down once an answer is lost, say) rather than on a timer. nil stops it.
func (p *Proxy) OnFault(fn func(Fault)) {
	if fn == nil {
		p.onFault.Store(nil)
		return
	}
	p.onFault.Store(&fn)
}

// Down takes the proxy off the network, as a network that drops does:
// every open client connection is reset, and new ones are refused (its
// port no longer listens) until Up. Requests being forwarded are cut.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l == nil {
		return
	}
	_ = p.l.Close()
	p.l = nil
	for c := range p.conns {
		resetConn(c)
	}
	clear(p.conns)
}

// Up puts the proxy back on the network after Down: it listens on the
// same address again.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		return nil
	}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("faults: listen again on %s: %w", p.addr, err)
	}
	p.l = l
	go func() { _ = p.srv.Serve(l) }()
	return nil
}

// track keeps the open client connections, for Down. One accepted as the
// proxy went down is reset at once.
func (p *Proxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		if p.l == nil {
			resetConn(c)
			return
		}
		p.conns[c] = struct{}{}
	case http.StateHijacked, http.StateClosed:
		delete(p.conns, c)
	}
}

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
	for k := DropRequest; k <= lastKind; k++ {
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
	fault := Fault{Op: op, Request: r, Kind: k}
	if fn := p.onFault.Load(); fn != nil && k != None {
		defer func() { (*fn)(fault) }()
	}
	switch k {
	case DropRequest:
		hangUp(w)
	case DropResponse:
		lost := &discard{header: http.Header{}}
		p.rp.ServeHTTP(lost, r)
		fault.Status, fault.Body = lost.status, lost.body
		hangUp(w)
	case Reset:
		if !hijackReset(w) {
			panic(http.ErrAbortHandler)
		}
	case DropMidBody:
		// The target gets the first half, then a body that fails, so its
		// request is cut; the client gets a reset.
		r.Body = &cutBody{ReadCloser: r.Body, left: max(r.ContentLength/2, 0)}
		p.rp.ServeHTTP(&discard{header: http.Header{}}, r)
		if !hijackReset(w) {
			panic(http.ErrAbortHandler)
		}
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

// hijackReset resets the client's connection (a TCP RST, not a close),
// unread request bytes and all; false if it cannot take the connection.
func hijackReset(w http.ResponseWriter) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return false
	}
	resetConn(conn)
	return true
}

// resetConn closes c with a TCP reset: linger 0.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// cutBody gives the first left bytes of a request body, then fails.
type cutBody struct {
	io.ReadCloser
	left int64
}

var errCut = errors.New("faults: the request body was cut half-way")

func (c *cutBody) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	n, err := c.ReadCloser.Read(b[:min(int64(len(b)), c.left)])
	c.left -= int64(n)
	return n, err
}

// discard is a ResponseWriter that keeps the status and up to
// maxLostBody bytes of the answer it is given.
type discard struct {
	header http.Header
	status int
	body   []byte
}

const maxLostBody = 1 << 20

func (d *discard) Header() http.Header { return d.header }
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	d.body = append(d.body, b[:min(len(b), maxLostBody-len(d.body))]...)
	return len(b), nil
}
func (d *discard) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}
