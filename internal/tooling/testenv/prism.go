package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/services"
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
	SkipShort(t)
	_, err := services.Binary("prism")
	need(t, err)
	spec, err = filepath.Abs(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A free port can be taken by another process before Prism binds it;
	// then Prism exits, and another port is tried.
	for attempt := 1; ; attempt++ {
		logPath := filepath.Join(t.TempDir(), "prism.log")
		p, err := services.StartPrism(context.Background(), services.PrismOptions{
			Options: services.Options{LogPath: logPath}, Spec: spec, Upstream: upstream,
			ValidateRequests: !opts.SkipRequestValidation,
		})
		if err == nil {
			t.Cleanup(func() { _ = p.Stop() })
			return &Proxy{URL: p.Endpoint, log: logPath}
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err)
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
