package upload

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/onceupload/onceupload/pkg/api"
)

// Errors for requests the service refuses; the handler maps each to its
// status and error code.
var (
	ErrBodyTooLarge = fmt.Errorf("the request body is larger than %d bytes", api.MaxBodyBytes)
	// ErrCompleteBodyTooLarge: a complete body over MaxCompleteBodyBytes.
	ErrCompleteBodyTooLarge = fmt.Errorf("the complete body is larger than %d bytes", MaxCompleteBodyBytes)
	ErrFileTooLarge         = errors.New("size is larger than this deployment accepts")
	ErrNeedsParts           = errors.New("size is larger than S3 accepts in one PUT (5 GiB); send partSize to upload it in parts")
	ErrUnsupportedMedia     = errors.New("contentType is not allowed by this deployment")
	ErrNotFound             = errors.New("no such upload")
	// ErrNotPending: the upload is completed or aborted; its parts can no
	// longer be signed, listed or completed.
	ErrNotPending = errors.New("the upload is no longer pending")
	// ErrCompleted: an abort of an upload that is already completed.
	ErrCompleted = errors.New("the upload is completed and cannot be aborted")
)

// PartsMissingError is a complete of a multipart upload that S3 does not
// hold every part of (or holds one of the wrong size).
type PartsMissingError struct {
	// Missing lists the first part numbers missing (at most ten).
	Missing []int
	// Count is how many parts are missing in all.
	Count int
}

func (e *PartsMissingError) Error() string {
	return "parts missing or of the wrong size: " + partNumbers(e.Missing, e.Count)
}

// PartsMismatchError is a complete whose declared part SHA-256s differ
// from what S3 holds for those parts: the parts stored are not the file's
// the client means (a key reused for another file, or a file that changed
// between its parts). Nothing was completed; the client may send the right
// bytes of these parts again (sign them anew) and complete again.
type PartsMismatchError struct {
	// Mismatched lists the first part numbers that differ (at most ten).
	Mismatched []int
	// Count is how many parts differ in all.
	Count int
}

func (e *PartsMismatchError) Error() string {
	return "parts whose SHA-256 in S3 is not the declared one: " + partNumbers(e.Mismatched, e.Count)
}

// partNumbers renders the first part numbers of a list of count: "3, 7"
// or "1, 2, … 10 and 5 more".
func partNumbers(first []int, count int) string {
	nums := make([]string, len(first))
	for i, n := range first {
		nums[i] = strconv.Itoa(n)
	}
	more := ""
	if count > len(first) {
		more = fmt.Sprintf(" and %d more", count-len(first))
	}
	return strings.Join(nums, ", ") + more
}

// ValidationError is a create request with a bad field. Its message is
// written for the client and names the field.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Message }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// DecodeCreateRequest parses a raw create body strictly: at most
// api.MaxBodyBytes of valid UTF-8 holding one JSON object whose members are
// exactly the contract's (case-sensitive, none twice, none unknown). It
// checks shape and types; [Service.Create] checks the values.
func DecodeCreateRequest(body []byte) (api.CreateRequest, error) {
	var r api.CreateRequest
	if len(body) > api.MaxBodyBytes {
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
			return r, invalid("partSize", "partSize must be from %d to %d bytes", api.MinPartSize, api.MaxPartSize)
		}
	}
	switch {
	case in.SHA256 == nil && in.PartSize == nil:
		return r, errSHA256Required
	case in.SHA256 != nil && r.SHA256 == "":
		// Given empty is not omitted: "" would read as no sha256.
		return r, errSHA256Format
	}
	return r, nil
}

var (
	errSHA256Required = invalid("sha256", "sha256 is required for a single PUT (without partSize): S3 checks the file against it")
	errSHA256Format   = invalid("sha256", "sha256 must be 64 hex characters")
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
// with 1 to api.MaxPartsPerSign entries. Part numbers are checked against
// the upload by [Service.SignParts].
func DecodeSignPartsRequest(body []byte) (api.SignPartsRequest, error) {
	var r api.SignPartsRequest
	if len(body) > api.MaxBodyBytes {
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
	r.Parts, err = decodeParts(in.Parts, api.MaxPartsPerSign, fmt.Sprintf("parts must list 1 to %d parts", api.MaxPartsPerSign))
	return r, err
}

// decodeParts reads a parts list: an array of 1 to most entries (else
// invalid, saying tooMany), each {"partNumber": n, "sha256": "…"} and no
// other member, no part number twice; digests come out in lower case.
// Which numbers an upload has is the service's to check.
func decodeParts(raw jsontext.Value, most int, tooMany string) ([]api.PartToSign, error) {
	var entries []jsontext.Value
	if raw.Kind() != '[' || json.Unmarshal(raw, &entries) != nil {
		return nil, invalid("parts", "parts must be an array")
	}
	if len(entries) == 0 || len(entries) > most {
		return nil, invalid("parts", "%s", tooMany)
	}
	parts := make([]api.PartToSign, 0, len(entries))
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
		if err != nil || len(sum) != 64 || !isHex(sum) {
			return nil, invalid("parts", "parts[%d].sha256 must be 64 hex characters", i)
		}
		if seen[n] {
			return nil, invalid("parts", "part %d is listed twice", n)
		}
		seen[n] = true
		parts = append(parts, api.PartToSign{PartNumber: int(n), SHA256: strings.ToLower(sum)})
	}
	return parts, nil
}

// MaxCompleteBodyBytes is the largest complete body, in raw bytes: a
// declaration of all 10,000 parts takes about 970 KB as compact JSON and
// about 1.25 MB indented, so 2 MiB holds it either way. It fits API
// Gateway's 10 MB payload and, JSON-escaped or base64-encoded in the event,
// Lambda's 6 MB synchronous invocation.
const MaxCompleteBodyBytes = 2 << 20

// DecodeCompleteRequest parses the optional body of a complete as strictly
// as DecodeCreateRequest: no body (zero bytes) is no declaration, as is
// {}; otherwise one object with "parts" (1 to api.MaxParts entries in the
// signing shape, none twice) and "sha256" (64 hex), both optional, at most
// MaxCompleteBodyBytes. Whether the parts name exactly the upload's parts
// is checked by [Service.Complete].
func DecodeCompleteRequest(body []byte) (api.CompleteRequest, error) {
	var r api.CompleteRequest
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
		if err != nil || len(sum) != 64 || !isHex(sum) {
			return r, errSHA256Format
		}
		r.SHA256 = strings.ToLower(sum)
	}
	if in.Parts == nil {
		return r, nil
	}
	var err error
	r.Parts, err = decodeParts(in.Parts, api.MaxParts, fmt.Sprintf("parts must list every part of the upload, 1 to %d of them; leave it out to complete from what S3 holds", api.MaxParts))
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
// adds. It replaced a hand-written member splitter because it is also
// faster on the hot path. Measured on the create body (same machine, the
// benchmarks interleaved; instructions by callgrind, GOGC=off): decoding
// 14.5k instructions an op down to 10.5k, 10 allocations (624 B) down to 9
// (408 B); a ten-part sign body 274k down to 153k instructions, 90
// allocations down to 76; BenchmarkCreate 392k-397k down to 388k-391k
// instructions, 450 allocations down to 449. The presign bootstrap grows by
// 0.6 MB (11.3 to 11.9 MB, budget 16); its init costs 0.01 ms.
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

// validateCreate checks r's values against the contract and the
// deployment's limits and returns r with sha256 in lower case, the form
// that is fingerprinted, recorded and answered.
func validateCreate(r api.CreateRequest, cfg *Config) (api.CreateRequest, error) {
	if err := validFilename(r.Filename); err != nil {
		return r, err
	}
	mediaType, err := validMediaType(r.ContentType)
	if err != nil {
		return r, err
	}
	if r.Size < 1 {
		return r, invalid("size", "size must be at least 1")
	}
	switch {
	case r.SHA256 == "" && r.PartSize == 0:
		return r, errSHA256Required
	case r.SHA256 != "" && (len(r.SHA256) != 64 || !isHex(r.SHA256)):
		return r, errSHA256Format
	}
	if r.PartSize != 0 {
		if r.PartSize < api.MinPartSize || r.PartSize > api.MaxPartSize {
			return r, invalid("partSize", "partSize must be from %d (5 MiB) to %d (5 GiB) bytes", api.MinPartSize, api.MaxPartSize)
		}
		if n := api.PartCount(r.Size, r.PartSize); n > api.MaxParts {
			return r, invalid("partSize", "partSize %d cuts size %d into %d parts; at most %d are allowed, so use at least %d",
				r.PartSize, r.Size, n, api.MaxParts, (r.Size+api.MaxParts-1)/api.MaxParts)
		}
	}
	// Malformed fields (400) first, then the deployment's limits (413, 415).
	if r.Size > cfg.MaxUploadBytes {
		return r, ErrFileTooLarge
	}
	if r.PartSize == 0 && r.Size > api.MaxSinglePutBytes {
		return r, ErrNeedsParts
	}
	if !cfg.allows(mediaType) {
		return r, ErrUnsupportedMedia
	}
	r.SHA256 = strings.ToLower(r.SHA256)
	return r, nil
}

func validFilename(name string) error {
	switch {
	case name == "":
		return invalid("filename", "filename must not be empty")
	case len(name) > api.MaxFilenameLen:
		return invalid("filename", "filename must be at most %d bytes", api.MaxFilenameLen)
	case !utf8.ValidString(name):
		return invalid("filename", "filename must be valid UTF-8")
	case name == "." || name == "..":
		return invalid("filename", "filename must not be . or ..")
	case strings.ContainsAny(name, `/\`):
		return invalid("filename", "filename must be a base name, without / or \\")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalid("filename", "filename must not contain control characters")
	case strings.IndexFunc(name, isFormat) >= 0:
		return invalid("filename", "filename must not contain invisible format characters such as U+202E (right-to-left override) or U+200D (zero-width joiner)")
	}
	return nil
}

// isFormat reports whether r is a Unicode format character (category Cf):
// invisible, yet it changes how a name shows. The bidi controls (U+202A to
// U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C) reorder it, so that
// "\u202egpj.exe" shows as "exe.jpg"; zero-width characters (U+200B to
// U+200D, U+2060, U+FEFF) and the soft hyphen make two names that look
// the same differ. The whole category, not a list of the known tricks: it
// grows with Unicode. The price is a few names that use one for what it is
// for (U+200C in Persian words, U+200D joining an emoji sequence); a
// client can drop it, and the name still reads.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// validMediaType checks contentType is a type/subtype (parameters allowed)
// that can be sent as a header, and returns the lower-case type/subtype.
// White space at either end is refused, not trimmed: a header cannot carry
// it (HTTP drops white space around a field value, SigV4 trims it before
// signing, so S3 stores "image/png" for " image/png"), and
// mime.ParseMediaType ignores it, so " image/png" and "image/png" would be
// two requests, with two fingerprints, for one object; the one form
// accepted is the one recorded, signed and answered.
func validMediaType(ct string) (string, error) {
	if ct == "" || len(ct) > api.MaxMediaTypeLen {
		return "", invalid("contentType", "contentType must be a media type of 1 to %d characters", api.MaxMediaTypeLen)
	}
	if strings.Trim(ct, " \t\r\n") != ct {
		return "", invalid("contentType", "contentType must not begin or end with white space")
	}
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return "", invalid("contentType", "contentType must be printable ASCII")
		}
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", invalid("contentType", "contentType must be a media type such as image/jpeg")
	}
	typ, sub, ok := strings.Cut(mediaType, "/")
	if !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
		return "", invalid("contentType", "contentType must be a media type such as image/jpeg")
	}
	if strings.Contains(mediaType, "*") {
		return "", invalid("contentType", "contentType must be one media type, not a range such as image/*")
	}
	return mediaType, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// fingerprint identifies a request for one key: method, route, tenant and
// the fields as validateCreate returns them, each length-prefixed so no
// field can bleed into the next. Never the raw JSON text, so whitespace
// and key order do not count.
// partSize counts only when set, so single-PUT fingerprints are as before.
// A multipart create without sha256 has "" in its place: every request
// that gives one keeps the fingerprint it always had, and none that gives
// one (64 characters, length-prefixed) can share a fingerprint with one
// that does not.
func fingerprint(tenant string, r api.CreateRequest) string {
	h := sha256.New()
	parts := []string{"POST", "/uploads", tenant, r.Filename, r.ContentType, strconv.FormatInt(r.Size, 10), r.SHA256}
	if r.PartSize != 0 {
		parts = append(parts, "partSize", strconv.FormatInt(r.PartSize, 10))
	}
	for _, part := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}
