package recordstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ID addresses one record: the first 128 bits of SHA-256 over (tenant, key),
// as 32 lower-case hex characters. It has a fixed length whatever the key, so
// no raw client text becomes a partition key, and it spreads keys evenly over
// DynamoDB partitions.
type ID string

// IDLen is the length of an [ID] in characters.
const IDLen = 32

// NewID derives the ID of a tenant's key. The tenant is length-prefixed so
// that no (tenant, key) pair can be shifted into another.
func NewID(tenant, key string) ID {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(tenant), tenant)
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return ID(hex.EncodeToString(h.Sum(sum[:0])[:IDLen/2]))
}

// ParseID checks that s has the shape of an ID.
func ParseID(s string) (ID, error) {
	if len(s) != IDLen || !isLowerHex(s) {
		return "", fmt.Errorf("parse id %q: want %d lower-case hex characters", s, IDLen)
	}
	return ID(s), nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// State is the lifecycle state of a record.
type State string

const (
	// StateInProgress: claimed, work under way; other requests for the key
	// get ErrInProgress until the lease runs out.
	StateInProgress State = "in_progress"
	// StatePending: the response is recorded, and the work it started (for
	// example an upload) has not finished yet.
	StatePending State = "pending"
	// StateCompleted: final. No update moves a record out of it.
	StateCompleted State = "completed"
	// StateAborted: final; the work was abandoned (an upload aborted by its
	// client), and the recorded response says so.
	StateAborted State = "aborted"
)

// A caller may keep states of its own between a claim and a final state
// (internal/upload's "aborting"): the store treats any state other than these
// like StatePending.

// Response is a recorded answer: a compact JSON body. It holds no status
// code: the caller chooses how to answer (internal/upload returns results
// and the presign handler picks the HTTP status).
type Response struct {
	Body []byte
}

// Record is one claim of a key.
type Record struct {
	ID          ID
	Tenant      string
	ClaimID     string
	Fingerprint string
	State       State
	Response    Response
	// Data holds the caller's own fields (for example an upload's object
	// key and size): see NewData and Data.Decode.
	Data      Data
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the record stops existing for this package. Stored
	// with one-second precision as the table's TTL attribute.
	ExpiresAt time.Time
	// LeaseExpiresAt is when an in-progress claim may be taken over.
	LeaseExpiresAt time.Time
	// Lease, when positive, is how long this in-progress claim holds its
	// key, in place of the store's Options.Lease: a claim whose work has a
	// known deadline (a Lambda invocation's remaining time) asks for it.
	// Not stored; LeaseExpiresAt is.
	Lease time.Duration
	// Group, if not empty, makes the record one of a group whose live,
	// unfinished records a GroupCounter counts: internal/upload puts a tenant's
	// multipart uploads in one, to cap how many it keeps open. A claim sets
	// it; the update that moves the record to a final state (StateCompleted
	// or StateAborted) removes it in the same write. So a record counts
	// from its claim until it is finished, released, expired or replaced
	// by a newer claim of its key, and no counter can drift: the count is
	// of records, never kept beside them. Stored in Schema.Group, the
	// partition key of the sparse index Schema.GroupIndex.
	Group string
}

// Expired reports whether the record counts as absent at now. It matches the
// condition the store writes, `expires_at < :now` in epoch seconds.
func (r *Record) Expired(now time.Time) bool {
	return r.ExpiresAt.Unix() < now.Unix()
}

// Sentinel errors callers branch on. Errors returned by the store wrap them,
// so test with errors.Is.
var (
	// ErrNotFound: no record, an expired one, or one of another claim.
	ErrNotFound = errors.New("idempotency: no such record")
	// ErrKeyReused: the key was claimed by a request with another fingerprint.
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
	// ErrInProgress: the key is claimed and its work is under way.
	ErrInProgress = errors.New("idempotency: request in progress")
	// ErrAlreadyCompleted: the record is completed; an update is a duplicate.
	ErrAlreadyCompleted = errors.New("idempotency: record already completed")
	// ErrAborted: the record is aborted, a final state; no update applies.
	ErrAborted = errors.New("idempotency: record aborted")
	// ErrMismatch: the record exists for this claim but a required data field
	// differs (see Update.Require and Update.RequireAbsentOrEqual).
	ErrMismatch = errors.New("idempotency: record does not match")
	// ErrUnavailable: DynamoDB throttled the call or could not be reached
	// after the client's own retries. Safe to retry later.
	ErrUnavailable = errors.New("idempotency: store unavailable")
)

// InProgressError is returned when a key's claim is in progress. It matches
// ErrInProgress.
type InProgressError struct {
	// RetryAfter is how long until the lease runs out (at least one second).
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: request in progress, retry after %s", e.RetryAfter)
}

// RetryAfterSeconds is the Retry-After header's value for e: RetryAfter
// rounded up to whole seconds, at least one, so a client that waits it
// never comes back before the lease runs out. Every answer that carries
// the header uses it.
func (e *InProgressError) RetryAfterSeconds() int {
	return RetryAfterSeconds(e.RetryAfter)
}

// RetryAfterSeconds is d as a Retry-After value: rounded up to whole
// seconds, at least one.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// ConflictError carries the existing record when an operation finds one it
// may not use: ErrKeyReused, ErrAlreadyCompleted, ErrAborted or ErrMismatch.
type ConflictError struct {
	Err      error
	Existing Record
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v (claim %s, state %s)", e.Err, e.Existing.ClaimID, e.Existing.State)
}

func (e *ConflictError) Unwrap() error { return e.Err }
