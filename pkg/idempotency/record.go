package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ID addresses one record: the first 128 bits of SHA-256 over (scope,
// key), as 32 lower-case hex characters. It has a fixed length whatever
// the key, so no raw client text becomes a partition key, and it spreads
// keys evenly over DynamoDB partitions.
type ID string

// IDLen is the length of an [ID] in characters.
const IDLen = 32

// NewID derives the ID of a key within a scope (MakeIdempotent's
// HandlerOptions.Scope, the upload service's tenant). The scope is
// length-prefixed so that no (scope, key) pair can be shifted into
// another.
func NewID(scope, key string) ID {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(scope), scope)
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

// State is the lifecycle state of a record. A Store's records are in one
// of the two states below; package recordstore adds the states of records
// whose work outlives the request that claimed them.
type State string

const (
	// StateInProgress: claimed, the work under way; other requests for
	// the key get ErrInProgress until the lease runs out.
	StateInProgress State = "in_progress"
	// StateCompleted: the response is recorded, and every retry gets it.
	// Final: nothing moves a record out of it.
	StateCompleted State = "completed"
)

// Response is a recorded answer: a compact JSON body (MakeIdempotent's
// handler's result). It holds no status code: the caller chooses how to
// answer.
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
	// ExpiresAt is when the record stops existing: a store treats it as
	// absent from then on, whenever its storage deletes it (on DynamoDB the
	// table's TTL attribute, in epoch seconds, whose deletion can lag for
	// days).
	ExpiresAt time.Time
	// LeaseExpiresAt is when an in-progress claim may be taken over.
	LeaseExpiresAt time.Time
	// Lease, when positive, is how long a claim asks to hold its key, in
	// place of the store's Options.Lease (MakeIdempotent asks for the
	// invocation's remaining time). Not stored; LeaseExpiresAt is.
	Lease time.Duration
	// NoTakeover, on a claim, keeps an in-progress claim whose lease ran
	// out (its work timed out, or its process died) from being taken over:
	// the claim fails with a *TimedOutError instead, until the record
	// expires or ReleaseTimedOut frees it (HandlerOptions.AfterTimeout).
	// Not stored.
	NoTakeover bool
}

// Expired reports whether the record counts as absent at now: its expiry,
// in whole seconds as stored, is before now's second.
func (r *Record) Expired(now time.Time) bool {
	return r.ExpiresAt.Unix() < now.Unix()
}

// Sentinel errors callers branch on. Errors returned by the stores wrap
// them, so test with errors.Is.
var (
	// ErrNotFound: no record, an expired one, or one of another claim.
	ErrNotFound = errors.New("idempotency: no such record")
	// ErrKeyReused: the key was claimed by a request with another fingerprint.
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
	// ErrInProgress: the key is claimed and its work is under way.
	ErrInProgress = errors.New("idempotency: request in progress")
	// ErrAlreadyCompleted: the record is completed; completing it again is
	// a duplicate.
	ErrAlreadyCompleted = errors.New("idempotency: record already completed")
	// ErrUnavailable: the store throttled the call or could not be reached
	// after the client's own retries. Safe to retry later.
	ErrUnavailable = errors.New("idempotency: store unavailable")
	// ErrTimedOut: the key's claim timed out with its work unfinished, and
	// the claim asked that it not be taken over (Record.NoTakeover): see
	// TimedOutError.
	ErrTimedOut = errors.New("idempotency: an earlier claim timed out")
	// ErrUnknownState: the key is held by a record in a state this package
	// does not know (written by another version, or by hand): it is never
	// replayed and never taken over. See UnknownStateError.
	ErrUnknownState = errors.New("idempotency: record in an unknown state")
)

// TimedOutError is returned to a claim with Record.NoTakeover when the
// key's in-progress claim has timed out: its lease ran out before it
// recorded a response, so its work may or may not have happened. Retries
// get it until the record expires or the application, having looked at
// what the work left, frees the key with ReleaseTimedOut. It matches
// ErrTimedOut.
type TimedOutError struct {
	// Existing is the timed-out claim: its CreatedAt is when it was
	// claimed, its LeaseExpiresAt when it timed out, its ExpiresAt when the
	// key is free again by itself.
	Existing Record
	// Key is the request's idempotency key, when the wrapper that got the
	// error knows it.
	Key string
}

func (e *TimedOutError) Error() string {
	key := ""
	if e.Key != "" {
		key = fmt.Sprintf(" (key %q)", e.Key)
	}
	return fmt.Sprintf("idempotency: record %s%s was claimed at %s and timed out at %s with its work unfinished; "+
		"retries are refused until it expires at %s or is released", e.Existing.ID, key,
		e.Existing.CreatedAt.UTC().Format(time.RFC3339), e.Existing.LeaseExpiresAt.UTC().Format(time.RFC3339),
		e.Existing.ExpiresAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrTimedOut) true.
func (e *TimedOutError) Is(target error) bool { return target == ErrTimedOut }

// UnknownStateError is returned to a claim when the record holding the key
// is in a state this package does not know. It matches ErrUnknownState.
type UnknownStateError struct {
	Existing Record
}

func (e *UnknownStateError) Error() string {
	return fmt.Sprintf("idempotency: record %s (claim %s) is in state %q, which this version does not know: "+
		"it is neither replayed nor taken over", e.Existing.ID, e.Existing.ClaimID, e.Existing.State)
}

// Is makes errors.Is(err, ErrUnknownState) true.
func (e *UnknownStateError) Is(target error) bool { return target == ErrUnknownState }

// InProgressError is returned when a key's claim is in progress. It
// matches ErrInProgress.
type InProgressError struct {
	// RetryAfter is how long until the lease runs out (at least one second).
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: request in progress, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

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

// ConflictError carries the existing record when an operation finds one it
// may not use: Err is ErrKeyReused (a claim) or ErrAlreadyCompleted (a
// Complete), which it unwraps to.
type ConflictError struct {
	Err      error
	Existing Record
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v (claim %s, state %s)", e.Err, e.Existing.ClaimID, e.Existing.State)
}

func (e *ConflictError) Unwrap() error { return e.Err }
