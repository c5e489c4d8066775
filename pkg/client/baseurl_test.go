package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The table both clients read (the browser's normalizeBaseUrl too): one
// answer for each spelling, whichever client is asked.
func TestNormalizeBaseURLSharedTable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "api", "testdata", "base-urls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []struct {
			In      string `json:"in"`
			Want    string `json:"want"`
			Refused bool   `json:"refused"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &table); err != nil || len(table.Cases) == 0 {
		t.Fatalf("base-urls.json: %d cases, %v", len(table.Cases), err)
	}
	for _, tc := range table.Cases {
		got, err := NormalizeBaseURL(tc.In)
		switch {
		case tc.Refused && err == nil:
			t.Errorf("NormalizeBaseURL(%q) = %q; want it refused", tc.In, got)
		case !tc.Refused && (got != tc.Want || err != nil):
			t.Errorf("NormalizeBaseURL(%q) = %q, %v; want %q", tc.In, got, err, tc.Want)
		}
	}
}

// Go's own cases: what the shared table leaves out (percent-escapes, IPv6
// zones, ports written oddly).
func TestNormalizeBaseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		// One API, however it is spelled.
		{"http://127.0.0.1:3000", "http://127.0.0.1:3000"},
		{"http://127.0.0.1:3000/", "http://127.0.0.1:3000"},
		{"http://127.0.0.1:3000//", "http://127.0.0.1:3000"},
		{"HTTP://127.0.0.1:3000//", "http://127.0.0.1:3000"},
		{"http://127.0.0.1:80/", "http://127.0.0.1"},
		{"http://127.0.0.1:/", "http://127.0.0.1"},
		{"http://127.0.0.1:03000", "http://127.0.0.1:3000"},
		{"https://API.Example.COM:443//v1//prod/", "https://api.example.com/v1/prod"},
		{"HttpS://abc123.execute-api.eu-west-1.amazonaws.com", "https://abc123.execute-api.eu-west-1.amazonaws.com"},
		// Not a default port for its scheme: kept.
		{"https://api.example.com:80", "https://api.example.com:80"},
		{"http://api.example.com:443", "http://api.example.com:443"},
		// Another host name is another API.
		{"http://LOCALHOST:3000/", "http://localhost:3000"},
		// Percent-escapes are kept as written; a slash escaped is no slash.
		{"http://h/a%2F%2Fb/", "http://h/a%2F%2Fb"},
		{"http://h/%7euser//x", "http://h/%7euser/x"},
		{"http://h/a|b", "http://h/a%7Cb"}, // never a raw '|' (the CLI's state ids split on it)
		// IPv6 literals.
		{"http://[::1]:3000/", "http://[::1]:3000"},
		{"http://[FE80::1]:80", "http://[fe80::1]"},
		{"http://[fe80::1%25EN0]:3000", "http://[fe80::1%25EN0]:3000"},
	} {
		got, err := NormalizeBaseURL(tc.in)
		if got != tc.want || err != nil {
			t.Errorf("NormalizeBaseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		// Idempotent, and New's url.URL gives it back unchanged.
		if again, err := NormalizeBaseURL(got); again != got || err != nil {
			t.Errorf("NormalizeBaseURL(%q) = %q, %v; want it unchanged", got, again, err)
		}
		if u, err := url.Parse(got); err != nil || u.String() != got {
			t.Errorf("url.Parse(%q).String() = %q, %v; want it unchanged", got, u, err)
		}
	}
}

func TestNormalizeBaseURLRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, why string }{
		{"", "not an absolute URL"},
		{"127.0.0.1:3000", "not an absolute URL"},
		{"localhost:3000", "not an absolute URL"},
		{"/uploads", "not an absolute URL"},
		{"ftp://h", `scheme "ftp" is not http or https`},
		{"ws://127.0.0.1:3000", `scheme "ws" is not http or https`},
		{"http://", "no host"},
		{"http:///v1", "no host"},
		{"http://:3000", "no host"},
		{"http://user:secret@h", "user info"},
		{"http://h/?stage=prod", "a query"},
		{"http://h/?", "a query"},
		{"http://h/#top", "a fragment"},
		{"http://h/#", "a fragment"},
		{"http://h:99999", "port 99999 is out of range"},
		{"http://h:0", "port 0 is out of range"},
		{"http://h:x", "invalid port"},
		{"http://h/%zz", "invalid URL escape"},
		{"http://[::1", "missing ']'"},
		{"http://h/a b", `' ' at byte 10`},
		{"http://h/a\\b", `'\\' at byte 10`},
		{"http://h/\x7f", `'\x7f' at byte 9`},
	} {
		got, err := NormalizeBaseURL(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "want http(s)://host") {
			t.Errorf("NormalizeBaseURL(%q) = %q, %v; want an error saying %q and what is wanted", tc.in, got, err, tc.why)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("NormalizeBaseURL(%q): %v; want the password left out", tc.in, err)
		}
		if _, err := New(tc.in); err == nil {
			t.Errorf("New(%q) took it", tc.in)
		}
	}
}

// Every spelling of one base URL sends its requests to the same path, as
// the server routes them: never //uploads.
func TestNewSendsToTheNormalizedPath(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.RequestURI())
		mu.Unlock()
		w.WriteHeader(201)
		_, _ = w.Write([]byte(created))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, base := range []string{srv.URL + "/v1", srv.URL + "/v1/", srv.URL + "//v1//", "HTTP://" + host + "/v1//"} {
		c, _ := testClient(t, base)
		if _, err := c.Create(context.Background(), "key-0123456789abcdef", req); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
	}
	for i, p := range paths {
		if p != "/v1/uploads" {
			t.Errorf("request %d went to %q; want /v1/uploads", i, p)
		}
	}
}
