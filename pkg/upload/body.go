package upload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Statuses of an upload as the API reports them.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
)

// Upload is the body of a 201 from POST /uploads and of a 200 from
// GET /uploads/{uploadId}. Clients decode it too.
type Upload struct {
	UploadID    string `json:"uploadId"`
	Status      string `json:"status"`
	StorageKey  string `json:"storageKey"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	// Upload says how to send the bytes; only while pending.
	Upload *PutInstructions `json:"upload,omitempty"`
	// ETag and CompletedAt are set once completed.
	ETag        string `json:"etag,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
}

// PutInstructions describe the presigned PUT. Headers lists every header
// the client must send besides Content-Length, which HTTP clients set from
// the body (and browsers forbid setting).
type PutInstructions struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt string            `json:"expiresAt"` // RFC 3339, UTC
}

// Keys of the attributes the service records in idempotency.Record.Data.
const (
	dataObjectKey   = "object_key"
	dataFilename    = "filename"
	dataContentType = "content_type"
	dataSize        = "size"
	dataSHA256      = "sha256"
	dataURLExpires  = "url_expires_at" // RFC 3339
	dataETag        = "etag"
	dataCompletedAt = "completed_at" // RFC 3339
)

// encode renders a body as compact JSON. HTML escaping is off: the body is
// JSON for API clients, and "a&b.jpg" reads better than "a\u0026b.jpg".
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode body: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// completedBody renders the final response of a completed record. Finalize
// records its parts (etag, completion time) with one UpdateItem, so the body
// is rendered from the record; the rendering is deterministic, so every
// replay returns the same bytes.
func completedBody(rec idempotency.Record) ([]byte, error) {
	u, err := uploadFromRecord(rec)
	if err != nil {
		return nil, err
	}
	u.Status = StatusCompleted
	u.ETag = rec.Data[dataETag]
	u.CompletedAt = rec.Data[dataCompletedAt]
	return encode(u)
}

func uploadFromRecord(rec idempotency.Record) (Upload, error) {
	d := rec.Data
	size, err := strconv.ParseInt(d[dataSize], 10, 64)
	if err != nil {
		return Upload{}, fmt.Errorf("record %s: bad size %q", rec.ClaimID, d[dataSize])
	}
	return Upload{
		UploadID: rec.ClaimID, Status: StatusPending, StorageKey: d[dataObjectKey], Filename: d[dataFilename],
		ContentType: d[dataContentType], Bytes: size, SHA256: d[dataSHA256],
	}, nil
}

// unquoteETag drops the quotes S3 keeps around an ETag in headers (events
// from AWS carry it bare).
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }
