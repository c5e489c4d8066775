package recordstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Store is what callers of this package depend on: dynamostore.Store on a
// table, [MemoryStore] in tests.
type Store interface {
	Claim(ctx context.Context, rec Record) (ClaimResult, error)
	Get(ctx context.Context, id ID) (Record, error)
	Update(ctx context.Context, id ID, claimID string, u Update) (Record, error)
	Release(ctx context.Context, id ID, claimID string) error
	// TTL is how long a record lives after its claim, and after an update
	// that restarts its expiry (Options.TTL).
	TTL() time.Duration
	// Now is the store's clock (Options.Now): the time expiry and leases
	// are judged by, so a caller that compares times with a record's reads
	// this one.
	Now() time.Time
}

// GroupCounter counts the records of a group (Record.Group). Both stores
// (dynamostore.Store and MemoryStore) are one; a Store of your own need not
// be, unless its caller counts (internal/upload does when it caps a
// tenant's multipart uploads).
type GroupCounter interface {
	CountGroup(ctx context.Context, group string, except ID) (int, error)
}

// Defaults of Options.
const (
	// DefaultTTL is how long a record lives after its claim.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long an in-progress claim blocks its key when the
	// claim does not ask for a lease of its own (Record.Lease).
	DefaultLease = 30 * time.Second
)

// Options configure a dynamostore.Store or a MemoryStore.
type Options struct {
	// TTL is how long a record lives after it is claimed (and after an
	// update that asks to restart it). Defaults to DefaultTTL.
	TTL time.Duration
	// Lease is how long an in-progress claim blocks other requests before it
	// may be taken over, unless the claim sets Record.Lease. Defaults to
	// DefaultLease.
	Lease time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Schema names the table's key and attributes (dynamostore.Store only).
	// Defaults to DefaultSchema; each empty field takes its default.
	Schema Schema
}

// NewOptions returns the defaults with optFns applied, as both stores
// take them.
func NewOptions(optFns []func(*Options)) Options {
	o := Options{TTL: DefaultTTL, Lease: DefaultLease, Now: time.Now}
	for _, fn := range optFns {
		fn(&o)
	}
	return o
}

// Stamp sets what a claim at now records besides the caller's fields:
// timestamps, expiry, the lease of an in-progress claim, and a non-nil Data.
// Times have the precision they are stored with.
func (o *Options) Stamp(rec Record, now time.Time) Record {
	rec.CreatedAt, rec.UpdatedAt = truncMillis(now), truncMillis(now)
	rec.ExpiresAt = time.Unix(now.Add(o.TTL).Unix(), 0)
	rec.LeaseExpiresAt = time.Time{}
	if rec.State == StateInProgress {
		lease := o.Lease
		if rec.Lease > 0 {
			lease = rec.Lease
		}
		rec.LeaseExpiresAt = truncMillis(now.Add(lease))
	}
	rec.Lease = 0
	if rec.Data.m == nil {
		rec.Data.m = map[string]types.AttributeValue{}
	}
	return rec
}

// ClaimResult says how a claim ended.
type ClaimResult struct {
	// Record is the new record, or for a replay the one that holds the key.
	Record Record
	// Replayed is true when an earlier claim with the same fingerprint holds
	// the key: answer with Record.Response instead of doing the work again.
	Replayed bool
}

// JudgeHolder decides what a claimant of rec gets when holder, live at now,
// has the key: both stores answer with it, and pkg/idempotency's JudgeClaim
// lends it to stores of their own.
func JudgeHolder(rec, holder Record, now time.Time) (ClaimResult, error) {
	if holder.ClaimID == rec.ClaimID && holder.Fingerprint == rec.Fingerprint {
		// Our own claim: the put was written but its answer lost, and the
		// client's retry met it. The claim is ours, not a replay.
		return ClaimResult{Record: holder}, nil
	}
	if holder.Fingerprint != rec.Fingerprint {
		return ClaimResult{}, &ConflictError{Err: ErrKeyReused, Existing: holder}
	}
	if holder.State == StateInProgress {
		wait := time.Duration(RetryAfterSeconds(holder.LeaseExpiresAt.Sub(now))) * time.Second
		return ClaimResult{}, &InProgressError{RetryAfter: wait}
	}
	return ClaimResult{Record: holder, Replayed: true}, nil
}

// Update is a conditional change to a live record of one claim.
type Update struct {
	// State is the new state: any state but StateInProgress. StateCompleted
	// and StateAborted are final: no update moves a record out of them.
	State State
	// Response, if not nil, replaces the recorded response.
	Response *Response
	// Data, if not nil, holds fields to set (merged into the record's
	// Data): a struct with dynamodbav tags or a map[string]any, encoded as
	// NewData encodes it (omitempty leaves a field as it is).
	Data any
	// RemoveData names Data fields to delete, in the same write; a name
	// that is absent is no error. A name may not also be one Data sets:
	// DynamoDB refuses an update that both sets and removes a path.
	RemoveData []string
	// Require lists Data fields that must hold these values, or the update
	// fails with ErrMismatch. Values are encoded as attributevalue.Marshal
	// encodes them and compared as DynamoDB compares them: a number is not
	// the string of its digits.
	Require map[string]any
	// RequireAbsentOrEqual lists Data fields that must be absent or hold
	// these values (compared as for Require), or the update fails with
	// ErrMismatch: with the same fields in Data, a value is set only by
	// the first update that gives one, and every later update must give
	// the same (first writer wins, even among concurrent updates).
	RequireAbsentOrEqual map[string]any
	// From, if set, is the state the record must be in, or the update fails
	// with ErrMismatch: an update that only means to renew a record never
	// undoes a state another request set meanwhile.
	From State
	// RestartExpiry sets the record to expire one TTL from now.
	RestartExpiry bool
	// Revive applies the update to the claim's record even if it has
	// expired, for work the claim started that finished late (an object S3
	// accepted through the claim's URL, announced after the expiry). The
	// claim id still must match, so a newer claim of the key is never
	// touched. Use it with RestartExpiry.
	Revive bool
}

// EncodedUpdate is an Update with its fields encoded, as both stores
// apply it.
type EncodedUpdate struct {
	Update
	// SetValues are Data's fields, RequireValues and AbsentOrEqualValues
	// Require's and RequireAbsentOrEqual's, in name order.
	SetValues                          map[string]types.AttributeValue
	RequireValues, AbsentOrEqualValues []Field
	// RemoveNames are RemoveData's names, sorted, each once: DynamoDB
	// refuses a path named twice.
	RemoveNames []string
}

// Encode encodes u's fields, and refuses an update no store may apply.
func (u Update) Encode() (EncodedUpdate, error) {
	if u.State == "" || u.State == StateInProgress {
		return EncodedUpdate{}, fmt.Errorf("state %q is not a target", u.State)
	}
	enc := EncodedUpdate{Update: u}
	if u.Data != nil {
		d, err := NewData(u.Data)
		if err != nil {
			return EncodedUpdate{}, err
		}
		enc.SetValues = d.m
	}
	var err error
	if enc.RequireValues, err = fieldValues(u.Require); err != nil {
		return EncodedUpdate{}, err
	}
	if enc.AbsentOrEqualValues, err = fieldValues(u.RequireAbsentOrEqual); err != nil {
		return EncodedUpdate{}, err
	}
	if err := cmp.Or(checkNames(enc.SetValues), checkNames(u.Require), checkNames(u.RequireAbsentOrEqual)); err != nil {
		return EncodedUpdate{}, err
	}
	enc.RemoveNames = slices.Compact(slices.Sorted(slices.Values(u.RemoveData)))
	for _, k := range enc.RemoveNames {
		if err := checkName(k); err != nil {
			return EncodedUpdate{}, err
		}
		if _, ok := enc.SetValues[k]; ok {
			return EncodedUpdate{}, fmt.Errorf("data field %q: both set and removed", k)
		}
	}
	return enc, nil
}

// checkNames refuses a data field name that an expression's document path
// cannot hold: it cannot escape brackets.
func checkNames[V any](fields map[string]V) error {
	for k := range fields {
		if err := checkName(k); err != nil {
			return err
		}
	}
	return nil
}

func checkName(k string) error {
	if k == "" || strings.ContainsAny(k, "[]") {
		return fmt.Errorf("data field %q: want a name without brackets", k)
	}
	return nil
}

// UpdateRefusal says why an update of (id, claimID) at now found old (nil:
// no record) instead of a record it could change. Both stores use it.
func UpdateRefusal(id ID, claimID string, u Update, old *Record, now time.Time) error {
	switch {
	case old == nil || old.Expired(now) && !u.Revive || old.ClaimID != claimID:
		return fmt.Errorf("update %s claim %s: %w", id, claimID, ErrNotFound)
	case old.State == StateCompleted:
		return fmt.Errorf("update %s: %w", id, &ConflictError{Err: ErrAlreadyCompleted, Existing: *old})
	case old.State == StateAborted:
		return fmt.Errorf("update %s: %w", id, &ConflictError{Err: ErrAborted, Existing: *old})
	default:
		return fmt.Errorf("update %s: %w", id, &ConflictError{Err: ErrMismatch, Existing: *old})
	}
}

// Classify marks an AWS error that a later retry can cure (see Transient)
// with ErrUnavailable, which an API answers with a 503; other errors are
// returned as they are.
func Classify(err error) error {
	if Transient(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// transientErrors is the SDK's own answer to "would a retry help?": its
// default retryables (its throttle codes, an unmodeled 429, 500, 502, 503,
// 504 and connection errors), and DynamoDB's TransactionConflictException,
// which a table shared with transactional writers can answer.
var transientErrors = retry.IsErrorRetryables(append(slices.Clone(retry.DefaultRetryables),
	retry.RetryableErrorCode{Codes: map[string]struct{}{"TransactionConflictException": {}}}))

// Transient reports whether err from an AWS call is one that a later retry
// can cure, as the SDK's standard retryer decides (throttling, a server
// fault, a network failure), or a deadline that ran out before the call
// could answer. It is asked after the client's own retries gave up.
func Transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return transientErrors.IsErrorRetryable(err) == aws.TrueTernary
}
