package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// netProxy is the browser's HTTP proxy (Chromium's --proxy-server, loopback
// included): every request the page makes, to the API and to S3, goes
// through it. It records each request with the bytes of its body that went
// through, can lose the answer to one chosen request, and can cut the
// network: close every connection at once and refuse new ones (its port
// closed) for a while, as a phone handing off from Wi-Fi to LTE does.
//
// The scenario script marks moments (a reload) with GET /__mark, sent to
// the proxy itself, so that the test can count what was sent after them.
//
// A fault (see fault) strikes one chosen request at a chosen moment and
// then takes the network down; the outage matrix arms one per cell with
// GET /__arm?cell=NAME and reads what happened with GET /__state.
type netProxy struct {
	t    *testing.T
	addr string
	srv  *http.Server
	out  *http.Transport

	// loseAnswer, if set, picks requests whose upstream answer the browser
	// never gets: its connection is closed instead.
	loseAnswer func(r *http.Request) bool
	// cutAt, if set, gives for a request the body offset at which to cut
	// the network, or -1. The first cut only.
	cutAt  func(r *http.Request) int64
	cutFor time.Duration

	// faults are the faults /__arm may arm, by cell name.
	faults map[string]fault

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	log    []proxied
	marks  int
	cuts   []cut
	closed bool
	// The cell armed (by /__arm), its fault, and what became of it.
	cell  string
	armed *fault
	state faultState
	// refuse is how many more requests the outage refuses before the network is back.
	refuse int
	// counted, if set, picks the refused requests that count toward refuse.
	counted *regexp.Regexp
	// done is closed when the proxy closes: a held request lets go.
	done chan struct{}
}

// moment is when a fault strikes the request it matches.
type moment string

const (
	// lostRequest: the request is dropped before it is forwarded (the server never sees it).
	lostRequest moment = "request lost"
	// lostAnswer: forwarded whole, the server acts, and its answer is dropped.
	lostAnswer moment = "answer lost"
	// midBody: a PUT whose connection drops once half its body was forwarded.
	midBody moment = "cut mid-body"
	// answered: the answer is passed on whole, and the network goes the
	// instant it has: every other connection reset, new ones refused.
	answered moment = "after the answer"
	// held: not forwarded, and held until the browser gives up on it (a
	// reload, which the scenario makes once /__state says it is held).
	held moment = "held"
)

// fault strikes the first request that matches it, at its moment, and then
// takes the network down: every open connection reset at once, and new
// requests refused (reset as they arrive) until Refuse of them were (an
// event, not a timer: however long the client's backoff), or, with For,
// the port closed for that long. A held request takes nothing down.
type fault struct {
	// Match is matched against "METHOD path?query" (the query as sent).
	Match  *regexp.Regexp
	Moment moment
	Refuse int
	// Counted, if set, picks the refused requests that count toward
	// Refuse ("METHOD path?query"); the others are refused all the same.
	Counted *regexp.Regexp
	For     time.Duration
}

// faultState is what became of the armed fault, as /__state reports it.
type faultState struct {
	Cell string `json:"cell"`
	// Fired: the fault struck (a held request: it is being held, or was).
	Fired bool `json:"fired"`
	// Held: a held request is being held now.
	Held bool `json:"held"`
	// Refused: requests refused since it struck (those the fault counts);
	// Healed: the network is back.
	Refused int  `json:"refused"`
	Healed  bool `json:"healed"`
	// Reset: connections open when it struck, reset.
	Reset int `json:"reset"`
	// Request is the request it struck.
	Request string `json:"request"`
}

// proxied is one request as the proxy saw it.
type proxied struct {
	Method, Host, Path string
	// Req is "METHOD path?query", what a fault's Match is matched against.
	Req string
	// PartNumber is the query's partNumber (a multipart part PUT), or 0.
	PartNumber int
	// Bytes of the request body that went through the proxy.
	Bytes int64
	// Status is the upstream's answer (0: none).
	Status int
	// Lost: the upstream answered, the browser got a closed connection.
	Lost bool
	// Mark is how many marks came before the request started.
	Mark int
	// Err is why it did not complete, if it did not.
	Err string
	// Start is when the request arrived, End when its answer was passed
	// on (or it failed).
	Start, End time.Time
	// Body is a POST's body (the API's JSON), when at most maxLoggedBody.
	Body string
	// Answer is the API's JSON answer (lost or passed on), when small.
	Answer string
	// Cell is the cell armed when the request came (the outage matrix).
	Cell string
	// Fault is the moment of the fault that struck this request, if one did.
	Fault moment
	// Refused: the request came during an outage and was reset unanswered.
	Refused bool
}

// maxLoggedAnswer is the largest API answer the log keeps.
const maxLoggedAnswer = 64 << 10

// connKey carries a request's connection in its context, so that a fault
// can reset every connection but the one whose answer must pass.
type connKey struct{}

// maxLoggedBody is the largest POST body the log keeps: a complete that
// declares 10,000 parts takes about 1 MB.
const maxLoggedBody = 2 << 20

type cut struct {
	At, Until time.Time
	// Closed is how many connections were open and closed.
	Closed int
}

func newNetProxy(t *testing.T) *netProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &netProxy{t: t, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}, cutFor: 4 * time.Second, faults: map[string]fault{}, done: make(chan struct{})}
	// Never through a proxy of the environment; a fresh upstream connection per request, so that a cut leaves nothing behind.
	p.out = &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}
	p.srv = &http.Server{Handler: p, ConnState: p.track, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }}
	go p.serve(ln)
	t.Cleanup(p.close)
	return p
}

func (p *netProxy) URL() string { return "http://" + p.addr }

func (p *netProxy) serve(ln net.Listener) {
	_ = p.srv.Serve(ln)
}

func (p *netProxy) close() {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
	p.out.CloseIdleConnections()
}

func (p *netProxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// cutNetwork closes every connection and the port, and opens the port again
// after cutFor. Requests under way fail on both sides.
func (p *netProxy) cutNetwork() {
	p.cutNetworkFor(p.cutFor, nil)
}

// cutNetworkFor closes every connection but except, and the port, and
// opens the port again after d.
func (p *netProxy) cutNetworkFor(d time.Duration, except net.Conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	p.cuts = append(p.cuts, cut{At: now, Until: now.Add(d), Closed: len(p.conns)})
	_ = p.ln.Close()
	p.resetLocked(except)
	p.mu.Unlock()
	p.t.Logf("proxy: network cut for %s", d)
	time.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return
		}
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.t.Errorf("proxy: cannot listen again on %s: %v", p.addr, err)
			return
		}
		p.ln = ln
		p.state.Healed = true
		go p.serve(ln)
	})
}

// resetLocked resets every open connection but except, and returns how
// many it reset. p.mu is held.
func (p *netProxy) resetLocked(except net.Conn) int {
	n := 0
	for c := range p.conns {
		if c != except {
			reset(c)
			n++
		}
	}
	return n
}

// reset closes c with a TCP reset (no FIN): a connection the network dropped.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// strike takes the network down for the armed fault f, which struck the
// request of log entry `entry`: every connection reset but except (an
// answer that must pass), then either the port closed for f.For, or the
// next f.Refuse requests refused.
func (p *netProxy) strike(f *fault, entry int, except net.Conn) {
	p.mu.Lock()
	p.log[entry].Fault = f.Moment
	if f.For > 0 {
		p.state.Reset = len(p.conns)
		p.mu.Unlock()
		p.cutNetworkFor(f.For, except)
		return
	}
	p.state.Reset = p.resetLocked(except)
	p.refuse, p.counted = f.Refuse, f.Counted
	p.state.Healed = f.Refuse == 0
	st := p.state
	p.mu.Unlock()
	p.t.Logf("proxy: %s: %s %s, %d connections reset; refusing the next %d requests", st.Cell, f.Moment, st.Request, st.Reset, f.Refuse)
}

// refusedLocked says whether a request comes during an outage, and if so
// marks its log entry and counts it (if the fault counts requests of its
// kind), healing the network after the last one.
func (p *netProxy) refusedLocked(entry int) bool {
	if p.refuse == 0 {
		return false
	}
	p.log[entry].Refused = true
	if p.counted != nil && !p.counted.MatchString(p.log[entry].Req) {
		return true
	}
	p.refuse--
	p.state.Refused++
	p.state.Healed = p.refuse == 0
	return true
}

// control serves the requests addressed to the proxy itself: /__mark, and
// the outage matrix's /__arm?cell=NAME and /__state.
func (p *netProxy) control(w http.ResponseWriter, r *http.Request) {
	// Never kept alive: an outage resets connections, and the driver's must not be among them.
	w.Header().Set("Connection", "close")
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.URL.Path {
	case "/__mark":
		p.marks++
		w.WriteHeader(http.StatusNoContent)
	case "/__arm":
		name := r.URL.Query().Get("cell")
		f, ok := p.faults[name]
		if !ok && name != "" {
			http.Error(w, "no such cell: "+name, http.StatusNotFound)
			return
		}
		p.cell, p.armed, p.refuse, p.counted = name, nil, 0, nil
		p.state = faultState{Cell: name}
		if ok {
			p.armed = &f
		}
		w.WriteHeader(http.StatusNoContent)
	case "/__state":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.state)
	default:
		http.NotFound(w, r)
	}
}

// countingBody counts what the upstream read of a request body, and cuts
// the network when it passes an offset.
type countingBody struct {
	io.ReadCloser
	p     *netProxy
	entry int
	cutAt int64
	// onCut, if set, cuts instead of cutNetwork (a fault's outage).
	onCut func()
	n     int64
}

func (b *countingBody) Read(buf []byte) (int, error) {
	if b.cutAt >= 0 && b.n+int64(len(buf)) > b.cutAt {
		buf = buf[:max(0, b.cutAt-b.n)]
		if len(buf) == 0 {
			b.cutAt = -1
			if b.onCut != nil {
				b.onCut()
			} else {
				b.p.cutNetwork()
			}
			return 0, errors.New("network cut")
		}
	}
	n, err := b.ReadCloser.Read(buf)
	b.n += int64(n)
	b.p.mu.Lock()
	b.p.log[b.entry].Bytes = b.n
	b.p.mu.Unlock()
	return n, err
}

func (p *netProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "" {
		// Addressed to the proxy itself.
		p.control(w, r)
		return
	}
	part, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
	var body []byte
	if r.Method == http.MethodPost && r.ContentLength > 0 && r.ContentLength <= maxLoggedBody {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	p.mu.Lock()
	entry := len(p.log)
	req := r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery
	p.log = append(p.log, proxied{Method: r.Method, Host: r.URL.Host, Path: r.URL.Path, Req: req, PartNumber: part, Mark: p.marks, Start: time.Now(), Body: string(body), Cell: p.cell})
	defer func() {
		p.mu.Lock()
		p.log[entry].End = time.Now()
		p.mu.Unlock()
	}()
	// A CONNECT (Chromium's own, to https services) is no request of the page's: never refused, never struck.
	if r.Method != http.MethodConnect && p.refusedLocked(entry) {
		p.mu.Unlock()
		if conn != nil {
			reset(conn)
		} else {
			hangUp(w)
		}
		return
	}
	// The armed fault, if this is the request it strikes.
	var f *fault
	if p.armed != nil && !p.state.Fired && r.Method != http.MethodConnect && p.armed.Match.MatchString(req) {
		f = p.armed
		p.state.Fired = true
		p.state.Request = r.Method + " " + r.URL.Path
	}
	cutAt := int64(-1)
	if p.cutAt != nil && len(p.cuts) == 0 {
		cutAt = p.cutAt(r)
	}
	lose := p.loseAnswer != nil && p.loseAnswer(r)
	p.mu.Unlock()

	var onCut func()
	if f != nil {
		switch f.Moment {
		case lostRequest:
			p.strike(f, entry, nil)
			hangUp(w)
			return
		case held:
			p.hold(r, entry)
			hangUp(w)
			return
		case lostAnswer:
			lose = true
		case midBody:
			cutAt = r.ContentLength / 2
			onCut = func() { p.strike(f, entry, nil) }
		}
	}

	out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.Body != nil && r.ContentLength != 0 {
		out.Body = &countingBody{ReadCloser: r.Body, p: p, entry: entry, cutAt: cutAt, onCut: onCut}
		out.ContentLength = r.ContentLength
	}
	out.Header = r.Header.Clone()
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	resp, err := p.out.RoundTrip(out)
	if err != nil {
		p.setErr(entry, err)
		// The browser sees its connection closed, as a network failure looks.
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	// The API's JSON answers are kept (small ones), lost or not.
	answer := &keptBytes{max: maxLoggedAnswer}
	src := io.Reader(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		src = io.TeeReader(resp.Body, answer)
	}
	p.mu.Lock()
	p.log[entry].Status = resp.StatusCode
	p.log[entry].Lost = lose
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if !answer.over {
			p.log[entry].Answer = answer.String()
		}
		p.mu.Unlock()
	}()
	if lose {
		_, _ = io.Copy(io.Discard, src)
		if f != nil {
			p.strike(f, entry, nil)
		}
		hangUp(w)
		return
	}
	writeAnswerHead(w, resp)
	if _, err := io.Copy(w, src); err != nil {
		p.setErr(entry, err)
	}
	if f != nil && f.Moment == answered {
		// Passed on whole: the network goes now, this answer's connection
		// excepted (its bytes are on the way; the server closes it).
		_ = http.NewResponseController(w).Flush()
		p.strike(f, entry, conn)
	}
}

// keptBytes keeps what is written to it, unless that is over max bytes.
type keptBytes struct {
	bytes.Buffer
	max  int
	over bool
}

func (k *keptBytes) Write(b []byte) (int, error) {
	if !k.over && k.Len()+len(b) <= k.max {
		k.Buffer.Write(b)
	} else {
		k.over = true
		k.Reset()
	}
	return len(b), nil
}

// hold keeps r unanswered and unforwarded until the browser gives up on it
// (the page reloads) or the proxy closes. Its body is read (and dropped)
// first: net/http notices the client leave (r's context done) only once
// the handler has read the body, and ServeHTTP reads only a POST's.
func (p *netProxy) hold(r *http.Request, entry int) {
	p.mu.Lock()
	p.state.Held = true
	p.log[entry].Fault = held
	cell := p.cell
	p.mu.Unlock()
	p.t.Logf("proxy: %s: holding %s %s", cell, r.Method, r.URL.Path)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	give := time.NewTimer(2 * time.Minute)
	defer give.Stop()
	select {
	case <-r.Context().Done():
	case <-p.done:
	case <-give.C:
		p.t.Errorf("proxy: %s: %s %s held for 2 minutes: the browser never gave up on it", cell, r.Method, r.URL.Path)
	}
	p.mu.Lock()
	p.state.Held = false
	p.mu.Unlock()
}

func (p *netProxy) setErr(entry int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log[entry].Err = err.Error()
}

func (p *netProxy) seen() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.log...)
}

func (p *netProxy) cutsMade() []cut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cut(nil), p.cuts...)
}

// isPart says whether r is a part PUT to S3 (presigned, with a partNumber).
func isPart(r *http.Request, n int) bool {
	q := r.URL.Query()
	return r.Method == http.MethodPut && q.Get("partNumber") == strconv.Itoa(n) && q.Get("uploadId") != ""
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
