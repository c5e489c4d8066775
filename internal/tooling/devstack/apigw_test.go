package devstack

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func routes() []Route {
	return []Route{
		{Method: "GET", Path: "/uploads/{uploadId}", Function: "PresignFunction"},
		{Method: "POST", Path: "/uploads", Function: "PresignFunction"},
	}
}

func TestMatchRoute(t *testing.T) {
	cases := []struct {
		method, path string
		key          string
		params       map[string]string
	}{
		{"POST", "/uploads", "POST /uploads", nil},
		{"GET", "/uploads/abc", "GET /uploads/{uploadId}", map[string]string{"uploadId": "abc"}},
		{"GET", "/uploads", "", nil},
		{"GET", "/uploads/", "", nil},
		{"DELETE", "/uploads/abc", "", nil},
		{"GET", "/uploads/a/b", "", nil},
	}
	for _, tc := range cases {
		r, params, ok := matchRoute(routes(), tc.method, tc.path)
		if ok != (tc.key != "") || ok && (r.Key() != tc.key || !equalMaps(params, tc.params)) {
			t.Errorf("%s %s = %v %v %v; want %q %v", tc.method, tc.path, r.Key(), params, ok, tc.key, tc.params)
		}
	}
}

// Every route of the template matches its path exactly, as API Gateway
// HTTP APIs do: a trailing slash, a doubled slash or an empty id is no
// route (the front door once trimmed slashes, so that "GET /uploads/{id}/"
// answered the upload, which AWS never does).
func TestMatchRouteIsExact(t *testing.T) {
	spec, err := LoadSpec(filepath.Join("..", "..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "0123abcd"
	for _, r := range spec.Routes {
		path := strings.ReplaceAll(r.Path, "{uploadId}", id)
		got, params, ok := matchRoute(spec.Routes, r.Method, path)
		if !ok || got.Key() != r.Key() || strings.Contains(r.Path, "{") && params["uploadId"] != id {
			t.Errorf("%s %s = %q %v %v; want %q", r.Method, path, got.Key(), params, ok, r.Key())
		}
		wrong := []string{
			path + "/",                    // trailing slash
			path + "//",                   // two trailing slashes
			"/" + path,                    // leading slash doubled
			strings.TrimPrefix(path, "/"), // no leading slash
		}
		if strings.Contains(r.Path, "{uploadId}") {
			wrong = append(wrong,
				strings.Replace(path, "/"+id, "//"+id, 1),    // a slash doubled inside
				strings.ReplaceAll(r.Path, "{uploadId}", ""), // an empty id
			)
		}
		for _, p := range wrong {
			if got, _, ok := matchRoute(spec.Routes, r.Method, p); ok {
				t.Errorf("%s %q matched %q; want no route", r.Method, p, got.Key())
			}
		}
	}
	if len(spec.Routes) != 6 {
		t.Errorf("the template has %d routes, want the contract's 6", len(spec.Routes))
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func jwt(claims string) string {
	enc := func(s string) string { return strings.TrimRight(b64url(s), "=") }
	return "Bearer " + enc(`{"alg":"none"}`) + "." + enc(claims) + ".sig"
}

// The event the front door builds for a request, compared with a golden
// file and, for its shape, with AWS's documented payload format 2.0 (the
// sample event in events/, written from AWS's documentation).
func TestBuildEvent(t *testing.T) {
	body := `{"filename":"photo.jpg","contentType":"image/jpeg","size":48213,"sha256":"` + strings.Repeat("a", 64) + `"}`
	r := httptest.NewRequest("POST", "http://127.0.0.1:3000/uploads?x=1&x=2&y=3", strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:54321"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "3f0c9d1e-6b0a-4c43-9a55-1b9f1f1e2a77")
	r.Header.Add("Accept", "application/json")
	r.Header.Add("Accept", "text/plain")
	r.Header.Set("User-Agent", "curl/8.0")
	r.Header.Set("Cookie", "a=1; b=2")
	auth := jwt(`{"sub":"user-123","iss":"https://issuer.example","exp":1764444600,"scope":["a","b"]}`)
	r.Header.Set("Authorization", auth)
	claims, err := jwtClaims(auth)
	if err != nil {
		t.Fatal(err)
	}
	route, params, _ := matchRoute(routes(), "POST", "/uploads")
	ev := buildEvent(r, route, params, claims, []byte(body), time.Date(2026, 11, 29, 18, 30, 0, 0, time.UTC), "REQ1")
	raw, err := eventJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	var sent any
	_ = json.Unmarshal(raw, &sent)
	goldenJSON(t, "apigw-v2-post.json", sent)

	if ev.Headers["accept"] != "application/json,text/plain" || ev.QueryStringParameters["x"] != "1,2" ||
		!slices.Equal(ev.Cookies, []string{"a=1", "b=2"}) || ev.Headers["cookie"] != "" || ev.IsBase64Encoded {
		t.Errorf("headers %v query %v cookies %v base64 %v", ev.Headers, ev.QueryStringParameters, ev.Cookies, ev.IsBase64Encoded)
	}
	if ev.RequestContext.Authorizer.JWT.Claims["sub"] != "user-123" || ev.RequestContext.Authorizer.JWT.Claims["exp"] != "1764444600" {
		t.Errorf("claims = %v", ev.RequestContext.Authorizer.JWT.Claims)
	}

	// Every field AWS documents is present, and none AWS does not send.
	ours, aws := jsonPaths(t, sent), jsonPaths(t, nil)
	for _, p := range aws {
		if !slices.Contains(ours, p) && !strings.HasPrefix(p, "headers.") && !strings.HasPrefix(p, "requestContext.authorizer.jwt.claims.") {
			t.Errorf("AWS sends %s; the front door does not", p)
		}
	}
	for _, p := range ours {
		if !slices.Contains(aws, p) && !strings.HasPrefix(p, "headers.") && !strings.HasPrefix(p, "requestContext.authorizer.jwt.claims.") &&
			!strings.HasPrefix(p, "queryStringParameters") && p != "cookies" {
			t.Errorf("the front door sends %s; AWS's example has no such field", p)
		}
	}
}

// jsonPaths lists the dotted paths of v's JSON object fields; v == nil
// reads the sample event.
func jsonPaths(t *testing.T, v any) []string {
	t.Helper()
	var raw []byte
	var err error
	if v == nil {
		raw, err = os.ReadFile(filepath.Join("..", "..", "..", "events", "presign-create.json"))
	} else {
		raw, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out = append(out, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	sort.Strings(out)
	return out
}

func TestBinaryBodiesAreBase64(t *testing.T) {
	r := httptest.NewRequest("POST", "http://127.0.0.1:3000/uploads", strings.NewReader("\x00\x01"))
	r.Header.Set("Content-Type", "application/octet-stream")
	route, _, _ := matchRoute(routes(), "POST", "/uploads")
	ev := buildEvent(r, route, nil, nil, []byte("\x00\x01"), time.Now(), "REQ")
	if !ev.IsBase64Encoded || ev.Body != "AAE=" {
		t.Errorf("binary body = %q base64=%v", ev.Body, ev.IsBase64Encoded)
	}
}

func TestJWTClaims(t *testing.T) {
	if c, err := jwtClaims(""); err != nil || c["sub"] != LocalTenant {
		t.Errorf("no token = %v, %v; want tenant local", c, err)
	}
	for _, bad := range []string{"Basic abc", "Bearer x.y", "Bearer a.!!!.c", jwt(`{"name":"no sub"}`), jwt(`not json`)} {
		if _, err := jwtClaims(bad); err == nil {
			t.Errorf("jwtClaims(%q) accepted", bad)
		}
	}
}

func TestCORS(t *testing.T) {
	api := APISpec{AllowHeaders: []string{"Idempotency-Key", "Content-Type", "Authorization"}, ExposeHeaders: []string{"Idempotent-Replay", "Retry-After", "Location"}, AllowMethods: []string{"GET", "POST", "OPTIONS"}, MaxAge: 600}
	preflight := func(origin, method, headers string, origins []string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("OPTIONS", "http://127.0.0.1/uploads", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", method)
		r.Header.Set("Access-Control-Request-Headers", headers)
		w := httptest.NewRecorder()
		if !api.cors(w, r, origins) {
			t.Fatal("preflight not answered")
		}
		return w
	}
	ok := preflight("http://app.test", "POST", "idempotency-key,content-type", []string{"*"})
	if ok.Code != 204 || ok.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(ok.Header().Get("Access-Control-Allow-Headers"), "idempotency-key") {
		t.Errorf("allowed preflight: %d %v", ok.Code, ok.Header())
	}
	for name, w := range map[string]*httptest.ResponseRecorder{
		"other origin": preflight("http://evil.test", "POST", "content-type", []string{"http://app.test"}),
		"bad method":   preflight("http://app.test", "DELETE", "", []string{"*"}),
		"bad header":   preflight("http://app.test", "POST", "x-secret", []string{"*"}),
	} {
		if w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: preflight allowed: %v", name, w.Header())
		}
	}
	r := httptest.NewRequest("POST", "http://127.0.0.1/uploads", nil)
	r.Header.Set("Origin", "http://app.test")
	w := httptest.NewRecorder()
	if api.cors(w, r, []string{"http://app.test"}) {
		t.Fatal("a POST treated as a preflight")
	}
	if w.Header().Get("Access-Control-Allow-Origin") != "http://app.test" || w.Header().Get("Access-Control-Expose-Headers") != "idempotent-replay,retry-after,location" {
		t.Errorf("actual request CORS headers: %v", w.Header())
	}
}

func b64url(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
