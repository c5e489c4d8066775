package api

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

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
		var v *RequestError
		switch {
		case tc.field == "":
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.body, err)
			}
		case !errors.As(err, &v) || v.Field != tc.field || v.Message != tc.message+".":
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
		var v *RequestError
		if !errors.As(err, &v) || v.Field != "filename" || v.Message != want+"." {
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
	if _, err := DecodeCreateRequest([]byte(`{"filename":"\ud800`)); err == nil || err.Error() != "the request body must be one JSON object." {
		t.Errorf("truncated after a high surrogate: %v", err)
	}
}

// A complete body is optional and as strict as the others; a refusal says
// what is wrong, and inside the parts which part.
func TestDecodeCompleteRequest(t *testing.T) {
	t.Parallel()
	part := func(n int, sum string) string { return `{"partNumber":` + strconv.Itoa(n) + `,"sha256":"` + sum + `"}` }
	upper := strings.ToUpper(sha)
	cases := []struct {
		name, body, field, message string
		want                       CompleteRequest
	}{
		{"no body", ``, "", "", CompleteRequest{}},
		{"empty object", `{}`, "", "", CompleteRequest{}},
		{"parts", `{"parts":[` + part(2, sha) + `,` + part(1, upper) + `]}`, "", "",
			CompleteRequest{Parts: []PartToSign{{PartNumber: 2, SHA256: sha}, {PartNumber: 1, SHA256: sha}}}},
		{"sha256 only", `{"sha256":"` + upper + `"}`, "", "", CompleteRequest{SHA256: sha}},
		{"both", ` {"sha256":"` + sha + `", "parts":[` + part(1, sha) + `]} `, "", "",
			CompleteRequest{Parts: []PartToSign{{PartNumber: 1, SHA256: sha}}, SHA256: sha}},
		{"white space only", ` `, "body", "the request body must be one JSON object", CompleteRequest{}},
		{"null", `null`, "body", "the request body must be one JSON object", CompleteRequest{}},
		{"array", `[]`, "body", "the request body must be one JSON object", CompleteRequest{}},
		{"unknown member", `{"parts":[` + part(1, sha) + `],"extra":1}`, "body", `unknown field "extra"`, CompleteRequest{}},
		{"member in another case", `{"SHA256":"` + sha + `"}`, "body", `unknown field "SHA256"`, CompleteRequest{}},
		{"parts twice", `{"parts":[` + part(1, sha) + `],"parts":[` + part(1, sha) + `]}`, "parts", "parts is given twice", CompleteRequest{}},
		{"parts empty", `{"parts":[]}`, "parts", "parts must list every part of the upload, 1 to 10000 of them; leave it out to complete from what S3 holds", CompleteRequest{}},
		{"parts null", `{"parts":null}`, "parts", "parts must be an array", CompleteRequest{}},
		{"parts an object", `{"parts":{"1":"` + sha + `"}}`, "parts", "parts must be an array", CompleteRequest{}},
		{"part number twice", `{"parts":[` + part(1, sha) + `,` + part(2, sha) + `,` + part(1, sha) + `]}`, "parts", "part 1 is listed twice", CompleteRequest{}},
		{"part number a fraction", `{"parts":[{"partNumber":1.5,"sha256":"` + sha + `"}]}`, "parts", "parts[0].partNumber must be a whole number", CompleteRequest{}},
		{"part number a string", `{"parts":[{"partNumber":"1","sha256":"` + sha + `"}]}`, "parts", "parts[0].partNumber must be a whole number", CompleteRequest{}},
		{"part sha256 short", `{"parts":[` + part(1, sha) + `,` + part(2, "abc") + `]}`, "parts", "parts[1].sha256 must be 64 hex characters", CompleteRequest{}},
		{"part sha256 not hex", `{"parts":[` + part(1, strings.Repeat("g", 64)) + `]}`, "parts", "parts[0].sha256 must be 64 hex characters", CompleteRequest{}},
		{"part with another member", `{"parts":[{"partNumber":1,"sha256":"` + sha + `","size":3}]}`, "parts", "parts[0] must be an object with partNumber and sha256", CompleteRequest{}},
		{"part without sha256", `{"parts":[{"partNumber":1}]}`, "parts", "parts[0].sha256 must be 64 hex characters", CompleteRequest{}},
		{"sha256 short", `{"sha256":"abc"}`, "sha256", "sha256 must be 64 hex characters", CompleteRequest{}},
		{"sha256 empty", `{"sha256":""}`, "sha256", "sha256 must be 64 hex characters", CompleteRequest{}},
		{"sha256 a number", `{"sha256":1}`, "sha256", "sha256 must be 64 hex characters", CompleteRequest{}},
		{"invalid UTF-8", "{\"sha256\":\"\xff\"}", "body", "the request body is not valid UTF-8", CompleteRequest{}},
		{"two objects", `{} {}`, "body", "the request body must be one JSON object", CompleteRequest{}},
	}
	for _, tc := range cases {
		got, err := DecodeCompleteRequest([]byte(tc.body))
		var v *RequestError
		switch {
		case tc.field == "":
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
			}
		case !errors.As(err, &v) || v.Field != tc.field || v.Message != tc.message+".":
			t.Errorf("%s: err = %#v, want %s: %q", tc.name, err, tc.field, tc.message)
		}
	}

	// Every part of the largest upload fits, compact or indented; one byte
	// more than the limit does not.
	entries := make([]string, MaxParts)
	for i := range entries {
		entries[i] = "\n    " + part(i+1, sha)
	}
	all := []byte(`{"sha256":"` + sha + `","parts":[` + strings.Join(entries, ",") + "\n]}")
	indented := bytes.ReplaceAll(bytes.ReplaceAll(all, []byte(`{"partNumber":`), []byte("{\n      \"partNumber\": ")), []byte(`,"sha256":`), []byte(",\n      \"sha256\": "))
	for name, body := range map[string][]byte{"compact": all, "indented": indented} {
		if len(body) > MaxCompleteBodyBytes {
			t.Errorf("%s: a declaration of %d parts takes %d bytes, over the limit", name, MaxParts, len(body))
		}
		got, err := DecodeCompleteRequest(body)
		if err != nil || len(got.Parts) != MaxParts || got.Parts[MaxParts-1].PartNumber != MaxParts {
			t.Errorf("%s: %d parts, %v", name, len(got.Parts), err)
		}
	}
	tooMany := []byte(`{"parts":[` + strings.Join(append(entries, part(MaxParts+1, sha)), ",") + `]}`)
	if _, err := DecodeCompleteRequest(tooMany); err == nil || !strings.Contains(err.Error(), "1 to 10000") {
		t.Errorf("%d parts: %v", MaxParts+1, err)
	}
	over := append([]byte(`{}`), bytes.Repeat([]byte(" "), MaxCompleteBodyBytes-1)...)
	if _, err := DecodeCompleteRequest(over); !errors.Is(err, ErrCompleteBodyTooLarge) {
		t.Errorf("a body of %d bytes: %v, want ErrCompleteBodyTooLarge", len(over), err)
	}
	if _, err := DecodeCompleteRequest(over[:MaxCompleteBodyBytes]); err != nil {
		t.Errorf("a body of exactly %d bytes: %v", MaxCompleteBodyBytes, err)
	}
}

// IsHex says what hex.DecodeString says, and allocates nothing doing it:
// a complete body of 10,000 parts asks it 10,000 times.
func TestIsHex(t *testing.T) {
	for _, s := range []string{sha, strings.ToUpper(sha), "", "0a", "0", "0g", "g0", "zz", " 0a", "0a ", "\x00\x00", "é0"} {
		_, err := hex.DecodeString(s)
		if got, want := IsHex(s), err == nil; got != want {
			t.Errorf("IsHex(%q) = %v, want %v (hex.DecodeString: %v)", s, got, want, err)
		}
	}
	ok := false
	if n := testing.AllocsPerRun(100, func() { ok = IsHex(sha) }); n != 0 || !ok {
		t.Errorf("IsHex of a digest: %v, %v allocations, want true, 0", ok, n)
	}
}

// BenchmarkDecodeCompleteRequest decodes the largest declaration: every
// part of a 10,000-part upload.
func BenchmarkDecodeCompleteRequest(b *testing.B) {
	entries := make([]string, MaxParts)
	for i := range entries {
		entries[i] = `{"partNumber":` + strconv.Itoa(i+1) + `,"sha256":"` + sha + `"}`
	}
	body := []byte(`{"parts":[` + strings.Join(entries, ",") + `]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCompleteRequest(body); err != nil {
			b.Fatal(err)
		}
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
