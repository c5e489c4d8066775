package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/pkg/api"

	"github.com/aws/aws-lambda-go/events"
)

// statusOf is the status of every error code of the contract's table (docs/api.md).
var statusOf = map[string]int{
	"idempotency_key_required": 400, "idempotency_key_invalid": 400, "invalid_request": 400,
	"unauthenticated": 401, "not_found": 404, "idempotency_in_progress": 409,
	"upload_not_pending": 409, "upload_completed": 409, "parts_missing": 409, "parts_mismatch": 409,
	"request_too_large": 413, "file_too_large": 413, "unsupported_media_type": 415,
	"idempotency_key_reuse": 422, "too_many_uploads": 429, "internal_error": 500, "service_unavailable": 503,
}

// goErrorText is text of Go or SDK errors that must never reach a client.
var goErrorText = []string{"json:", "strconv", "operation error", "%!", "invalid character", "unexpected end of JSON",
	"illegal base64", "mime:", "runtime error", "goroutine", "panic", "<nil>", "parse id", "upload id \"", "\x00"}

// checkResponse asserts what holds of every answer: JSON with its content
// type and a status of the table; an error body of exactly error and a
// message written for people, with no Go error text. It returns the code
// ("" for a success).
func checkResponse(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	if !json.Valid([]byte(resp.Body)) {
		t.Fatalf("body is not JSON: %q", resp.Body)
	}
	if resp.StatusCode == 200 || resp.StatusCode == 201 {
		return ""
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &fields); err != nil {
		t.Fatalf("error body is not an object: %s", resp.Body)
	}
	code, _ := fields["error"].(string)
	msg, _ := fields["message"].(string)
	if len(fields) != 2 || code == "" || msg == "" {
		t.Fatalf("error body %s: want exactly a non-empty error and message", resp.Body)
	}
	if want, ok := statusOf[code]; !ok || want != resp.StatusCode {
		t.Fatalf("status %d with error %q: not a row of the table", resp.StatusCode, code)
	}
	// The only client text a message may echo is an unknown field's name,
	// quoted; leave it out before looking for Go error text.
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if _, err := strconv.Unquote(strings.TrimSuffix(name, ".")); err != nil {
			t.Fatalf("message %q does not quote the field name", msg)
		}
		msg = "unknown field."
	}
	for _, leak := range goErrorText {
		if strings.Contains(msg, leak) {
			t.Fatalf("message %q leaks %q", msg, leak)
		}
	}
	if !strings.HasSuffix(msg, ".") || len(msg) > 300 {
		t.Fatalf("message %q is not one short sentence", msg)
	}
	for _, h := range []string{"Location", "Idempotent-Replay"} {
		if _, ok := resp.Headers[h]; ok {
			t.Fatalf("error %s carries %s", code, h)
		}
	}
	return code
}

// body is a create body with the given filename and contentType as raw
// JSON text (so tests can write escapes and invalid bytes).
func body(filenameJSON, contentTypeJSON string) string {
	return `{"filename":` + filenameJSON + `,"contentType":` + contentTypeJSON + `,"size":48213,"sha256":"` + digest + `"}`
}

// padTo pads a valid body with spaces to exactly n bytes.
func padTo(b string, n int) string { return b + strings.Repeat(" ", n-len(b)) }

func base64Post(key, raw string) events.APIGatewayV2HTTPRequest {
	req := post(key, base64.StdEncoding.EncodeToString([]byte(raw)))
	req.IsBase64Encoded = true
	return req
}

// Hostile input: each request gets a clear 4xx with its documented code,
// stores nothing and leaks nothing.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	withHeader := func(name, value string) events.APIGatewayV2HTTPRequest {
		req := post("", photo)
		req.Headers[name] = value
		return req
	}
	huge := strings.Repeat("k", 100<<10)
	nested := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	cases := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		code   string
		field  string // named in the message of an invalid_request
	}{
		// Idempotency-Key of every invalid shape.
		{"key empty", post("", photo), 400, "idempotency_key_required", ""},
		{"key blank", withHeader("idempotency-key", " \t "), 400, "idempotency_key_required", ""},
		{"key 15 chars", post(strings.Repeat("k", 15), photo), 400, "idempotency_key_invalid", ""},
		{"key 256 chars", post(strings.Repeat("k", 256), photo), 400, "idempotency_key_invalid", ""},
		{"key quoted 15 chars", post(`"`+strings.Repeat("k", 15)+`"`, photo), 400, "idempotency_key_invalid", ""},
		{"key quoted 256 chars", post(`"`+strings.Repeat("k", 256)+`"`, photo), 400, "idempotency_key_invalid", ""},
		{"key with space", post("abcdefgh ijklmnop", photo), 400, "idempotency_key_invalid", ""},
		{"two keys joined by a proxy", post("abcdefgh-ijklmnop,abcdefgh-ijklmnop", photo), 400, "idempotency_key_invalid", ""},
		{"key with tab", post("abcdefgh\tijklmnop", photo), 400, "idempotency_key_invalid", ""},
		{"key with DEL", post("abcdefghijklmnop\x7f", photo), 400, "idempotency_key_invalid", ""},
		{"key with NUL", post("abcdefgh\x00ijklmnop", photo), 400, "idempotency_key_invalid", ""},
		{"key with CR LF", post("abcdefghijklmnop\r\nX-Injected: 1", photo), 400, "idempotency_key_invalid", ""},
		{"key non-ASCII", post("clé-idempotente-0001", photo), 400, "idempotency_key_invalid", ""},
		{"key invalid UTF-8", post("abcdefghijklmnop\xff\xfe", photo), 400, "idempotency_key_invalid", ""},
		{"key quote inside quotes", post(`"abcdefgh"ijklmnop"`, photo), 400, "idempotency_key_invalid", ""},
		{"key backslash inside quotes", post(`"abcdefgh\ijklmnop"`, photo), 400, "idempotency_key_invalid", ""},
		{"key escaped quote inside quotes", post(`"abcdefgh\"ijklmnop"`, photo), 400, "idempotency_key_invalid", ""},
		{"key unterminated quote", post(`"abcdefghijklmnopq`, photo), 400, "idempotency_key_invalid", ""},
		{"key lone quote", post(`"`, photo), 400, "idempotency_key_invalid", ""},
		{"key empty quotes", post(`""`, photo), 400, "idempotency_key_invalid", ""},
		{"key quoted spaces", post(`"   abcdefghijklmnop   "`, photo), 400, "idempotency_key_invalid", ""},
		{"key 100 KB", post(huge, photo), 400, "idempotency_key_invalid", ""},
		{"key 100 KB quoted", post(`"`+huge+`"`, photo), 400, "idempotency_key_invalid", ""},
		{"key 100 KB mixed-case header", withHeader("Idempotency-Key", huge), 400, "idempotency_key_invalid", ""},

		// Oversized bodies: the limit counts raw (decoded) bytes.
		{"body 16 KiB + 1", post(key, padTo(photo, api.MaxBodyBytes+1)), 413, "request_too_large", ""},
		{"body 1 MiB", post(key, padTo(photo, 1<<20)), 413, "request_too_large", ""},
		{"base64 body decoding to 16 KiB + 1", base64Post(key, padTo(photo, api.MaxBodyBytes+1)), 413, "request_too_large", ""},
		{"base64 body decoding to 16 KiB + 2", base64Post(key, padTo(photo, api.MaxBodyBytes+2)), 413, "request_too_large", ""},
		{"base64 body decoding to 1 MiB", base64Post(key, padTo(photo, 1<<20)), 413, "request_too_large", ""},
		{"base64 body not base64", func() events.APIGatewayV2HTTPRequest {
			r := post(key, "{not base64!}")
			r.IsBase64Encoded = true
			return r
		}(), 400, "invalid_request", ""},

		// Deep nesting: refused by size or as not an object, never a crash.
		{"10,000 nested arrays", post(key, nested), 413, "request_too_large", ""},
		{"10,000 unclosed arrays", post(key, strings.Repeat("[", 10000)), 400, "invalid_request", ""},
		{"3,000 unclosed objects", post(key, strings.Repeat(`{"a":`, 3000)), 400, "invalid_request", ""},
		{"8,000 nested arrays within the limit", post(key, strings.Repeat("[", 8000)+strings.Repeat("]", 8000)), 400, "invalid_request", ""},
		{"nested filename", post(key, body(strings.Repeat("[", 5000)+strings.Repeat("]", 5000), `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"base64 10,000 unclosed arrays", base64Post(key, strings.Repeat("[", 10000)), 400, "invalid_request", ""},

		// Invalid UTF-8.
		{"invalid UTF-8 in filename", post(key, body("\"a\xffb.jpg\"", `"image/jpeg"`)), 400, "invalid_request", ""},
		{"overlong UTF-8 slash in filename", post(key, body("\"..\xc0\xafetc\"", `"image/jpeg"`)), 400, "invalid_request", ""},
		{"UTF-8 encoded surrogate", post(key, body("\"\xed\xa0\x80.jpg\"", `"image/jpeg"`)), 400, "invalid_request", ""},
		{"invalid UTF-8 outside strings", post(key, "\xef\xbb\xbf"+photo[:len(photo)-1]+"\xff}"), 400, "invalid_request", ""},
		{"base64 invalid UTF-8", base64Post(key, body("\"a\xffb.jpg\"", `"image/jpeg"`)), 400, "invalid_request", ""},

		// Filenames.
		{"filename ../", post(key, body(`"../x.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename ../../etc/passwd", post(key, body(`"../../etc/passwd"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename ..\\", post(key, body(`"..\\x.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename ..", post(key, body(`".."`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename .", post(key, body(`"."`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename absolute", post(key, body(`"/etc/passwd"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename escaped slash", post(key, body(`"a\/b.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename escaped NUL", post(key, body(`"a\u0000.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename raw NUL", post(key, body("\"a\x00.jpg\"", `"image/jpeg"`)), 400, "invalid_request", ""},
		{"filename newline", post(key, body(`"a\nb.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename carriage return", post(key, body(`"a\rb.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename escape sequence", post(key, body(`"\u001b[31mred.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename DEL", post(key, body(`"a\u007f.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename C1 control", post(key, body(`"a\u0085.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename empty", post(key, body(`""`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename 256 bytes", post(key, body(`"`+strings.Repeat("é", 128)+`"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename 10,000 chars", post(key, body(`"`+strings.Repeat("a", 10000)+`"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename 10,000 escaped chars", post(key, body(`"`+strings.Repeat(`\u0061`, 2500)+`"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename not a string", post(key, body(`{"$ne":null}`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename lone high surrogate escape", post(key, body(`"a\ud800.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename lone low surrogate escape", post(key, body(`"a\udfff.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename surrogates out of order", post(key, body(`"a\ude00\ud83d.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"base64 filename lone surrogate escape", base64Post(key, body(`"a\ud800.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename right-to-left override", post(key, body(`"\u202egpj.exe"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename raw right-to-left override", post(key, body("\"\u202egpj.exe\"", `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename right-to-left isolate", post(key, body(`"a\u2067b.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename zero-width joiner", post(key, body(`"a\u200db.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename zero-width space", post(key, body("\"a\u200bb.jpg\"", `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename byte order mark", post(key, body(`"\ufeffa.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		// Each a 201 before issue 33: they break lines, are no characters,
		// render blank, join what comes before, or read as a path once
		// normalized (NFKC).
		{"filename line separator", post(key, body(`"a\u2028b.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename raw paragraph separator", post(key, body("\"a\u2029b.jpg\"", `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename noncharacter U+FFFE", post(key, body(`"a\ufffe.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename noncharacter U+FFFF", post(key, body(`"a\uffff.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename only spaces", post(key, body(`"   "`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename only NBSP", post(key, body(`"\u00a0\u00a0"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename leading combining mark", post(key, body(`"\u0301a.jpg"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},
		{"filename fullwidth solidus path", post(key, body(`"..\uff0fetc\uff0fpasswd"`, `"image/jpeg"`)), 400, "invalid_request", "filename"},

		// contentType that is no media type, or not one a header can carry.
		{"contentType text", post(key, body(`"a.jpg"`, `"text"`)), 400, "invalid_request", "contentType"},
		{"contentType image/", post(key, body(`"a.jpg"`, `"image/"`)), 400, "invalid_request", "contentType"},
		{"contentType /png", post(key, body(`"a.jpg"`, `"/png"`)), 400, "invalid_request", "contentType"},
		{"contentType a/b/c", post(key, body(`"a.jpg"`, `"a/b/c"`)), 400, "invalid_request", "contentType"},
		{"contentType CR LF", post(key, body(`"a.jpg"`, `"image/png\r\nX-Injected: 1"`)), 400, "invalid_request", "contentType"},
		{"contentType LF in parameter", post(key, body(`"a.jpg"`, `"image/png; a=\"\n\""`)), 400, "invalid_request", "contentType"},
		{"contentType NUL", post(key, body(`"a.jpg"`, `"image/png\u0000"`)), 400, "invalid_request", "contentType"},
		{"contentType non-ASCII", post(key, body(`"a.jpg"`, `"image/pñg"`)), 400, "invalid_request", "contentType"},
		{"contentType empty", post(key, body(`"a.jpg"`, `""`)), 400, "invalid_request", "contentType"},
		{"contentType 10,000 chars", post(key, body(`"a.jpg"`, `"image/`+strings.Repeat("p", 10000)+`"`)), 400, "invalid_request", "contentType"},
		{"contentType leading space", post(key, body(`"a.jpg"`, `" image/jpeg"`)), 400, "invalid_request", "contentType"},
		{"contentType trailing space", post(key, body(`"a.jpg"`, `"image/jpeg "`)), 400, "invalid_request", "contentType"},
		{"contentType trailing space after a parameter", post(key, body(`"a.jpg"`, `"image/jpeg; q=1 "`)), 400, "invalid_request", "contentType"},
		{"contentType lone surrogate escape", post(key, body(`"a.jpg"`, `"image/jpeg\udc00"`)), 400, "invalid_request", "contentType"},
		{"contentType valid but not allowed", post(key, body(`"a.jpg"`, `"text/html"`)), 415, "unsupported_media_type", ""},
		{"contentType allowed type, other case", post(key, body(`"a.jpg"`, `"TEXT/HTML"`)), 415, "unsupported_media_type", ""},

		// Other fields.
		{"size negative", post(key, strings.Replace(photo, "48213", "-1", 1)), 400, "invalid_request", "size"},
		{"size fraction", post(key, strings.Replace(photo, "48213", "1.5", 1)), 400, "invalid_request", "size"},
		{"size exponent", post(key, strings.Replace(photo, "48213", "1e3", 1)), 400, "invalid_request", "size"},
		{"size string", post(key, strings.Replace(photo, "48213", `"48213"`, 1)), 400, "invalid_request", "size"},
		{"size beyond int64", post(key, strings.Replace(photo, "48213", "99999999999999999999999", 1)), 413, "file_too_large", ""},
		{"size beyond any deployment with partSize", post(key, `{"filename":"big.mov","contentType":"image/jpeg","size":53687091200001,"partSize":5242880}`), 413, "file_too_large", ""},
		{"size over this deployment with partSize", post(key, `{"filename":"big.mov","contentType":"image/jpeg","size":1099511627776,"partSize":5242880}`), 413, "file_too_large", ""},
		{"sha256 not hex", post(key, strings.Replace(photo, digest, strings.Repeat("g", 64), 1)), 400, "invalid_request", "sha256"},
		{"sha256 65 chars", post(key, strings.Replace(photo, digest, digest+"0", 1)), 400, "invalid_request", "sha256"},
		{"unknown field", post(key, strings.Replace(photo, `"size"`, `"__proto__":{},"size"`, 1)), 400, "invalid_request", ""},
		{"two objects", post(key, photo+photo), 400, "invalid_request", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			resp, err := f.handler.Handle(context.Background(), tc.req)
			if err != nil {
				t.Fatalf("Handle returned an error: %v", err)
			}
			code := checkResponse(t, resp)
			if resp.StatusCode != tc.status || code != tc.code {
				t.Fatalf("%d %s, want %d %s; body %s", resp.StatusCode, code, tc.status, tc.code, resp.Body)
			}
			if tc.field != "" && !strings.Contains(resp.Body, tc.field) {
				t.Errorf("message does not name %s: %s", tc.field, resp.Body)
			}
			if n := f.store.Len(); n != 0 {
				t.Errorf("a refused request stored %d records", n)
			}
		})
	}
}

// Text that would read two ways is refused, with a message naming the
// field, rather than read one way: a lone surrogate escape (which a lenient
// decoder reads as U+FFFD, so "a\ud800.jpg" would replay "a\udfff.jpg"), a
// format character that makes a filename show other than it is, and a
// contentType whose white space a header would drop. Neither of two such
// requests under one key is taken for the other: both are refused.
func TestTextThatReadsTwoWays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ golden, first, second string }{
		{"error-filename-lone-surrogate", body(`"a\ud800.jpg"`, `"image/jpeg"`), body(`"a\udfff.jpg"`, `"image/jpeg"`)},
		{"error-filename-format-character", body(`"\u202egpj.exe"`, `"image/jpeg"`), body(`"exe.jpg"`, `"image/jpeg"`)},
		{"error-contentType-white-space", body(`"a.jpg"`, `" image/jpeg"`), body(`"a.jpg"`, `"image/jpeg"`)},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			resp := f.do(t, post(key, tc.first))
			wantStatus(t, resp, 400, "invalid_request")
			checkResponse(t, resp)
			golden(t, tc.golden, resp.Body)
			if f.store.Len() != 0 {
				t.Fatalf("a refused request stored %d records", f.store.Len())
			}
			// The key is still free: the other request is its first.
			second := f.do(t, post(key, tc.second))
			if tc.golden == "error-filename-lone-surrogate" {
				wantStatus(t, second, 400, "invalid_request")
				golden(t, tc.golden, second.Body)
				return
			}
			wantStatus(t, second, 201, "")
			if _, ok := second.Headers["Idempotent-Replay"]; ok {
				t.Fatalf("the first request to be accepted was answered as a replay: %v", second.Headers)
			}
		})
	}
}

// The limits are exact: a body of exactly 16 KiB, raw or base64-encoded,
// and a filename of exactly 255 bytes are accepted.
func TestHostileInputLimitsAreExact(t *testing.T) {
	t.Parallel()
	cases := map[string]events.APIGatewayV2HTTPRequest{
		"body 16 KiB":             post(key, padTo(photo, api.MaxBodyBytes)),
		"base64 body 16 KiB":      base64Post(key, padTo(photo, api.MaxBodyBytes)),
		"filename 255 bytes":      post(key, body(`"`+strings.Repeat("é", 127)+`x"`, `"image/jpeg"`)),
		"key 255 chars quoted":    post(`"`+strings.Repeat("k", 255)+`"`, photo),
		"key 16 chars":            post(strings.Repeat("k", 16), photo),
		"key all visible ASCII":   post(visibleASCII(), photo),
		"filename dots and space": post(key, body(`"...  .jpg"`, `"image/jpeg"`)),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			resp, err := f.handler.Handle(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, resp)
			if resp.StatusCode != http.StatusCreated || f.store.Len() != 1 {
				t.Fatalf("%d with %d records, want 201 and one; body %s", resp.StatusCode, f.store.Len(), resp.Body)
			}
		})
	}
}

// Names people write stay accepted, in any script, and each is stored and
// answered as sent (a fullwidth name is not its NFKC form).
func TestFilenamesAccepted(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"résumé.jpg", "写真 2026.jpg", "مرحبا بالعالم.jpg", "holiday photo.jpg", "🎉.jpg", "ｐｈｏｔｏ.jpg"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			raw, _ := json.Marshal(name)
			resp := f.do(t, post(key, body(string(raw), `"image/jpeg"`)))
			wantStatus(t, resp, 201, "")
			var u api.Upload
			if err := json.Unmarshal([]byte(resp.Body), &u); err != nil || u.Filename != name {
				t.Fatalf("filename %q answered as %q (%v)", name, u.Filename, err)
			}
		})
	}
}

// visibleASCII is every character a key may hold, except the quote that
// would start a quoted key.
func visibleASCII() string {
	var b strings.Builder
	for c := byte(0x21); c <= 0x7e; c++ {
		if c != '"' && c != ',' {
			b.WriteByte(c)
		}
	}
	return b.String()
}
