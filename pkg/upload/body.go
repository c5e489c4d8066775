package upload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

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
	u.Status = api.StatusCompleted
	u.ETag = rec.Data[dataETag]
	u.CompletedAt = rec.Data[dataCompletedAt]
	return encode(u)
}

func uploadFromRecord(rec idempotency.Record) (api.Upload, error) {
	d := rec.Data
	size, err := strconv.ParseInt(d[dataSize], 10, 64)
	if err != nil {
		return api.Upload{}, fmt.Errorf("record %s: bad size %q", rec.ClaimID, d[dataSize])
	}
	return api.Upload{
		UploadID: rec.ClaimID, Status: api.StatusPending, StorageKey: d[dataObjectKey], Filename: d[dataFilename],
		ContentType: d[dataContentType], Bytes: size, SHA256: d[dataSHA256],
	}, nil
}

// unquoteETag drops the quotes S3 keeps around an ETag in headers (events
// from AWS carry it bare).
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }
