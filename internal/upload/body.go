package upload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// stateAborting is a pending multipart upload whose abort has begun: if the
// abort stops half-way, whoever finds the S3 upload gone knows it was
// aborted. The record's other states are the record store's: in progress (a
// multipart create's lease), pending, aborted and completed.
const stateAborting idempotency.State = "aborting"

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
func finalBody(s uploadrecord.Stored) ([]byte, error) { return encode(s.FinalUpload()) }

// unquoteETag drops the quotes S3 keeps around an ETag in headers (events
// from AWS carry it bare).
func unquoteETag(etag string) string { return strings.Trim(etag, `"`) }
