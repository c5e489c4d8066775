package idempotency

import (
	"errors"
	"fmt"
	"time"

	"github.com/onceupload/onceupload/internal/recordstore"
)

// ID addresses one record: the first 128 bits of SHA-256 over (scope,
// key), as 32 lower-case hex characters. It has a fixed length whatever
// the key, so no raw client text becomes a partition key, and it spreads
// keys evenly over DynamoDB partitions.
type ID string

// IDLen is the length of an [ID] in characters.
const IDLen = recordstore.IDLen

// NewID derives the ID of a key within a scope (MakeIdempotent's
// HandlerOptions.Scope). The scope is length-prefixed so that no (scope,
// key) pair can be shifted into another.
func NewID(scope, key string) ID { return ID(recordstore.NewID(scope, key)) }

// ParseID checks that s has the shape of an ID.
func ParseID(s string) (ID, error) {
	id, err := recordstore.ParseID(s)
	return ID(id), err
}

// State is the lifecycle state of a record.
type State string

const (
	// StateInProgress: claimed, the handler at work; other requests for
	// the key get ErrInProgress until the lease runs out.
	StateInProgress = State(recordstore.StateInProgress)
	// StateCompleted: the response is recorded, and every retry gets it.
	StateCompleted = State(recordstore.StateCompleted)
)

// Response is a recorded answer: a compact JSON body (MakeIdempotent's
// handler's result).
type Response struct {
	Body []byte
}

// Record is one claim of a key, as the store holds it.
type Record struct {
	ID ID
	// Tenant is the scope the key was claimed in.
	Tenant string
	// ClaimID is unique per claim, so that late work for an earlier claim
	// of the key never touches a newer one.
	ClaimID string
	// Fingerprint is the hash of the request that claimed the key.
	Fingerprint string
	State       State
	Response    Response
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// ExpiresAt is when the record stops existing (the table's TTL
	// attribute, in seconds).
	ExpiresAt time.Time
	// LeaseExpiresAt is when an in-progress claim may be taken over.
	LeaseExpiresAt time.Time
	// Lease, when positive, is how long a claim asks to hold its key, in
	// place of the store's Options.Lease (MakeIdempotent asks for the
	// invocation's remaining time). Not stored; LeaseExpiresAt is.
	Lease time.Duration
}

// Expired reports whether the record counts as absent at now.
func (r *Record) Expired(now time.Time) bool {
	return r.ExpiresAt.Unix() < now.Unix()
}

// record is the store's record as this package shows it: without the
// fields only the upload service's records have.
func record(r recordstore.Record) Record {
	return Record{
		ID: ID(r.ID), Tenant: r.Tenant, ClaimID: r.ClaimID, Fingerprint: r.Fingerprint, State: State(r.State),
		Response: Response(r.Response), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ExpiresAt: r.ExpiresAt, LeaseExpiresAt: r.LeaseExpiresAt,
	}
}

// Sentinel errors callers branch on. Errors returned by the stores wrap
// them, so test with errors.Is.
var (
	// ErrNotFound: no record, an expired one, or one of another claim.
	ErrNotFound = recordstore.ErrNotFound
	// ErrKeyReused: the key was claimed by a request with another fingerprint.
	ErrKeyReused = recordstore.ErrKeyReused
	// ErrInProgress: the key is claimed and its work is under way.
	ErrInProgress = recordstore.ErrInProgress
	// ErrAlreadyCompleted: the record is completed; completing it again is
	// a duplicate.
	ErrAlreadyCompleted = recordstore.ErrAlreadyCompleted
	// ErrUnavailable: DynamoDB throttled the call or could not be reached
	// after the client's own retries. Safe to retry later.
	ErrUnavailable = recordstore.ErrUnavailable
)

// InProgressError is returned when a key's claim is in progress: its
// RetryAfter is how long until the lease runs out (at least one second).
// It matches ErrInProgress.
type InProgressError = recordstore.InProgressError

// ConflictError carries the existing record when an operation finds one it
// may not use: Err is ErrKeyReused (a claim) or ErrAlreadyCompleted (a
// Complete), which it unwraps to.
type ConflictError struct {
	Err      error
	Existing Record
}

func (e *ConflictError) Error() string {
	// As the engine's ConflictError says it, so a conflict reads the same
	// from every store.
	return fmt.Sprintf("%v (claim %s, state %s)", e.Err, e.Existing.ClaimID, e.Existing.State)
}

func (e *ConflictError) Unwrap() error { return e.Err }

// publicError is the store's err with a conflict's record made this
// package's: errors.As finds a *ConflictError carrying a Record, and the
// message and sentinel stay the store's.
func publicError(err error) error {
	var conflict *recordstore.ConflictError
	if !errors.As(err, &conflict) {
		return err
	}
	return &converted{msg: err.Error(), err: &ConflictError{Err: conflict.Err, Existing: record(conflict.Existing)}}
}

// keyReused is the error a claim for another request under rec's key gets
// from the stores, for a request the local cache refuses.
func keyReused(rec Record) error {
	return publicError(&recordstore.ConflictError{Err: recordstore.ErrKeyReused, Existing: engineRecord(rec)})
}

// converted says what the store said, and unwraps to this package's error.
type converted struct {
	msg string
	err error
}

func (c *converted) Error() string { return c.msg }
func (c *converted) Unwrap() error { return c.err }
