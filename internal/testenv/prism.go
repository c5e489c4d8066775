package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/services"
)

// Proxy is a running OpenAPI validating proxy (Stoplight Prism) in front of
// an upstream API: every request and response that passes through it is
// checked against the OpenAPI document it was started with.
type Proxy struct {
	// URL is where clients send their requests: http://127.0.0.1:PORT.
	URL string
	log string
}

// ProxyOptions tune [ValidatingProxy].
type ProxyOptions struct {
	// SkipRequestValidation forwards requests the document forbids instead
	// of answering them with Prism's 422, for tests whose point is the
	// server's answer to such a request. Responses are always validated.
	// Defaults to false: requests are validated too.
	SkipRequestValidation bool
}

// ValidatingProxy starts Prism in proxy mode for spec (a file) in front of
// upstream, on a free port of 127.0.0.1, and stops it when t ends. Prism
// runs with --errors: a response that violates the document is replaced by
// Prism's 500 problem document, a request that violates it by a 422, and
// lesser violations are listed in an sl-violations header; [Violations]
// reports all three. Without Prism installed t is skipped, or fails under
// REQUIRE_INTEGRATION=1.
func ValidatingProxy(t testing.TB, spec, upstream string, opts ProxyOptions) *Proxy {
	t.Helper()
	bin, err := services.Binary("prism")
	need(t, err)
	port, err := services.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	spec, err = filepath.Abs(spec)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "prism.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "proxy", spec, upstream,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--errors", "--cors=false", "--validate-request="+strconv.FormatBool(!opts.SkipRequestValidation))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start prism: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	p := &Proxy{URL: "http://127.0.0.1:" + strconv.Itoa(port), log: logPath}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	// Prism listens only once it has loaded and checked the document.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			conn.Close()
			return p
		}
		select {
		case <-done:
			t.Fatalf("prism exited during start-up:\n%s", p.Log())
		case <-ctx.Done():
			t.Fatalf("prism not listening after 60 s:\n%s", p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Log is what Prism has printed so far: one line per request, with every
// violation it found.
func (p *Proxy) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Violations describes what Prism found wrong with the exchange that
// produced resp and body, or returns "" when it found nothing: Prism's own
// problem documents (a request it refused, a response it replaced) and any
// sl-violations header.
func Violations(resp *http.Response, body []byte) string {
	var found []string
	if v := resp.Header.Get("sl-violations"); v != "" {
		found = append(found, "sl-violations: "+v)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") &&
		bytes.Contains(body, []byte("stoplight.io/prism/errors#")) {
		found = append(found, fmt.Sprintf("prism answered %d: %s", resp.StatusCode, body))
	}
	return strings.Join(found, "\n")
}
