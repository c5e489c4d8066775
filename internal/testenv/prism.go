package testenv

import (
	"bytes"
	"fmt"
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
	spec, err = filepath.Abs(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A free port can be taken by another process before Prism binds it;
	// then Prism exits, and another port is tried.
	for attempt := 1; ; attempt++ {
		p, err := startPrism(t, bin, spec, upstream, opts)
		if err == nil {
			return p
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err)
	}
}

func startPrism(t testing.TB, bin, spec, upstream string, opts ProxyOptions) (*Proxy, error) {
	port, err := services.FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(t.TempDir(), "prism.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "proxy", spec, upstream,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--errors", "--cors=false", "--validate-request="+strconv.FormatBool(!opts.SkipRequestValidation))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start prism: %w", err)
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
	// Prism says so once it has loaded the document and bound the port;
	// a successful dial alone could reach whoever else took the port.
	listening := "Prism is listening on " + p.URL
	deadline := time.After(60 * time.Second)
	for !strings.Contains(p.Log(), listening) {
		select {
		case <-done:
			return nil, fmt.Errorf("prism exited during start-up:\n%s", p.Log())
		case <-deadline:
			return nil, fmt.Errorf("prism not listening after 60 s:\n%s", p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return p, nil
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
