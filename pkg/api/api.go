// Package api is the HTTP contract of onceupload: the request and response
// bodies, statuses, error codes and limits that the server and every client
// share, and the strict decoders of the request bodies and the
// Idempotency-Key header (decode.go), which refuse with a *RequestError
// written for the client. It has no AWS dependency, so a program that only
// uploads files links none of the server's SDK clients.
//
// The routes (docs/api.md has the whole contract):
//
//	POST   /uploads                      create (Idempotency-Key), 201 Upload
//	GET    /uploads/{uploadId}           status, 200 Upload
//	POST   /uploads/{uploadId}/parts     sign parts, 200 SignedParts
//	GET    /uploads/{uploadId}/parts     list stored parts, 200 PartList
//	POST   /uploads/{uploadId}/complete  complete a multipart upload, 200 Upload
//	DELETE /uploads/{uploadId}           abort a multipart upload, 200 Upload
package api

import (
	"errors"

	"github.com/onceupload/onceupload/pkg/idempotency/keyheader"
)

// Limits of the contract.
const (
	// MaxBodyBytes is the largest create or sign request body, in raw bytes.
	MaxBodyBytes = 16 << 10
	// MaxCompleteBodyBytes is the largest complete body, in raw bytes: a
	// declaration of all 10,000 parts takes about 970 KB as compact JSON and
	// about 1.25 MB indented, so 2 MiB holds it either way. It fits API
	// Gateway's 10 MB payload and, JSON-escaped or base64-encoded in the event,
	// Lambda's 6 MB synchronous invocation.
	MaxCompleteBodyBytes = 2 << 20
	// MinKeyLen and MaxKeyLen bound an Idempotency-Key, counted after
	// unquoting.
	MinKeyLen = 16
	MaxKeyLen = keyheader.MaxLen
	// MaxFilenameLen is in bytes of UTF-8.
	MaxFilenameLen = 255
	// MaxMediaTypeLen bounds contentType.
	MaxMediaTypeLen = 255

	// MaxSinglePutBytes is S3's limit for one PUT: larger files need
	// partSize.
	MaxSinglePutBytes = 5 << 30
	// MinPartSize and MaxPartSize bound partSize: S3 refuses a part under
	// 5 MiB (but the last) and over 5 GiB.
	MinPartSize = 5 << 20
	MaxPartSize = 5 << 30
	// MaxParts is S3's limit of parts per upload.
	MaxParts = 10000
	// MaxMultipartBytes is the largest object S3 stores: 10,000 parts of
	// 5 GiB.
	MaxMultipartBytes = MaxParts * MaxPartSize
	// MaxPartsPerSign is how many parts one sign request may list.
	MaxPartsPerSign = 100
)

// Statuses of an upload.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
	StatusAborted   = "aborted"
)

// Error codes: the "error" member of every error body. They are stable API.
const (
	CodeKeyRequired          = "idempotency_key_required" // 400
	CodeKeyInvalid           = "idempotency_key_invalid"  // 400
	CodeInvalidRequest       = "invalid_request"          // 400
	CodeUnauthenticated      = "unauthenticated"          // 401
	CodeNotFound             = "not_found"                // 404
	CodeInProgress           = "idempotency_in_progress"  // 409, with Retry-After
	CodeUploadNotPending     = "upload_not_pending"       // 409
	CodeUploadCompleted      = "upload_completed"         // 409
	CodePartsMissing         = "parts_missing"            // 409
	CodePartsMismatch        = "parts_mismatch"           // 409: a declared part SHA-256 differs from the part S3 holds
	CodeRequestTooLarge      = "request_too_large"        // 413
	CodeFileTooLarge         = "file_too_large"           // 413
	CodeUnsupportedMediaType = "unsupported_media_type"   // 415
	CodeKeyReuse             = "idempotency_key_reuse"    // 422
	CodeTooManyUploads       = "too_many_uploads"         // 429, not retried: complete or abort an upload first
	CodeInternal             = "internal_error"           // 500
	CodeUnavailable          = "service_unavailable"      // 503, with Retry-After
)

// Events: when an upload's record becomes completed or aborted, the table's
// stream yields one EventBridge event (at least once; docs/api.md, "Events").
const (
	// EventSource is the events' default source; a deployment may set
	// another (the EventSource template parameter).
	EventSource = "onceupload"
	// DetailTypeUploadCompleted and DetailTypeUploadAborted are the events'
	// detail-types.
	DetailTypeUploadCompleted = "Upload Completed"
	DetailTypeUploadAborted   = "Upload Aborted"
)

// EventDetail is the detail of an Upload Completed or Upload Aborted event.
// UploadID is what a consumer deduplicates on: a re-published event carries
// a new event id and time, but the same detail.
type EventDetail struct {
	UploadID string `json:"uploadId"`
	// Status is "completed" or "aborted", as in the upload's body.
	Status string `json:"status"`
	// Tenant is whom the upload belongs to: "anonymous", "jwt:…" or the
	// authorizer's principal (docs/api.md, "Tenants").
	Tenant      string `json:"tenant"`
	Bucket      string `json:"bucket"`
	StorageKey  string `json:"storageKey"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Bytes       int64  `json:"bytes"`
	// SHA256 is the whole file's SHA-256 as the client declared it (S3
	// checked it for a single PUT); absent for a multipart upload whose
	// client gave none.
	SHA256 string `json:"sha256,omitempty"`
	// CompositeSHA256 is S3's checksum of a multipart object.
	CompositeSHA256 string `json:"compositeSha256,omitempty"`
	// ETag and CompletedAt (RFC 3339) are set for a completed upload,
	// AbortedAt for an aborted one.
	ETag        string `json:"etag,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
	AbortedAt   string `json:"abortedAt,omitempty"`
	// PartSize and PartCount are set for a multipart upload.
	PartSize  int64 `json:"partSize,omitempty"`
	PartCount int   `json:"partCount,omitempty"`
}

// Error is every error body.
type Error struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// CreateRequest is the body of POST /uploads.
type CreateRequest struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	// SHA256 is the whole file's SHA-256, 64 hex characters: required for
	// a single PUT (S3 checks it), optional for a multipart upload (S3
	// cannot check it; each part's SHA-256 is checked instead).
	SHA256 string `json:"sha256,omitempty"`
	// PartSize, if set, makes the upload multipart: parts of this many
	// bytes (the last one the remainder), MinPartSize to MaxPartSize, at
	// most MaxParts of them.
	PartSize int64 `json:"partSize,omitempty"`
}

// Upload is the body of a 201 from POST /uploads and of the 200s of
// GET /uploads/{uploadId}, complete and abort.
type Upload struct {
	UploadID    string `json:"uploadId"`
	Status      string `json:"status"`
	StorageKey  string `json:"storageKey"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Bytes       int64  `json:"bytes"`
	// SHA256 is the whole file's SHA-256 as the client declared it: always
	// there for a single PUT, for a multipart upload only if the client
	// gave one.
	SHA256 string `json:"sha256,omitempty"`
	// Upload says how to send the bytes of a pending single-PUT upload.
	Upload *PutInstructions `json:"upload,omitempty"`
	// Multipart is set for uploads in parts.
	Multipart *Multipart `json:"multipart,omitempty"`
	// ETag and CompletedAt are set once completed.
	ETag        string `json:"etag,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
	// CompositeSHA256 is S3's checksum of a completed multipart object:
	// base64(SHA-256 of the parts' SHA-256 digests in order), "-", the part
	// count. S3 verified every part against it; it is not the SHA-256 of
	// the whole file, which is the client's declaration (SHA256).
	CompositeSHA256 string `json:"compositeSha256,omitempty"`
}

// PutInstructions describe a presigned PUT. Headers lists every header the
// client must send besides Content-Length, which HTTP clients set from the
// body (and browsers forbid setting).
type PutInstructions struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt string            `json:"expiresAt"` // RFC 3339, UTC
}

// Multipart describes how a multipart upload is cut.
type Multipart struct {
	PartSize  int64 `json:"partSize"`
	PartCount int   `json:"partCount"`
}

// PartCount is the number of parts of size bytes cut into partSize pieces.
func PartCount(size, partSize int64) int {
	if size <= 0 || partSize <= 0 {
		return 0
	}
	// Not (size + partSize - 1) / partSize, which overflows near 2^63.
	n := size / partSize
	if size%partSize != 0 {
		n++
	}
	return int(n)
}

// PartLength is the length of part n (1-based): partSize, or the remainder
// for the last part.
func PartLength(size, partSize int64, n int) int64 {
	start := int64(n-1) * partSize
	return min(partSize, size-start)
}

// SignPartsRequest is the body of POST /uploads/{uploadId}/parts.
type SignPartsRequest struct {
	Parts []PartToSign `json:"parts"`
}

// PartToSign names a part and the SHA-256 (64 hex) of its bytes.
type PartToSign struct {
	PartNumber int    `json:"partNumber"`
	SHA256     string `json:"sha256"`
}

// CompleteRequest is the optional body of POST /uploads/{uploadId}/complete.
// Parts, when given, declares every part's SHA-256 in the signing shape;
// the server compares it with what S3 holds (409 parts_mismatch when they
// differ) and completes with those checksums. SHA256 is the whole file's,
// for a client that computed it while sending and gave none at create.
type CompleteRequest struct {
	Parts  []PartToSign `json:"parts,omitempty"`
	SHA256 string       `json:"sha256,omitempty"`
}

// SignedParts is the 200 body of POST /uploads/{uploadId}/parts.
type SignedParts struct {
	Parts []SignedPart `json:"parts"`
}

// SignedPart is a presigned PUT of one part: its exact length and SHA-256
// are signed, so S3 refuses any other bytes.
type SignedPart struct {
	PartNumber int `json:"partNumber"`
	PutInstructions
}

// PartList is the 200 body of GET /uploads/{uploadId}/parts: the parts S3
// holds, in order.
type PartList struct {
	Parts []StoredPart `json:"parts"`
}

// StoredPart is one part S3 holds.
type StoredPart struct {
	PartNumber int    `json:"partNumber"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"` // 64 lower-case hex
	ETag       string `json:"etag"`
}

// Errors of ParseIdempotencyKey.
var (
	ErrKeyMissing = &RequestError{Code: CodeKeyRequired, Field: "Idempotency-Key", Message: "the Idempotency-Key header is required."}
	ErrKeyInvalid = &RequestError{Code: CodeKeyInvalid, Field: "Idempotency-Key",
		Message: "the Idempotency-Key header must be 16 to 255 visible ASCII characters other than a comma."}
)

// ParseIdempotencyKey returns the key carried by an Idempotency-Key header
// value, by the rule of package keyheader (spaces around it dropped, a
// structured-field string unquoted, no comma, quote or backslash) with this
// API's bounds: MinKeyLen to MaxKeyLen characters.
func ParseIdempotencyKey(header string) (string, error) {
	k, err := keyheader.Parse(header, MinKeyLen)
	switch {
	case errors.Is(err, keyheader.ErrMissing):
		return "", ErrKeyMissing
	case err != nil:
		return "", ErrKeyInvalid
	}
	return k, nil
}
