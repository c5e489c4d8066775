package upload

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the HTTP contract.
const (
	MaxBodyBytes    = 16 << 10 // raw bytes of a create request's body
	MinKeyLen       = 16
	MaxKeyLen       = 255
	MaxFilenameLen  = 255 // bytes
	MaxMediaTypeLen = 255
)

// Errors for requests the service refuses; the handler maps each to its
// status and error code.
var (
	ErrKeyMissing       = errors.New("the Idempotency-Key header is required")
	ErrKeyInvalid       = errors.New("the Idempotency-Key header must be 16 to 255 visible ASCII characters")
	ErrBodyTooLarge     = fmt.Errorf("the request body is larger than %d bytes", MaxBodyBytes)
	ErrFileTooLarge     = errors.New("size is larger than this deployment accepts")
	ErrUnsupportedMedia = errors.New("contentType is not allowed by this deployment")
	ErrNotFound         = errors.New("no such upload")
)

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

// ParseIdempotencyKey returns the key carried by an Idempotency-Key header
// value. Surrounding spaces are not part of a header value. A value wrapped
// in double quotes (the IETF draft's structured-field string) is unquoted;
// the length is counted after unquoting.
func ParseIdempotencyKey(header string) (string, error) {
	k := strings.Trim(header, " \t")
	if k == "" {
		return "", ErrKeyMissing
	}
	if k[0] == '"' {
		if len(k) < 2 || k[len(k)-1] != '"' {
			return "", ErrKeyInvalid
		}
		k = k[1 : len(k)-1]
		if strings.ContainsAny(k, `"\`) {
			return "", ErrKeyInvalid
		}
	}
	if len(k) < MinKeyLen || len(k) > MaxKeyLen {
		return "", ErrKeyInvalid
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", ErrKeyInvalid
		}
	}
	return k, nil
}

// CreateRequest is the body of POST /uploads.
type CreateRequest struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"` // 64 hex characters
}

// wireRequest tells a missing field from a zero one and keeps size exact.
type wireRequest struct {
	Filename    *string         `json:"filename"`
	ContentType *string         `json:"contentType"`
	Size        json.RawMessage `json:"size"`
	SHA256      *string         `json:"sha256"`
}

// DecodeCreateRequest parses a raw create body: at most MaxBodyBytes of
// UTF-8 JSON holding one object with exactly the four fields. It checks
// shape and types; [Service.Create] checks the values.
func DecodeCreateRequest(body []byte) (CreateRequest, error) {
	if len(body) > MaxBodyBytes {
		return CreateRequest{}, ErrBodyTooLarge
	}
	if !utf8.Valid(body) {
		return CreateRequest{}, invalid("body", "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var w wireRequest
	if err := dec.Decode(&w); err != nil {
		return CreateRequest{}, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return CreateRequest{}, invalid("body", "the request body must hold exactly one JSON object")
	}
	switch {
	case w.Filename == nil:
		return CreateRequest{}, invalid("filename", "filename is required")
	case w.ContentType == nil:
		return CreateRequest{}, invalid("contentType", "contentType is required")
	case w.Size == nil || string(w.Size) == "null":
		return CreateRequest{}, invalid("size", "size is required")
	case w.SHA256 == nil:
		return CreateRequest{}, invalid("sha256", "sha256 is required")
	}
	// ParseInt refuses what JSON also allows but a byte count is not:
	// strings, fractions, exponents.
	size, err := strconv.ParseInt(string(w.Size), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) && w.Size[0] != '-' {
			return CreateRequest{}, ErrFileTooLarge
		}
		return CreateRequest{}, invalid("size", "size must be a whole number of bytes")
	}
	return CreateRequest{Filename: *w.Filename, ContentType: *w.ContentType, Size: size, SHA256: *w.SHA256}, nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return invalid(typeErr.Field, "%s has the wrong type", typeErr.Field)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid("body", "unknown field %s", name)
	}
	return invalid("body", "the request body must be a JSON object")
}

// canonical validates r against the contract and the deployment's limits and
// returns it in canonical form (sha256 in lower case).
func (r CreateRequest) canonical(cfg *Config) (CreateRequest, error) {
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
	if len(r.SHA256) != 64 || !isHex(r.SHA256) {
		return r, invalid("sha256", "sha256 must be 64 hex characters")
	}
	// Malformed fields (400) first, then the deployment's limits (413, 415).
	if r.Size > cfg.MaxUploadBytes {
		return r, ErrFileTooLarge
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
	case len(name) > MaxFilenameLen:
		return invalid("filename", "filename must be at most %d bytes", MaxFilenameLen)
	case !utf8.ValidString(name):
		return invalid("filename", "filename must be valid UTF-8")
	case name == "." || name == "..":
		return invalid("filename", "filename must not be . or ..")
	case strings.ContainsAny(name, `/\`):
		return invalid("filename", "filename must be a base name, without / or \\")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalid("filename", "filename must not contain control characters")
	}
	return nil
}

// validMediaType checks contentType is a type/subtype (parameters allowed)
// that can be sent as a header, and returns the lower-case type/subtype.
func validMediaType(ct string) (string, error) {
	if ct == "" || len(ct) > MaxMediaTypeLen {
		return "", invalid("contentType", "contentType must be a media type of 1 to %d characters", MaxMediaTypeLen)
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
	return mediaType, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// fingerprint identifies a request for one key: method, route, tenant and
// the canonical fields, each length-prefixed so no field can bleed into the
// next. Never the raw JSON text, so whitespace and key order do not count.
func fingerprint(tenant string, r CreateRequest) string {
	h := sha256.New()
	for _, part := range []string{"POST", "/uploads", tenant, r.Filename, r.ContentType, strconv.FormatInt(r.Size, 10), r.SHA256} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}
