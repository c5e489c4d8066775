package recordstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Store is a store of this package's records: dynamostore.Store on a
// table, memorystore.Store in memory. Both are also idempotency.Stores,
// whose methods (Claim, Get, Complete) read and write the
// idempotency.Record inside each Record.
type Store interface {
	// ClaimRecord writes rec as the holder of rec.ID, in one conditional
	// write, if the key is free (never claimed, expired, or an in-progress
	// claim whose lease ran out); else it answers with the holder, judged
	// by JudgeHolder. The caller fills ID, Tenant, ClaimID (unique per
	// claim), Fingerprint, Data, Group and either State=StatePending with
	// Response (or none, for a caller that keeps what it answers with in
	// Data), or State=idempotency.StateInProgress (the store sets the
	// lease). The store sets the timestamps and expiry.
	ClaimRecord(ctx context.Context, rec Record) (ClaimResult, error)
	// GetRecord returns the live record of id, or idempotency.ErrNotFound.
	GetRecord(ctx context.Context, id idempotency.ID) (Record, error)
	// Update applies u to the live record of (id, claimID) and returns it
	// updated: see Update.
	Update(ctx context.Context, id idempotency.ID, claimID string, u Update) (Record, error)
	// Release deletes the in-progress claim (id, claimID) so the key is
	// free at once; a claim that is gone, taken over or no longer in
	// progress stays.
	Release(ctx context.Context, id idempotency.ID, claimID string) error
	// TTL is how long a record lives after its claim, and after an update
	// that restarts its expiry (Options.TTL).
	TTL() time.Duration
	// Now is the store's clock (Options.Now): the time expiry and leases
	// are judged by, so a caller that compares times with a record's reads
	// this one.
	Now() time.Time
}

// GroupCounter counts the records of a group (Record.Group). Both stores
// are one; a Store of your own need not be, unless its caller counts (the
// upload service does when it caps a tenant's multipart uploads).
type GroupCounter interface {
	CountGroup(ctx context.Context, group string, except idempotency.ID) (int, error)
}

// Stamp sets what a claim at now records besides the caller's fields:
// timestamps, expiry, the lease of an in-progress claim, and a non-nil Data.
// Times have the precision they are stored with.
func Stamp(o *idempotency.Options, rec Record, now time.Time) Record {
	rec.CreatedAt, rec.UpdatedAt = TruncMillis(now), TruncMillis(now)
	rec.ExpiresAt = time.Unix(now.Add(o.TTL).Unix(), 0)
	rec.LeaseExpiresAt = time.Time{}
	if rec.State == idempotency.StateInProgress {
		lease := o.Lease
		if rec.Lease > 0 {
			lease = rec.Lease
		}
		rec.LeaseExpiresAt = TruncMillis(now.Add(lease))
	}
	rec.Lease, rec.NoTakeover = 0, false
	if rec.Data.m == nil {
		rec.Data.m = map[string]types.AttributeValue{}
	}
	return rec
}

// Holds reports whether holder keeps its key from a claim at now: the
// negation of idempotency.Free, whose rule dynamostore's claim condition
// writes, for the store that judges in memory.
func Holds(holder Record, now time.Time, noTakeover bool) bool {
	return !idempotency.Free(holder.Record, now, noTakeover)
}

// JudgeHolder decides what a claimant of rec gets when holder, live at now,
// has the key, as idempotency.JudgeClaim does, with the whole holder in
// the answer and in a conflict. Every state of this package's records but
// in progress is answered as completed is: a replay of the recorded
// response (the upload service answers a pending or aborted upload so).
func JudgeHolder(rec, holder Record, now time.Time) (ClaimResult, error) {
	judged := holder.Record
	if judged.State != idempotency.StateInProgress {
		judged.State = idempotency.StateCompleted
	}
	res, err := idempotency.JudgeClaim(rec.Record, judged, now)
	if err != nil {
		// JudgeClaim's errors are its own, unwrapped: asserted, not
		// searched with errors.As, whose target would escape on every
		// claim, replays included.
		if conflict, ok := err.(*idempotency.ConflictError); ok {
			return ClaimResult{}, NewConflictError(conflict.Err, holder)
		}
		return ClaimResult{}, err
	}
	return ClaimResult{Record: holder, Replayed: res.Replayed}, nil
}

// Claim is idempotency.Store's Claim on s: rec claimed in progress, with
// no data of its own. A holder in a state package idempotency does not
// know (a pending or aborted upload, in a table the upload service shares)
// is judged as idempotency.JudgeClaim judges it: an
// *idempotency.UnknownStateError, never a replay.
func Claim(ctx context.Context, s Store, rec idempotency.Record) (idempotency.ClaimResult, error) {
	if rec.State != "" && rec.State != idempotency.StateInProgress {
		return idempotency.ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed; a claim is in progress", rec.ID, rec.State)
	}
	rec.State = idempotency.StateInProgress
	res, err := s.ClaimRecord(ctx, Record{Record: rec})
	holder := res.Record.Record
	if err != nil {
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			return idempotency.ClaimResult{}, err
		}
		holder = conflict.Existing.Record
	}
	if holder.State != idempotency.StateInProgress && holder.State != idempotency.StateCompleted {
		return idempotency.JudgeClaim(rec, holder, s.Now())
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	return idempotency.ClaimResult{Record: holder, Replayed: res.Replayed}, nil
}

// Get is idempotency.Store's Get on s.
func Get(ctx context.Context, s Store, id idempotency.ID) (idempotency.Record, error) {
	r, err := s.GetRecord(ctx, id)
	return r.Record, err
}

// Complete is idempotency.Store's Complete on s: an Update to
// idempotency.StateCompleted with resp.
func Complete(ctx context.Context, s Store, id idempotency.ID, claimID string, resp idempotency.Response) (idempotency.Record, error) {
	r, err := s.Update(ctx, id, claimID, Update{State: idempotency.StateCompleted, Response: &resp})
	return r.Record, err
}

// Update is a conditional change to a live record of one claim.
type Update struct {
	// State is the new state: any state but StateInProgress. StateCompleted
	// and StateAborted are final: no update moves a record out of them.
	State idempotency.State
	// Response, if not nil, replaces the recorded response.
	Response *idempotency.Response
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
	From idempotency.State
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
	if u.State == "" || u.State == idempotency.StateInProgress {
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
func UpdateRefusal(id idempotency.ID, claimID string, u Update, old *Record, now time.Time) error {
	switch {
	case old == nil || old.Expired(now) && !u.Revive || old.ClaimID != claimID:
		return fmt.Errorf("update %s claim %s: %w", id, claimID, idempotency.ErrNotFound)
	case old.State == idempotency.StateCompleted:
		return fmt.Errorf("update %s: %w", id, NewConflictError(idempotency.ErrAlreadyCompleted, *old))
	case old.State == StateAborted:
		return fmt.Errorf("update %s: %w", id, NewConflictError(ErrAborted, *old))
	default:
		return fmt.Errorf("update %s: %w", id, NewConflictError(ErrMismatch, *old))
	}
}

// Admits reports whether u may change r, the record of id at now, for
// claimID: the conditions dynamostore's update writes, for the store that
// checks them in memory.
func (u EncodedUpdate) Admits(r Record, claimID string, now time.Time) bool {
	if r.Expired(now) && !u.Revive || r.ClaimID != claimID ||
		r.State == idempotency.StateCompleted || r.State == StateAborted ||
		u.From != "" && r.State != u.From {
		return false
	}
	for _, f := range u.RequireValues {
		if got, ok := r.Data.m[f.Name]; !ok || !sameValue(got, f.Value) {
			return false
		}
	}
	for _, f := range u.AbsentOrEqualValues {
		if got, ok := r.Data.m[f.Name]; ok && !sameValue(got, f.Value) {
			return false
		}
	}
	return true
}

// Apply returns r with u applied at now, for a store with ttl: the
// writes dynamostore's update makes, for the store that makes them in
// memory. r is not changed.
func (u EncodedUpdate) Apply(r Record, now time.Time, ttl time.Duration) Record {
	r = Clone(r)
	r.State, r.UpdatedAt, r.LeaseExpiresAt = u.State, TruncMillis(now), time.Time{}
	if u.State == idempotency.StateCompleted || u.State == StateAborted {
		r.Group = ""
	}
	if u.Response != nil {
		r.Response = idempotency.Response{Body: append([]byte(nil), u.Response.Body...)}
	}
	if u.RestartExpiry {
		r.ExpiresAt = time.Unix(now.Add(ttl).Unix(), 0)
	}
	maps.Copy(r.Data.m, u.SetValues)
	for _, k := range u.RemoveNames {
		delete(r.Data.m, k)
	}
	return r
}

// Clone returns a copy of r that shares no memory with it.
func Clone(r Record) Record {
	r.Data = r.Data.clone()
	r.Response.Body = append([]byte(nil), r.Response.Body...)
	return r
}

// TruncMillis is t with the millisecond precision the table stores.
func TruncMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// Classify marks an AWS error that a later retry can cure (see Transient)
// with ErrUnavailable, which an API answers with a 503; other errors are
// returned as they are.
func Classify(err error) error {
	if Transient(err) {
		return fmt.Errorf("%w: %w", idempotency.ErrUnavailable, err)
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
