package web_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	log    []proxied
	marks  int
	cuts   []cut
	closed bool
}

// proxied is one request as the proxy saw it.
type proxied struct {
	Method, Host, Path string
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
}

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
	p := &netProxy{t: t, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}, cutFor: 4 * time.Second}
	// Never through a proxy of the environment; a fresh upstream connection per request, so that a cut leaves nothing behind.
	p.out = &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}
	p.srv = &http.Server{Handler: p, ConnState: p.track, ReadHeaderTimeout: 10 * time.Second}
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
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	p.cuts = append(p.cuts, cut{At: now, Until: now.Add(p.cutFor), Closed: len(p.conns)})
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.t.Logf("proxy: network cut for %s", p.cutFor)
	time.AfterFunc(p.cutFor, func() {
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
		go p.serve(ln)
	})
}

// countingBody counts what the upstream read of a request body, and cuts
// the network when it passes an offset.
type countingBody struct {
	io.ReadCloser
	p     *netProxy
	entry int
	cutAt int64
	n     int64
}

func (b *countingBody) Read(buf []byte) (int, error) {
	if b.cutAt >= 0 && b.n+int64(len(buf)) > b.cutAt {
		buf = buf[:max(0, b.cutAt-b.n)]
		if len(buf) == 0 {
			b.cutAt = -1
			b.p.cutNetwork()
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
		if r.URL.Path == "/__mark" {
			p.mu.Lock()
			p.marks++
			p.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.NotFound(w, r)
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
	p.mu.Lock()
	entry := len(p.log)
	p.log = append(p.log, proxied{Method: r.Method, Host: r.URL.Host, Path: r.URL.Path, PartNumber: part, Mark: p.marks, Start: time.Now(), Body: string(body)})
	defer func() {
		p.mu.Lock()
		p.log[entry].End = time.Now()
		p.mu.Unlock()
	}()
	cutAt := int64(-1)
	if p.cutAt != nil && len(p.cuts) == 0 {
		cutAt = p.cutAt(r)
	}
	lose := p.loseAnswer != nil && p.loseAnswer(r)
	p.mu.Unlock()

	out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.Body != nil && r.ContentLength != 0 {
		out.Body = &countingBody{ReadCloser: r.Body, p: p, entry: entry, cutAt: cutAt}
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
	p.mu.Lock()
	p.log[entry].Status = resp.StatusCode
	p.log[entry].Lost = lose
	p.mu.Unlock()
	if lose {
		_, _ = io.Copy(io.Discard, resp.Body)
		hangUp(w)
		return
	}
	writeAnswerHead(w, resp)
	if _, err := io.Copy(w, resp.Body); err != nil {
		p.setErr(entry, err)
	}
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
