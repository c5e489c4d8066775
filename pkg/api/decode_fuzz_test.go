package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The fuzz targets of the body decoders; each also runs as a plain test
// over its f.Add seeds and testdata/fuzz/<FuzzName>/.

const fuzzDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// goErrorText is text of Go or SDK errors that must never reach a client.
var goErrorText = []string{"json:", "strconv", "operation error", "%!", "invalid character", "unexpected end of JSON",
	"mime:", "runtime error", "goroutine", "<nil>", "parse id", "upload id"}

func isLowerHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}

// FuzzDecodeSignPartsRequest decodes arbitrary sign bodies. A refusal is a
// client error; an accepted request lists 1 to 100 distinct parts, each
// with a lower-case 64-hex SHA-256, and reads the same when written again.
func FuzzDecodeSignPartsRequest(f *testing.F) {
	for _, seed := range []string{
		`{"parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `"}]}`,
		`{"parts":[{"partNumber":1,"sha256":"` + strings.ToUpper(fuzzDigest) + `"},{"partNumber":10000,"sha256":"` + fuzzDigest + `"}]}`,
		`{"parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `"},{"partNumber":1,"sha256":"` + fuzzDigest + `"}]}`,
		`{"parts":[]}`, `{"parts":null}`, `{"parts":{}}`, `{"parts":[1]}`, `{"parts":[{"partNumber":"1","sha256":"x"}]}`,
		`{"parts":[{"partNumber":1.5,"sha256":"` + fuzzDigest + `"}]}`, `{"parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `","extra":1}]}`,
		`{"Parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `"}]}`, `{"parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `"}],"parts":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeSignPartsRequest(body)
		if err != nil {
			var v *RequestError
			if !errors.Is(err, ErrBodyTooLarge) && !errors.As(err, &v) {
				t.Fatalf("body %q: refused with %T %v, not a client error", body, err, err)
			}
			if v != nil {
				for _, leak := range goErrorText {
					if strings.Contains(v.Message, leak) {
						t.Fatalf("body %q: message %q leaks %q", body, v.Message, leak)
					}
				}
			}
			return
		}
		if len(req.Parts) < 1 || len(req.Parts) > MaxPartsPerSign {
			t.Fatalf("accepted %d parts", len(req.Parts))
		}
		seen := map[int]bool{}
		for _, p := range req.Parts {
			if seen[p.PartNumber] || len(p.SHA256) != 64 || !isLowerHex(p.SHA256) {
				t.Fatalf("accepted part %+v (seen before: %v)", p, seen[p.PartNumber])
			}
			seen[p.PartNumber] = true
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := DecodeSignPartsRequest(again); err != nil || fmt.Sprint(r2) != fmt.Sprint(req) {
			t.Fatalf("written again as %s: %+v %v, want %+v", again, r2, err, req)
		}
	})
}

// FuzzDecodeCompleteRequest decodes arbitrary complete bodies. A refusal
// is a client error; an accepted declaration lists 1 to MaxParts
// distinct parts with lower-case 64-hex SHA-256s (or none), a sha256 that
// is 64 lower-case hex (or none), and reads the same when written again.
func FuzzDecodeCompleteRequest(f *testing.F) {
	part := `{"partNumber":1,"sha256":"` + fuzzDigest + `"}`
	for _, seed := range []string{
		``, `{}`, ` `, `null`, `[]`, `{} {}`,
		`{"parts":[` + part + `]}`,
		`{"sha256":"` + strings.ToUpper(fuzzDigest) + `","parts":[` + part + `,{"partNumber":10000,"sha256":"` + fuzzDigest + `"}]}`,
		`{"sha256":"` + fuzzDigest + `"}`, `{"sha256":""}`, `{"sha256":null}`, `{"sha256":"\ud800"}`,
		`{"parts":[` + part + `,` + part + `]}`, `{"parts":[]}`, `{"parts":null}`, `{"parts":{}}`, `{"parts":[1]}`,
		`{"parts":[{"partNumber":1.5,"sha256":"` + fuzzDigest + `"}]}`, `{"parts":[{"partNumber":-1,"sha256":"` + fuzzDigest + `"}]}`,
		`{"parts":[{"partNumber":1,"sha256":"` + fuzzDigest + `","extra":1}]}`, `{"Parts":[` + part + `]}`,
		`{"parts":[` + part + `],"parts":[]}`, `{"parts":[` + part + `],"sha256":"` + fuzzDigest + `","sha256":"` + fuzzDigest + `"}`,
		"{\"sha256\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Add(bytes.Repeat([]byte(" "), MaxCompleteBodyBytes+1))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeCompleteRequest(body)
		if (len(body) > MaxCompleteBodyBytes) != errors.Is(err, ErrCompleteBodyTooLarge) {
			t.Fatalf("%d-byte body: %v; want ErrCompleteBodyTooLarge exactly when over %d bytes", len(body), err, MaxCompleteBodyBytes)
		}
		if err != nil {
			var v *RequestError
			if !errors.Is(err, ErrCompleteBodyTooLarge) && !errors.As(err, &v) {
				t.Fatalf("body %q: refused with %T %v, not a client error", body, err, err)
			}
			if v != nil {
				if v.Field != "body" && v.Field != "parts" && v.Field != "sha256" {
					t.Fatalf("body %q: RequestError names field %q", body, v.Field)
				}
				for _, leak := range goErrorText {
					if strings.Contains(v.Message, leak) {
						t.Fatalf("body %q: message %q leaks %q", body, v.Message, leak)
					}
				}
			}
			return
		}
		if len(body) > 0 && (!utf8.Valid(body) || !jsontext.Value(body).IsValid()) {
			t.Fatalf("accepted a body that is not RFC 7493 JSON: %q", body)
		}
		if req.SHA256 != "" && (len(req.SHA256) != 64 || !isLowerHex(req.SHA256)) {
			t.Fatalf("accepted sha256 %q", req.SHA256)
		}
		if req.Parts != nil && (len(req.Parts) < 1 || len(req.Parts) > MaxParts) {
			t.Fatalf("accepted %d parts", len(req.Parts))
		}
		seen := map[int]bool{}
		for _, p := range req.Parts {
			if seen[p.PartNumber] || len(p.SHA256) != 64 || !isLowerHex(p.SHA256) {
				t.Fatalf("accepted part %+v (seen before: %v)", p, seen[p.PartNumber])
			}
			seen[p.PartNumber] = true
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := DecodeCompleteRequest(again); err != nil || fmt.Sprint(r2) != fmt.Sprint(req) {
			t.Fatalf("written again as %s: %+v %v, want %+v", again, r2, err, req)
		}
	})
}
