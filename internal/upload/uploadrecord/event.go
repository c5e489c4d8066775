package uploadrecord

import (
	"fmt"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Event is what one change of an upload's record tells the application:
// an Upload Completed or Upload Aborted event's detail-type and detail.
type Event struct {
	DetailType string
	Detail     api.EventDetail
}

// EventOf returns the event of one change of the table, the record before
// and after it as a stream record's old and new images hold them
// (idempotency.Schema.DecodeItem decodes them; before is nil for an insert,
// or an old image that is not a record, after nil for a deletion), and
// false for a change that is not an upload's transition into completed or
// aborted. Only the transition counts: a later write to a final record
// (none is made today) or a repeat of the same image yields nothing, so
// each upload yields one event per final state it reaches. A final record
// that is not an upload's is an error, so that it is seen rather than
// skipped.
func EventOf(bucket string, before, after *recordstore.Record) (Event, bool, error) {
	if after == nil {
		return Event{}, false, nil // a deletion: TTL housekeeping or a released claim
	}
	rec := *after
	if rec.State != idempotency.StateCompleted && rec.State != recordstore.StateAborted {
		return Event{}, false, nil
	}
	if before != nil && before.ClaimID == rec.ClaimID && before.State == rec.State {
		return Event{}, false, nil
	}
	s, err := Decode(rec)
	if err != nil {
		return Event{}, false, fmt.Errorf("upload event: %w", err)
	}
	// The detail is the final body's upload (one mapping of a record to
	// its outcome), with what only the event states.
	u := s.FinalUpload()
	d := api.EventDetail{
		UploadID: u.UploadID, Status: u.Status, Tenant: s.Tenant, Bucket: bucket, StorageKey: u.StorageKey,
		Filename: u.Filename, ContentType: u.ContentType, Bytes: u.Bytes, SHA256: u.SHA256,
		CompositeSHA256: u.CompositeSHA256, ETag: u.ETag, CompletedAt: u.CompletedAt,
	}
	if u.Multipart != nil {
		d.PartSize, d.PartCount = u.Multipart.PartSize, u.Multipart.PartCount
	}
	if u.Status == api.StatusAborted {
		d.AbortedAt = s.CompletedAt // an abort records its time where a completion does
		return Event{DetailType: api.DetailTypeUploadAborted, Detail: d}, true, nil
	}
	return Event{DetailType: api.DetailTypeUploadCompleted, Detail: d}, true, nil
}
