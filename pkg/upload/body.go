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
	dataCompletedAt = "completed_at" // RFC 3339, of completion or abort
	dataPartSize    = "part_size"    // set for multipart uploads only
	dataS3UploadID  = "s3_upload_id" // the S3 multipart upload's id
	dataChecksum    = "checksum_sha256"
	dataStatus      = "status" // "aborted" on an aborted, final record
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
//
// A final record is either completed or, for a multipart upload, aborted.
func completedBody(rec idempotency.Record) ([]byte, error) {
	u, err := uploadFromRecord(rec)
	if err != nil {
		return nil, err
	}
	if rec.Data[dataStatus] == api.StatusAborted {
		u.Status = api.StatusAborted
		return encode(u)
	}
	u.Status = api.StatusCompleted
	u.ETag = rec.Data[dataETag]
	u.CompletedAt = rec.Data[dataCompletedAt]
	u.CompositeSHA256 = rec.Data[dataChecksum]
	return encode(u)
}

func uploadFromRecord(rec idempotency.Record) (api.Upload, error) {
	d := rec.Data
	size, err := strconv.ParseInt(d[dataSize], 10, 64)
	if err != nil {
		return api.Upload{}, fmt.Errorf("record %s: bad size %q", rec.ClaimID, d[dataSize])
	}
	u := api.Upload{
		UploadID: rec.ClaimID, Status: api.StatusPending, StorageKey: d[dataObjectKey], Filename: d[dataFilename],
		ContentType: d[dataContentType], Bytes: size, SHA256: d[dataSHA256],
	}
	if d[dataPartSize] != "" {
		partSize, err := strconv.ParseInt(d[dataPartSize], 10, 64)
		if err != nil || partSize <= 0 {
			return api.Upload{}, fmt.Errorf("record %s: bad part size %q", rec.ClaimID, d[dataPartSize])
		}
		u.Multipart = &api.Multipart{PartSize: partSize, PartCount: api.PartCount(size, partSize)}
	}
	return u, nil
}

// unquoteETag drops the quotes S3 keeps around an ETag in headers (events
// from AWS carry it bare).
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }
