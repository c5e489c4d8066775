package faults_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/onceupload/onceupload/internal/faults"
)

// target is a server that answers "stored N" to a request whose body it
// read whole (N bytes), and tells got how many bytes each request brought
// and whether its body ended in an error.
type target struct {
	*httptest.Server
	got chan arrival
}

type arrival struct {
	n     int64
	whole bool
}

func startTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{got: make(chan arrival, 16)}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		tg.got <- arrival{n, err == nil}
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
		{faults.DropMidBody, &arrival{size / 2, false}, ""},
		{faults.DropResponse, &arrival{size, true}, "stored /k"},
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
				select {
				case a := <-tg.got:
					t.Errorf("the target got %+v; want nothing", a)
				default:
				}
			} else if a := <-tg.got; a != *tc.arrives {
				t.Errorf("the target got %d bytes, whole %v; want %+v", a.n, a.whole, *tc.arrives)
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
	// A connection held open across Down: its next request fails.
	keep := &http.Client{Transport: &http.Transport{}}
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
	p.Down()
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
