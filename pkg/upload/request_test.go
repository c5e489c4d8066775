package upload

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/onceupload/onceupload/pkg/api"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestDecodeAndValidate(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 1000, AllowedContentTypes: []string{"image/*", "application/pdf"}}
	cases := []struct {
		name  string
		body  string
		field string // for a *ValidationError
		err   error  // for a sentinel
	}{
		{"valid", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"parameters allowed", `{"filename":"a.pdf","contentType":"application/pdf; x=y","size":1000,"sha256":"` + strings.ToUpper(sha) + `"}`, "", nil},
		{"unicode filename", `{"filename":"résumé 2026 (final).png","contentType":"image/png","size":5,"sha256":"` + sha + `"}`, "", nil},
		{"not json", `filename=a`, "body", nil},
		{"empty", ``, "body", nil},
		{"array", `[]`, "body", nil},
		{"null", `null`, "body", nil},
		{"member twice", `{"filename":"a.png","filename":"b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"member given twice within a value", `{"filename":{"a":1,"a":2},"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"escaped member name", `{"\u0066ilename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"member name in another case", `{"Filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "body", nil},
		{"null filename", `{"filename":null,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"media range", `{"filename":"a.png","contentType":"image/*","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"any media", `{"filename":"a.png","contentType":"*/*","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"part size too small", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":5242879}`, "partSize", nil},
		{"part size zero", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":0}`, "partSize", nil},
		{"part size not a number", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":"5MiB"}`, "partSize", nil},
		{"two objects", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"} {}`, "body", nil},
		{"unknown field", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","extra":1}`, "body", nil},
		{"invalid utf-8", "{\"filename\":\"a\xff.png\",\"contentType\":\"image/png\",\"size\":1,\"sha256\":\"" + sha + "\"}", "body", nil},
		{"missing filename", `{"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"missing size", `{"filename":"a.png","contentType":"image/png","sha256":"` + sha + `"}`, "size", nil},
		{"filename wrong type", `{"filename":1,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"deep nesting", `{"filename":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, "filename", nil},
		{"empty filename", `{"filename":"","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"dot", `{"filename":".","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"dot dot", `{"filename":"..","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"path", `{"filename":"../etc/passwd","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"backslash", `{"filename":"a\\b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"nul", `{"filename":"a\u0000.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"newline", `{"filename":"a\n.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"too long", `{"filename":"` + strings.Repeat("é", 128) + `","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"no subtype", `{"filename":"a.png","contentType":"image","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"empty type", `{"filename":"a.png","contentType":"","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"header injection", `{"filename":"a.png","contentType":"image/png\r\nx: y","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"size zero", `{"filename":"a.png","contentType":"image/png","size":0,"sha256":"` + sha + `"}`, "size", nil},
		{"size negative", `{"filename":"a.png","contentType":"image/png","size":-5,"sha256":"` + sha + `"}`, "size", nil},
		{"size fraction", `{"filename":"a.png","contentType":"image/png","size":1.5,"sha256":"` + sha + `"}`, "size", nil},
		{"size exponent", `{"filename":"a.png","contentType":"image/png","size":1e3,"sha256":"` + sha + `"}`, "size", nil},
		{"size string", `{"filename":"a.png","contentType":"image/png","size":"1","sha256":"` + sha + `"}`, "size", nil},
		{"sha short", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"abc"}`, "sha256", nil},
		{"sha not hex", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + strings.Repeat("g", 64) + `"}`, "sha256", nil},
		{"size over max", `{"filename":"a.png","contentType":"image/png","size":1001,"sha256":"` + sha + `"}`, "", ErrFileTooLarge},
		{"size over int64", `{"filename":"a.png","contentType":"image/png","size":99999999999999999999999,"sha256":"` + sha + `"}`, "", ErrFileTooLarge},
		{"type not allowed", `{"filename":"a.txt","contentType":"text/plain","size":1,"sha256":"` + sha + `"}`, "", ErrUnsupportedMedia},
		{"body too large", `{"filename":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`, "", ErrBodyTooLarge},

		// A surrogate escape counts only as half of a high-low pair: alone
		// it would read as U+FFFD, and two bodies as one.
		{"escaped surrogate pair", `{"filename":"a\ud83d\ude00.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"lone high surrogate", `{"filename":"a\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"lone low surrogate", `{"filename":"a\udfff.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"high surrogate at the end", `{"filename":"a.png\uD800","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"high surrogate before another escape", `{"filename":"a\ud800\u0041.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"two high surrogates", `{"filename":"a\ud800\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"surrogates low then high", `{"filename":"a\udc00\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"lone surrogate in contentType", `{"filename":"a.png","contentType":"image/png\ud800","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"lone surrogate in sha256", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"\udc00` + sha[1:] + `"}`, "sha256", nil},
		{"lone surrogate in a member name", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","\ud800":1}`, "body", nil},

		// contentType exactly as a header carries it.
		{"contentType leading space", `{"filename":"a.png","contentType":" image/png","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing space", `{"filename":"a.png","contentType":"image/png ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing space after a parameter", `{"filename":"a.pdf","contentType":"application/pdf; x=y ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing tab", `{"filename":"a.png","contentType":"image/png\t","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType leading newline", `{"filename":"a.png","contentType":"\nimage/png","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType all spaces", `{"filename":"a.png","contentType":"   ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType space inside parameters", `{"filename":"a.pdf","contentType":"application/pdf ; x=y","size":1,"sha256":"` + sha + `"}`, "", nil},

		// Unicode format characters (Cf): invisible, they change how a name
		// shows.
		{"filename right-to-left override", `{"filename":"\u202egpj.exe","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename raw right-to-left override", "{\"filename\":\"\u202egpj.exe\",\"contentType\":\"image/png\",\"size\":1,\"sha256\":\"" + sha + "\"}", "filename", nil},
		{"filename left-to-right embedding", `{"filename":"a\u202a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename right-to-left isolate", `{"filename":"a\u2067.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename right-to-left mark", `{"filename":"a\u200f.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename arabic letter mark", `{"filename":"a\u061c.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width space", `{"filename":"a\u200b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width joiner", `{"filename":"a\u200d.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width non-joiner", `{"filename":"a\u200c.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename word joiner", `{"filename":"a\u2060.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename byte order mark", `{"filename":"\ufeffa.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename soft hyphen", `{"filename":"a\u00adb.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename tag character", `{"filename":"a\udb40\udc01.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename emoji", `{"filename":"🎉 party.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"filename right-to-left script", `{"filename":"שלום.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
	}
	for _, tc := range cases {
		req, err := DecodeCreateRequest([]byte(tc.body))
		if err == nil {
			_, err = canonical(req, cfg)
		}
		var v *ValidationError
		switch {
		case tc.field == "" && tc.err == nil:
			if err != nil {
				t.Errorf("%s: err = %v, want accepted", tc.name, err)
			}
		case tc.field != "":
			if !errors.As(err, &v) || v.Field != tc.field || !strings.Contains(v.Message, strings.Split(tc.field, " ")[0]) && tc.field != "body" {
				t.Errorf("%s: err = %#v, want a validation error on %s", tc.name, err, tc.field)
			}
		case !errors.Is(err, tc.err):
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
}

// A sign body is as strict as a create body, and a refusal inside the
// parts says which part.
func TestDecodeSignPartsRequestStrict(t *testing.T) {
	t.Parallel()
	part := `{"partNumber":1,"sha256":"` + sha + `"}`
	cases := []struct{ body, field, message string }{
		{`{"parts":[` + part + `]}`, "", ""},
		{`{"parts":[` + part + `],"parts":[]}`, "parts", "parts is given twice"},
		{`{"Parts":[` + part + `]}`, "body", `unknown field "Parts"`},
		{`{"parts":[` + part + `],"extra":1}`, "body", `unknown field "extra"`},
		{`{"parts":[` + part + `,{"partNumber":2,"partNumber":3,"sha256":"` + sha + `"}]}`, "parts", "parts[1] holds a member name twice"},
		{`{"parts":[{"partNumber":1,"sha256":"` + sha + `","extra":1}]}`, "parts", "parts[0] must be an object with partNumber and sha256"},
		{`{"parts":[{"PartNumber":1,"sha256":"` + sha + `"}]}`, "parts", "parts[0] must be an object with partNumber and sha256"},
		{`{"parts":null}`, "parts", "parts must be an array"},
		{`{"parts":[` + part + `]} {}`, "body", "the request body must be one JSON object"},
		{"{\"parts\":[{\"partNumber\":1,\"sha256\":\"\xff\"}]}", "body", "the request body is not valid UTF-8"},
		{`{"parts":[` + part + `,{"partNumber":2,"sha256":"\ud800` + sha[1:] + `"}]}`, "parts", `parts[1] must not contain a lone surrogate escape (\uD800 to \uDFFF outside a high-low pair)`},
	}
	for _, tc := range cases {
		_, err := DecodeSignPartsRequest([]byte(tc.body))
		var v *ValidationError
		switch {
		case tc.field == "":
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.body, err)
			}
		case !errors.As(err, &v) || v.Field != tc.field || v.Message != tc.message:
			t.Errorf("%s: err = %#v, want %s: %q", tc.body, err, tc.field, tc.message)
		}
	}
}

// A lone surrogate escape is refused, never read as U+FFFD: were it
// replaced, "a\ud800.txt" and "a\udfff.txt" would be one request, and the
// second would replay the first's answer instead of a 422. The decoder
// (encoding/json/v2) refuses it; this holds that, and that the message
// names the member. A pair, in either case of hex, is one character.
func TestLoneSurrogateEscapes(t *testing.T) {
	t.Parallel()
	body := func(filename string) []byte {
		return []byte(`{"filename":"` + filename + `","contentType":"text/plain","size":1,"sha256":"` + sha + `"}`)
	}
	const want = `filename must not contain a lone surrogate escape (\uD800 to \uDFFF outside a high-low pair)`
	for _, name := range []string{`a\ud800.txt`, `a\udfff.txt`, `a\uDBFF.txt`, `a\udc00.txt`, `a\ud800`, `\ud800\u0041`, `\udfff\ud800`, `\ud800\\ud800`} {
		_, err := DecodeCreateRequest(body(name))
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != "filename" || v.Message != want {
			t.Errorf("filename %s: err = %#v, want %q", name, err, want)
		}
	}
	for escaped, want := range map[string]string{`a\ud83d\ude00.txt`: "a😀.txt", `a\uD83D\uDE00.txt`: "a😀.txt", `\udbff\udfff`: "\U0010FFFF", `\ufffd`: "\uFFFD"} {
		req, err := DecodeCreateRequest(body(escaped))
		if err != nil || req.Filename != want {
			t.Errorf("filename %s: %q, %v; want %q", escaped, req.Filename, err, want)
		}
	}
	// Truncated within an escape, the body is not one JSON object.
	if _, err := DecodeCreateRequest([]byte(`{"filename":"\ud800`)); err == nil || err.Error() != "the request body must be one JSON object" {
		t.Errorf("truncated after a high surrogate: %v", err)
	}
}

// contentType is recorded, signed and answered as sent, so it is refused
// with white space at either end rather than trimmed: a header cannot carry
// that space, and " image/png" must not be a second request for the
// object "image/png" names.
func TestContentTypeWhiteSpace(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 10}
	for _, ct := range []string{" image/png", "image/png ", "\timage/png", "image/png\r\n", "image/png; a=b ", "  "} {
		_, err := canonical(api.CreateRequest{Filename: "a.png", ContentType: ct, Size: 1, SHA256: sha}, cfg)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != "contentType" {
			t.Errorf("contentType %q: err = %v, want a validation error on contentType", ct, err)
		}
	}
	_, err := canonical(api.CreateRequest{Filename: "a.png", ContentType: " image/png", Size: 1, SHA256: sha}, cfg)
	if err == nil || err.Error() != "contentType must not begin or end with white space" {
		t.Errorf("leading space: %v", err)
	}
	for _, ct := range []string{"image/png", "image/png; a=b", "image/png ;a=b", `image/png; a="b c"`} {
		r, err := canonical(api.CreateRequest{Filename: "a.png", ContentType: ct, Size: 1, SHA256: sha}, cfg)
		if err != nil || r.ContentType != ct {
			t.Errorf("contentType %q: %q, %v; want it accepted as sent", ct, r.ContentType, err)
		}
	}
}

// Every Unicode format character (category Cf) is refused in a filename,
// raw or escaped; what is printed, in any script, is not.
func TestFilenameFormatCharacters(t *testing.T) {
	t.Parallel()
	n := 0
	for _, r16 := range unicode.Cf.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			checkFormatRefused(t, r)
			n++
		}
	}
	for _, r32 := range unicode.Cf.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			checkFormatRefused(t, r)
			n++
		}
	}
	if n < 150 {
		t.Fatalf("checked %d format characters; the table has more", n)
	}
	for _, name := range []string{"résumé.pdf", "שלום.png", "مرحبا.png", "写真.jpg", "🎉.png", "a\u00a0b.png", "a-b_c (1).tar.gz"} {
		if err := validFilename(name); err != nil {
			t.Errorf("validFilename(%q) = %v", name, err)
		}
	}
}

func checkFormatRefused(t *testing.T, r rune) {
	t.Helper()
	const want = "filename must not contain invisible format characters such as U+202E (right-to-left override) or U+200D (zero-width joiner)"
	name := "a" + string(r) + ".png"
	if err := validFilename(name); err == nil || err.Error() != want {
		t.Errorf("validFilename(%q) (U+%04X) = %v, want %q", name, r, err, want)
	}
	for _, raw := range []string{jsonQuote(name, false), jsonQuote(name, true)} { // raw, then \uXXXX
		req, err := DecodeCreateRequest([]byte(`{"filename":` + raw + `,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`))
		if err == nil {
			_, err = canonical(req, &Config{MaxUploadBytes: 10})
		}
		if err == nil || err.Error() != want {
			t.Errorf("filename %s (U+%04X): %v, want %q", raw, r, err, want)
		}
	}
}

// The fingerprint is over canonical fields: whitespace, key order and the
// case of the hex digest do not change it; every field, the tenant and
// field boundaries do.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 1 << 30}
	fp := func(tenant, body string) string {
		t.Helper()
		req, err := DecodeCreateRequest([]byte(body))
		if err == nil {
			req, err = canonical(req, cfg)
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fingerprint(tenant, req)
	}
	base := fp("t", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`)
	same := []string{
		`{ "sha256" : "` + strings.ToUpper(sha) + `", "size": 10, "contentType": "image/png", "filename": "a.png" }`,
		"{\n\t\"filename\":\"a.png\",\"contentType\":\"image/png\",\"size\":10,\"sha256\":\"" + sha + "\"}\n",
	}
	for _, body := range same {
		if got := fp("t", body); got != base {
			t.Errorf("%s: fingerprint changed", body)
		}
	}
	different := map[string]string{
		"tenant":      fp("u", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`),
		"filename":    fp("t", `{"filename":"b.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`),
		"contentType": fp("t", `{"filename":"a.png","contentType":"image/jpeg","size":10,"sha256":"`+sha+`"}`),
		"size":        fp("t", `{"filename":"a.png","contentType":"image/png","size":11,"sha256":"`+sha+`"}`),
		"sha256":      fp("t", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+strings.Repeat("0", 64)+`"}`),
	}
	for field, got := range different {
		if got == base {
			t.Errorf("changing %s did not change the fingerprint", field)
		}
	}
	if fingerprint("ab", api.CreateRequest{Filename: "c"}) == fingerprint("a", api.CreateRequest{Filename: "bc"}) {
		t.Error("field boundaries are ambiguous")
	}
}

func TestUploadIDs(t *testing.T) {
	t.Parallel()
	id := "0123456789abcdef0123456789abcdef"
	good := id + "fedcba9876543210fedcba9876543210"
	got, err := ParseUploadID(good)
	if err != nil || string(got) != id {
		t.Fatalf("ParseUploadID(%q) = %q, %v", good, got, err)
	}
	for _, bad := range []string{"", id, good + "0", strings.ToUpper(good), "../" + good[3:], good[:63] + "g"} {
		if _, err := ParseUploadID(bad); err == nil {
			t.Errorf("ParseUploadID(%q) accepted", bad)
		}
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	cfg := &Config{AllowedContentTypes: []string{"image/*", "application/pdf"}}
	for mt, want := range map[string]bool{"image/png": true, "image/svg+xml": true, "application/pdf": true, "application/json": false, "text/plain": false} {
		if got := cfg.allows(mt); got != want {
			t.Errorf("allows(%s) = %v, want %v", mt, got, want)
		}
	}
	if !(&Config{}).allows("anything/at-all") {
		t.Error("an empty list must allow any type")
	}
}

// BenchmarkDecodeCreateRequest is the strict decoding of a create body
// alone, the part of BenchmarkCreate that DecodeCreateRequest owns.
func BenchmarkDecodeCreateRequest(b *testing.B) {
	body := []byte(`{"filename":"photo.jpg","contentType":"image/jpeg","size":48213,"sha256":"` + sha + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCreateRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSignPartsRequest decodes a sign body of ten parts.
func BenchmarkDecodeSignPartsRequest(b *testing.B) {
	parts := make([]string, 10)
	for i := range parts {
		parts[i] = `{"partNumber":` + strconv.Itoa(i+1) + `,"sha256":"` + sha + `"}`
	}
	body := []byte(`{"parts":[` + strings.Join(parts, ",") + `]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSignPartsRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
