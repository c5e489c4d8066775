package upload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/onceupload/onceupload/internal/recordstore"
	"github.com/onceupload/onceupload/pkg/api"
)

// stateAborting is a pending multipart upload whose abort has begun: if the
// abort stops half-way, whoever finds the S3 upload gone knows it was
// aborted. The record's other states are the record store's: in progress (a
// multipart create's lease), pending, aborted and completed.
const stateAborting recordstore.State = "aborting"

// fields are the service's own attributes of an upload, kept in
// recordstore.Record.Data, which the store encodes with attributevalue.
// Every field is omitempty so that an update can carry only the fields it
// sets.
type fields struct {
	ObjectKey   string `dynamodbav:"object_key,omitempty"`
	Filename    string `dynamodbav:"filename,omitempty"`
	ContentType string `dynamodbav:"content_type,omitempty"`
	Size        int64  `dynamodbav:"size,omitempty"` // attrSize
	SHA256      string `dynamodbav:"sha256,omitempty"`
	// URLExpires is when the recorded body's URL stops working (RFC 3339).
	URLExpires string `dynamodbav:"url_expires_at,omitempty"`
	ETag       string `dynamodbav:"etag,omitempty"`
	// CompletedAt is the time of completion or abort (RFC 3339).
	CompletedAt string `dynamodbav:"completed_at,omitempty"`
	// PartSize is set for multipart uploads only.
	PartSize int64 `dynamodbav:"part_size,omitempty"`
	// S3UploadID is the S3 multipart upload's id.
	S3UploadID string `dynamodbav:"s3_upload_id,omitempty"`
	// Checksum is a multipart object's composite SHA-256 ("base64-N").
	Checksum string `dynamodbav:"checksum_sha256,omitempty"`
}

// attrSize and attrSHA256 are the names of fields.Size, which finalize's
// update requires, and of fields.SHA256, which a complete sets once.
const attrSize, attrSHA256 = "size", "sha256"

// attrs encodes f for a claim.
func (f fields) attrs() (recordstore.Data, error) {
	d, err := recordstore.NewData(f)
	if err != nil {
		return recordstore.Data{}, fmt.Errorf("encode upload fields: %w", err)
	}
	return d, nil
}

// stored is an upload's record with its fields decoded once.
type stored struct {
	recordstore.Record
	fields
}

// decodeStored decodes rec's fields.
func decodeStored(rec recordstore.Record) (stored, error) {
	s := stored{Record: rec}
	if err := rec.Data.Decode(&s.fields); err != nil {
		return stored{}, fmt.Errorf("record %s: %w", rec.ClaimID, err)
	}
	if s.Size <= 0 || s.ObjectKey == "" || s.PartSize < 0 {
		return stored{}, fmt.Errorf("record %s: size %d, part size %d, object key %q: not an upload", rec.ClaimID, s.Size, s.PartSize, s.ObjectKey)
	}
	return s, nil
}

// multipart reports whether the upload goes up in parts.
func (s *stored) multipart() bool { return s.PartSize > 0 }

// final reports whether the record is in a final state.
func (s *stored) final() bool {
	return s.State == recordstore.StateCompleted || s.State == recordstore.StateAborted
}

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

// finalBody renders the response of a final record: completed or, for a
// multipart upload, aborted. Finalize records its parts (etag, completion
// time) with one UpdateItem, so the body is rendered from the record; the
// rendering is deterministic, so every replay returns the same bytes.
func finalBody(s stored) ([]byte, error) { return encode(s.finalUpload()) }

// finalUpload is the upload of a completed or aborted record, as its body
// and its event state it.
func (s *stored) finalUpload() api.Upload {
	u := s.upload()
	if s.State == recordstore.StateAborted {
		u.Status = api.StatusAborted
		return u
	}
	u.Status = api.StatusCompleted
	u.ETag = s.ETag
	u.CompletedAt = s.CompletedAt
	u.CompositeSHA256 = s.Checksum
	return u
}

// upload is the pending body's upload, without instructions.
func (s *stored) upload() api.Upload {
	u := api.Upload{
		UploadID: s.ClaimID, Status: api.StatusPending, StorageKey: s.ObjectKey, Filename: s.Filename,
		ContentType: s.ContentType, Bytes: s.Size, SHA256: s.SHA256,
	}
	if s.multipart() {
		u.Multipart = &api.Multipart{PartSize: s.PartSize, PartCount: api.PartCount(s.Size, s.PartSize)}
	}
	return u
}

// unquoteETag drops the quotes S3 keeps around an ETag in headers (events
// from AWS carry it bare).
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }
