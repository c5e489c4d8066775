package upload

import (
	"errors"
	"strconv"
	"strings"
	"testing"

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
	}
	for _, tc := range cases {
		req, err := DecodeCreateRequest([]byte(tc.body))
		if err == nil {
			_, err = canonical(req, cfg)
		}
		var v *ValidationError
		switch {
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
