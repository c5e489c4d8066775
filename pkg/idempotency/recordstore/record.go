package recordstore

import (
	"errors"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// The states a record of this package can be in besides
// idempotency.StateInProgress and idempotency.StateCompleted.
const (
	// StatePending: the response is recorded, and the work it started (for
	// example an upload) has not finished yet.
	StatePending idempotency.State = "pending"
	// StateAborted: final; the work was abandoned (an upload aborted by its
	// client), and the recorded response says so.
	StateAborted idempotency.State = "aborted"
)

// A caller may keep states of its own between a claim and a final state
// (the upload service's "aborting"): the stores treat any state other than
// these and idempotency's like StatePending.

// Errors of updates, besides idempotency's sentinels, which the stores'
// errors wrap too.
var (
	// ErrAborted: the record is aborted, a final state; no update applies.
	ErrAborted = errors.New("idempotency: record aborted")
	// ErrMismatch: the record exists for this claim but a required data
	// field or state differs (see Update.Require, RequireAbsentOrEqual and
	// From).
	ErrMismatch = errors.New("idempotency: record does not match")
)

// Record is an idempotency.Record with the fields a caller keeps beside
// it: its own data and, optionally, a group.
type Record struct {
	idempotency.Record
	// Data holds the caller's own fields (for example an upload's object
	// key and size): see NewData and Data.Decode.
	Data Data
	// Group, if not empty, makes the record one of a group whose live,
	// unfinished records a GroupCounter counts: the upload service puts a
	// tenant's multipart uploads in one, to cap how many it keeps open. A
	// claim sets it; the update that moves the record to a final state
	// (idempotency.StateCompleted or StateAborted) removes it in the same
	// write. So a record counts from its claim until it is finished,
	// released, expired or replaced by a newer claim of its key, and no
	// counter can drift: the count is of records, never kept beside them.
	// Stored in Schema.Group, the partition key of the sparse index
	// Schema.GroupIndex.
	Group string
}

// ClaimResult says how a claim ended, as idempotency.ClaimResult does,
// with the whole record.
type ClaimResult struct {
	Record   Record
	Replayed bool
}

// ConflictError carries the existing record when an operation finds one it
// may not use: Err is idempotency.ErrKeyReused, ErrAlreadyCompleted,
// ErrAborted or ErrMismatch, which it unwraps to. It is an
// idempotency.ConflictError with the whole record: errors.As finds either,
// so code written against package idempotency reads a conflict from these
// stores as from any other.
type ConflictError struct {
	idempotency.ConflictError
	// Existing is the record found, with its Data and Group (the embedded
	// ConflictError's Existing is its idempotency.Record).
	Existing Record
}

// NewConflictError returns the conflict err found on existing.
func NewConflictError(err error, existing Record) *ConflictError {
	return &ConflictError{ConflictError: idempotency.ConflictError{Err: err, Existing: existing.Record}, Existing: existing}
}

// As lets errors.As find the conflict as an *idempotency.ConflictError.
func (e *ConflictError) As(target any) bool {
	t, ok := target.(**idempotency.ConflictError)
	if ok {
		*t = &e.ConflictError
	}
	return ok
}
