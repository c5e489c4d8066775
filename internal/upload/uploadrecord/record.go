// Package uploadrecord is an upload's record as the upload service keeps
// it in the record store: its own fields (in recordstore.Record.Data), the
// record decoded with them, the upload a final record states, and the event
// a change of the table makes of it. It calls no AWS service, so the events
// function, which only decodes the table's stream, links no S3 client;
// internal/upload builds on it.
package uploadrecord

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Fields are the service's own attributes of an upload, kept in
// recordstore.Record.Data, which the store encodes with attributevalue.
// Every field is omitempty so that an update can carry only the fields it
// sets.
//
// A pending single PUT's record is billed on every create, replay,
// finalize and heal, by its size, so each value is stored once: the
// upload id is the claim id, and the object key and the answer's body are
// derived from it and the other fields (Decode, and internal/upload's
// recordedBody).
// Records written before that hold object_key, url_expires_at and the
// body itself, and are read as they are.
type Fields struct {
	// ObjectKey is the object's key as a former record held it; a record
	// written now holds KeyPrefix instead, and Decode derives this.
	ObjectKey string `dynamodbav:"object_key,omitempty"`
	// KeyPrefix is the configured prefix the object key was made with: the
	// key is KeyPrefix followed by the upload id. It is the record's, not
	// the deployment's, since a deployment may change its prefix.
	KeyPrefix   string `dynamodbav:"key_prefix,omitempty"`
	Filename    string `dynamodbav:"filename,omitempty"`
	ContentType string `dynamodbav:"content_type,omitempty"`
	Size        int64  `dynamodbav:"size,omitempty"` // AttrSize
	SHA256      Sum256 `dynamodbav:"sha256,omitempty"`
	// URLExpires is when the recorded body's URL stops working (RFC 3339),
	// in a record that holds its body (a former one, or one whose URL
	// internal/upload's compactURL could not cut).
	URLExpires string `dynamodbav:"url_expires_at,omitempty"`
	// PutURL and PutToken are a pending single PUT's presigned URL, cut by
	// compactURL: its body is rebuilt from them and the other fields, and
	// the URL's expiry read from the URL.
	PutURL   string `dynamodbav:"put_url,omitempty"`
	PutToken []byte `dynamodbav:"put_token,omitempty"`
	ETag     string `dynamodbav:"etag,omitempty"`
	// CompletedAt is the time of completion or abort (RFC 3339).
	CompletedAt string `dynamodbav:"completed_at,omitempty"`
	// PartSize is set for multipart uploads only.
	PartSize int64 `dynamodbav:"part_size,omitempty"`
	// S3UploadID is the S3 multipart upload's id.
	S3UploadID string `dynamodbav:"s3_upload_id,omitempty"`
	// Checksum is a multipart object's composite SHA-256 ("base64-N").
	Checksum string `dynamodbav:"checksum_sha256,omitempty"`
}

// Sum256 is a SHA-256 in lower-case hex, as an API states it, stored as
// its 32 bytes (half the size); a former record's hex string reads too.
type Sum256 string

// MarshalDynamoDBAttributeValue stores the sum as binary. Anything but 64
// lower-case hex characters (the upload service's validateCreate and
// checkDeclaration let none through) is stored as the string it is, so
// nothing is lost.
func (s Sum256) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	if len(s) != 2*sha256.Size || strings.ToLower(string(s)) != string(s) {
		return &types.AttributeValueMemberS{Value: string(s)}, nil
	}
	b, err := hex.DecodeString(string(s))
	if err != nil {
		return &types.AttributeValueMemberS{Value: string(s)}, nil
	}
	return &types.AttributeValueMemberB{Value: b}, nil
}

// UnmarshalDynamoDBAttributeValue reads the binary form and the string
// form of former records.
func (s *Sum256) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	switch v := av.(type) {
	case *types.AttributeValueMemberB:
		*s = Sum256(hex.EncodeToString(v.Value))
	case *types.AttributeValueMemberS:
		*s = Sum256(v.Value)
	default:
		return fmt.Errorf("sha256: want binary or string, got %T", av)
	}
	return nil
}

// AttrSize and AttrSHA256 are the names of Fields.Size, which finalize's
// update requires, and of Fields.SHA256, which a complete sets once.
const AttrSize, AttrSHA256 = "size", "sha256"

// AttrPutURL and AttrPutToken are the names of Fields.PutURL and
// Fields.PutToken, which the update that completes a single PUT removes.
const AttrPutURL, AttrPutToken = "put_url", "put_token"

// Encode encodes f for a claim.
func (f Fields) Encode() (recordstore.Data, error) {
	d, err := recordstore.NewData(f)
	if err != nil {
		return recordstore.Data{}, fmt.Errorf("encode upload fields: %w", err)
	}
	return d, nil
}

// Stored is an upload's record with its fields decoded once.
type Stored struct {
	recordstore.Record
	Fields
}

// Decode decodes rec's fields.
func Decode(rec recordstore.Record) (Stored, error) {
	s := Stored{Record: rec}
	if err := rec.Data.Decode(&s.Fields); err != nil {
		return Stored{}, fmt.Errorf("record %s: %w", rec.ClaimID, err)
	}
	if s.ObjectKey == "" && s.KeyPrefix != "" {
		s.ObjectKey = s.KeyPrefix + rec.ClaimID
	}
	if s.Size <= 0 || s.ObjectKey == "" || s.PartSize < 0 {
		return Stored{}, fmt.Errorf("record %s: size %d, part size %d, object key %q: not an upload", rec.ClaimID, s.Size, s.PartSize, s.ObjectKey)
	}
	return s, nil
}

// Multipart reports whether the upload goes up in parts.
func (s *Stored) Multipart() bool { return s.PartSize > 0 }

// Final reports whether the record is in a final state.
func (s *Stored) Final() bool {
	return s.State == idempotency.StateCompleted || s.State == recordstore.StateAborted
}

// FinalUpload is the upload of a completed or aborted record, as its body
// and its event state it.
func (s *Stored) FinalUpload() api.Upload {
	u := s.Upload()
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

// Upload is the pending body's upload, without instructions.
func (s *Stored) Upload() api.Upload {
	u := api.Upload{
		UploadID: s.ClaimID, Status: api.StatusPending, StorageKey: s.ObjectKey, Filename: s.Filename,
		ContentType: s.ContentType, Bytes: s.Size, SHA256: string(s.SHA256),
	}
	if s.Multipart() {
		u.Multipart = &api.Multipart{PartSize: s.PartSize, PartCount: api.PartCount(s.Size, s.PartSize)}
	}
	return u
}
