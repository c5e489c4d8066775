package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// RequestError is a request the contract refuses: the error code to answer
// with (CodeInvalidRequest, CodeKeyRequired, CodeKeyInvalid,
// CodeRequestTooLarge, CodeFileTooLarge or CodeUnsupportedMediaType), the
// member or header it is about ("body" for the body as a whole), and the
// message for the client, a sentence that names it. The decoders and
// ParseIdempotencyKey refuse with one; so does the server, for values a
// deployment does not accept.
type RequestError struct {
	Code    string
	Field   string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

func invalid(field, format string, args ...any) error {
	return &RequestError{Code: CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...) + "."}
}

// Refusals of a request by its size.
var (
	// ErrBodyTooLarge: a create or sign body over MaxBodyBytes.
	ErrBodyTooLarge = &RequestError{Code: CodeRequestTooLarge, Field: "body",
		Message: fmt.Sprintf("the request body is larger than %d bytes.", MaxBodyBytes)}
	// ErrCompleteBodyTooLarge: a complete body over MaxCompleteBodyBytes.
	ErrCompleteBodyTooLarge = &RequestError{Code: CodeRequestTooLarge, Field: "body",
		Message: fmt.Sprintf("the complete body is larger than %d bytes.", MaxCompleteBodyBytes)}
	// ErrFileTooLarge: a size beyond what is accepted; the decoder refuses
	// one beyond int64 with it, the server one beyond its deployment's
	// limit.
	ErrFileTooLarge = &RequestError{Code: CodeFileTooLarge, Field: "size", Message: "size is larger than this deployment accepts."}
)

// DecodeCreateRequest parses a raw create body strictly: at most
// MaxBodyBytes of valid UTF-8 holding one JSON object whose members are
// exactly the contract's (case-sensitive, none twice, none unknown). It
// checks shape and types; The server checks the values.
func DecodeCreateRequest(body []byte) (CreateRequest, error) {
	var r CreateRequest
	if len(body) > MaxBodyBytes {
		return r, ErrBodyTooLarge
	}
	var in struct {
		Filename    jsontext.Value `json:"filename"`
		ContentType jsontext.Value `json:"contentType"`
		Size        jsontext.Value `json:"size"`
		SHA256      jsontext.Value `json:"sha256"`
		PartSize    jsontext.Value `json:"partSize"`
	}
	if err := decodeObject(body, &in, createMembers); err != nil {
		return r, err
	}
	var err error
	for _, f := range []struct {
		name string
		raw  jsontext.Value
		into *string
	}{{"filename", in.Filename, &r.Filename}, {"contentType", in.ContentType, &r.ContentType}, {"size", in.Size, nil}, {"sha256", in.SHA256, &r.SHA256}} {
		if f.raw == nil && f.name == "sha256" {
			continue // required without partSize: see below
		}
		if f.raw == nil {
			return r, invalid(f.name, "%s is required", f.name)
		}
		if f.into == nil {
			r.Size, err = jsonInt(f.raw, f.name)
		} else {
			*f.into, err = jsonString(f.raw, f.name)
		}
		if err != nil {
			return r, err
		}
	}
	if in.PartSize != nil {
		if r.PartSize, err = jsonInt(in.PartSize, "partSize"); err != nil {
			return r, err
		}
		if r.PartSize == 0 {
			return r, ErrPartSizeRange
		}
	}
	switch {
	case in.SHA256 == nil && in.PartSize == nil:
		return r, ErrSHA256Required
	case in.SHA256 != nil && r.SHA256 == "":
		// Given empty is not omitted: "" would read as no sha256.
		return r, ErrSHA256Format
	}
	return r, nil
}

// Refusals of a create's values that the upload service makes too, for a
// request that did not come through DecodeCreateRequest: one wording each.
var (
	ErrSHA256Required = invalid("sha256", "sha256 is required for a single PUT (without partSize): S3 checks the file against it")
	ErrSHA256Format   = invalid("sha256", "sha256 must be 64 hex characters")
	ErrPartSizeRange  = invalid("partSize", "partSize must be from %d (5 MiB) to %d (5 GiB) bytes", MinPartSize, MaxPartSize)
)

// The members of the strictly decoded objects, as their structs name them.
var (
	createMembers   = []string{"filename", "contentType", "size", "sha256", "partSize"}
	signMembers     = []string{"parts"}
	partMembers     = []string{"partNumber", "sha256"}
	completeMembers = []string{"parts", "sha256"}
)

// DecodeSignPartsRequest parses a raw sign body as strictly as
// DecodeCreateRequest: {"parts": [{"partNumber": n, "sha256": "…"}, …]}
// with 1 to MaxPartsPerSign entries. Which part numbers an upload has is the
// server's to check.
func DecodeSignPartsRequest(body []byte) (SignPartsRequest, error) {
	var r SignPartsRequest
	if len(body) > MaxBodyBytes {
		return r, ErrBodyTooLarge
	}
	var in struct {
		Parts jsontext.Value `json:"parts"`
	}
	if err := decodeObject(body, &in, signMembers); err != nil {
		return r, err
	}
	if in.Parts == nil {
		return r, invalid("parts", "parts is required")
	}
	var err error
	r.Parts, err = decodeParts(in.Parts, MaxPartsPerSign, fmt.Sprintf("parts must list 1 to %d parts", MaxPartsPerSign))
	return r, err
}

// decodeParts reads a parts list: an array of 1 to most entries (else
// invalid, saying tooMany), each {"partNumber": n, "sha256": "…"} and no
// other member, no part number twice; digests come out in lower case.
// Which numbers an upload has is the service's to check.
func decodeParts(raw jsontext.Value, most int, tooMany string) ([]PartToSign, error) {
	var entries []jsontext.Value
	if raw.Kind() != '[' || json.Unmarshal(raw, &entries) != nil {
		return nil, invalid("parts", "parts must be an array")
	}
	if len(entries) == 0 || len(entries) > most {
		return nil, invalid("parts", "%s", tooMany)
	}
	parts := make([]PartToSign, 0, len(entries))
	seen := make(map[int64]bool, len(entries))
	for i, e := range entries {
		var part struct {
			PartNumber jsontext.Value `json:"partNumber"`
			SHA256     jsontext.Value `json:"sha256"`
		}
		if decodeObject(e, &part, partMembers) != nil {
			return nil, invalid("parts", "parts[%d] must be an object with partNumber and sha256", i)
		}
		n, err := jsonInt(part.PartNumber, "partNumber")
		if err != nil {
			return nil, invalid("parts", "parts[%d].partNumber must be a whole number", i)
		}
		sum, err := jsonString(part.SHA256, "sha256")
		if err != nil || len(sum) != 64 || !IsHex(sum) {
			return nil, invalid("parts", "parts[%d].sha256 must be 64 hex characters", i)
		}
		if seen[n] {
			return nil, invalid("parts", "part %d is listed twice", n)
		}
		seen[n] = true
		parts = append(parts, PartToSign{PartNumber: int(n), SHA256: strings.ToLower(sum)})
	}
	return parts, nil
}

// DecodeCompleteRequest parses the optional body of a complete as strictly
// as DecodeCreateRequest: no body (zero bytes) is no declaration, as is
// {}; otherwise one object with "parts" (1 to MaxParts entries in the
// signing shape, none twice) and "sha256" (64 hex), both optional, at most
// MaxCompleteBodyBytes. Whether the parts name exactly the upload's parts
// is the server's to check.
func DecodeCompleteRequest(body []byte) (CompleteRequest, error) {
	var r CompleteRequest
	if len(body) > MaxCompleteBodyBytes {
		return r, ErrCompleteBodyTooLarge
	}
	if len(body) == 0 {
		return r, nil
	}
	var in struct {
		Parts  jsontext.Value `json:"parts"`
		SHA256 jsontext.Value `json:"sha256"`
	}
	if err := decodeObject(body, &in, completeMembers); err != nil {
		return r, err
	}
	if in.SHA256 != nil {
		sum, err := jsonString(in.SHA256, "sha256")
		if err != nil || len(sum) != 64 || !IsHex(sum) {
			return r, ErrSHA256Format
		}
		r.SHA256 = strings.ToLower(sum)
	}
	if in.Parts == nil {
		return r, nil
	}
	var err error
	r.Parts, err = decodeParts(in.Parts, MaxParts, fmt.Sprintf("parts must list every part of the upload, 1 to %d of them; leave it out to complete from what S3 holds", MaxParts))
	return r, err
}

// decodeObject decodes body, one JSON object, into v, a struct of the
// members named known, refusing what encoding/json would let through:
// invalid UTF-8 and lone surrogate escapes ("\ud800" without its low half;
// both would become U+FFFD, so that different bodies would read the same),
// a name that matches only without regard to case, a name given twice (at
// any depth), an unknown member, and anything after the object. Its errors
// become messages for the client, naming the member where they can.
//
// github.com/go-json-experiment/json is the basis of encoding/json/v2
// (the standard library's under GOEXPERIMENT=jsonv2): it refuses all
// of these by default but the unknown member, which RejectUnknownMembers
// adds, and it is faster on the hot path than a hand-written member
// splitter (CHANGELOG.md has the measurements).
func decodeObject(body []byte, v any, known []string) error {
	if !utf8.Valid(body) {
		return invalid("body", "the request body is not valid UTF-8")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return invalid("body", "the request body must be one JSON object") // null would decode as {}
	}
	// Never jsontext.AllowInvalidUTF8 (off by default): it would let lone
	// surrogate escapes through as U+FFFD (TestLoneSurrogateEscapes).
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	var at jsontext.Pointer
	switch {
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		at = syn.JSONPointer
	case errors.As(err, &sem) && errors.Is(sem.Err, json.ErrUnknownName):
		at = sem.JSONPointer
	case errors.As(err, &syn) && !errors.Is(syn.Err, io.ErrUnexpectedEOF) && surrogateEscapeAt(body, syn.ByteOffset):
		// A lone surrogate escape, which encoding/json (v1) reads as
		// U+FFFD, so that "a\ud800" and "a\udfff" would be one request.
		// The decoder refuses it; say where: the pointer is the member
		// whose value holds it, or none for a name at the top.
		if name, within, depth := member(syn.JSONPointer); depth > 0 && slices.Contains(known, name) {
			return invalid(name, "%s%s must not contain a lone surrogate escape (\\uD800 to \\uDFFF outside a high-low pair)", name, within)
		}
		return invalid("body", "the request body must not contain a lone surrogate escape (\\uD800 to \\uDFFF outside a high-low pair)")
	default:
		return invalid("body", "the request body must be one JSON object")
	}
	name, within, depth := member(at)
	switch {
	case !slices.Contains(known, name):
		return invalid("body", "unknown field %q", name)
	case depth == 1:
		return invalid(name, "%s is given twice", name)
	default: // a duplicate within the member's value
		return invalid(name, "%s%s holds a member name twice", name, within)
	}
}

// member reads a pointer into a decoded body: the top-level member it is
// in, where in that member's value ("[2]" for an array index, never the
// client's text), and its depth (0 for the body itself).
func member(at jsontext.Pointer) (name, within string, depth int) {
	for tok := range at.Tokens() {
		switch depth++; {
		case depth == 1:
			name = tok
		case depth == 2 && tok != "" && strings.Trim(tok, "0123456789") == "":
			within = "[" + tok + "]"
		}
	}
	return name, within, depth
}

// surrogateEscapeAt reports whether body holds, at off, a \u escape of a
// UTF-16 surrogate (U+D800 to U+DFFF). Where the decoder stops on one, it
// is not half of a valid pair.
func surrogateEscapeAt(body []byte, off int64) bool {
	if off < 0 || off > int64(len(body))-6 || body[off] != '\\' || body[off+1] != 'u' {
		return false
	}
	v, err := strconv.ParseUint(string(body[off+2:off+6]), 16, 16)
	return err == nil && v >= 0xd800 && v <= 0xdfff
}

// jsonString reads the raw value of member name as a JSON string (null is
// not one). A string without escapes is its bytes: decodeObject has
// checked the body is valid JSON and valid UTF-8.
func jsonString(raw jsontext.Value, name string) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", invalid(name, "%s must be a string", name)
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", invalid(name, "%s must be a string", name)
	}
	return s, nil
}

// jsonInt reads the raw value of member name as a whole number. ParseInt
// refuses what JSON also allows but a count is not: strings, fractions,
// exponents. A number beyond int64 is a file too large, not a malformed
// one.
func jsonInt(raw jsontext.Value, name string) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) && len(raw) > 0 && raw[0] != '-' && name == "size" {
			return 0, ErrFileTooLarge
		}
		return 0, invalid(name, "%s must be a whole number", name)
	}
	return n, nil
}

// IsHex reports whether hex.DecodeString would accept s (pairs of hex
// digits of either case), without decoding it into a buffer: a complete
// body checks up to 10,001 digests.
func IsHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
