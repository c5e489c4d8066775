package faults_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/faults"
)

// target is a server that answers "stored N" to a request whose body it
// read whole (N bytes), and tells got how many bytes each request brought
// and whether its body ended in an error.
type target struct {
	*httptest.Server
	got chan arrival
}

type arrival struct {
	path  string
	n     int64
	whole bool
}

func startTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{got: make(chan arrival, 16)}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		tg.got <- arrival{r.URL.Path, n, err == nil}
		if err == nil {
			_, _ = io.WriteString(w, "stored "+r.URL.Path)
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

func startProxy(t *testing.T, to string) *faults.Proxy {
	t.Helper()
	p, err := faults.Start(to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// put sends size bytes to the proxy on a new connection.
func put(p *faults.Proxy, path string, size int) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPut, p.URL+path, bytes.NewReader(make([]byte, size)))
	return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
}

// Reset, DropMidBody and DropResponse: what the target gets, what the
// client sees, and what OnFault reports once each fault is over.
func TestProxyFaultsAtEachMoment(t *testing.T) {
	const size = 4 << 20 // more than the sockets' buffers hold
	for _, tc := range []struct {
		kind    faults.Kind
		arrives *arrival // nil: the target gets nothing
		lost    string   // the answer OnFault reports lost
	}{
		{faults.Reset, nil, ""},
		{faults.DropMidBody, &arrival{"/k", size / 2, false}, ""},
		{faults.DropResponse, &arrival{"/k", size, true}, "stored /k"},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			tg := startTarget(t)
			p := startProxy(t, tg.URL)
			p.SetRule(faults.Always(tc.kind, http.MethodPut))
			reported := make(chan faults.Fault, 1)
			p.OnFault(func(f faults.Fault) { reported <- f })
			resp, err := put(p, "/k", size)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("answered %d; want no answer", resp.StatusCode)
			}
			f := <-reported
			if f.Kind != tc.kind || f.Request.URL.Path != "/k" || string(f.Body) != tc.lost {
				t.Errorf("OnFault got %s of %s, lost answer %q; want %s of /k, %q", f.Kind, f.Request.URL.Path, f.Body, tc.kind, tc.lost)
			}
			if tc.arrives == nil {
				// The client saw the reset; a marker request (a GET, which
				// the rule lets through) goes after it: the first thing the
				// target gets must be the marker, not a late /k.
				resp, err := http.Get(p.URL + "/marker")
				if err != nil {
					t.Fatalf("the marker: %v", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if a := <-tg.got; a.path != "/marker" {
					t.Errorf("the target got %+v before the marker; want nothing of /k", a)
				}
			} else if a := <-tg.got; a != *tc.arrives {
				t.Errorf("the target got %s, %d bytes, whole %v; want %+v", a.path, a.n, a.whole, *tc.arrives)
			}
			if n := p.Count(tc.kind); n != 1 || p.Faults() != 1 {
				t.Errorf("counted %d %s, %d faults; want 1", n, tc.kind, p.Faults())
			}
		})
	}
}

// Down refuses connections, and resets those open; Up takes them again
// on the same address.
func TestProxyDownAndUp(t *testing.T) {
	tg := startTarget(t)
	p := startProxy(t, tg.URL)
	// A connection held open across Down is reset.
	keep := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(keep.Transport.(*http.Transport).CloseIdleConnections)
	get := func(c *http.Client) error {
		resp, err := c.Get(p.URL + "/k")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			<-tg.got
		}
		return err
	}
	if err := get(keep); err != nil {
		t.Fatal(err)
	}
	// A raw connection that had one request answered and stays open, as
	// a keep-alive one does: Down must reset it (the outage matrix relies
	// on it: a client's idle connection must not outlive the network).
	open, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := io.WriteString(open, "GET /open HTTP/1.1\r\nHost: proxy\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(open)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-tg.got
	p.Down()
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second)) // a failure, not a measure
	if n, err := br.ReadByte(); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the connection open across Down read %q, %v; want it reset (connection reset by peer)", n, err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err == nil {
		conn.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial while down: %v; want connection refused", err)
	}
	if err := get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}); err == nil {
		t.Error("a request while down was answered")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if err := get(keep); err != nil {
		t.Errorf("after Up: %v", err)
	}
}
