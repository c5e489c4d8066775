package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store keeps the records MakeIdempotent reads and writes. This module's
// stores are each in a package of its own, so a program links only the
// one it uses: dynamostore (a DynamoDB table), redisstore (Redis or
// Valkey) and memorystore (in memory, for tests), all held to the same
// cases (package storetest). A store of your own implements these four
// methods.
type Store interface {
	// Claim claims rec.ID in progress for rec.Lease (or the store's
	// Options.Lease), with one conditional write that also brings back the
	// record holding the key, if one does: its ClaimResult is a replay when
	// that record has rec's fingerprint and is not in progress, and the
	// error is an *InProgressError while its lease runs, a *ConflictError
	// wrapping ErrKeyReused for another fingerprint ([JudgeClaim] decides).
	// An expired record counts as absent. The caller fills ID, Tenant,
	// ClaimID (unique per claim), Fingerprint and optionally Lease; State
	// is StateInProgress or empty.
	Claim(ctx context.Context, rec Record) (ClaimResult, error)
	// Get returns the live record of id, or ErrNotFound.
	Get(ctx context.Context, id ID) (Record, error)
	// Complete records resp on the claim (id, claimID), if the record is
	// still that claim's and live: ErrNotFound if not, a *ConflictError
	// wrapping ErrAlreadyCompleted if it is completed already.
	Complete(ctx context.Context, id ID, claimID string, resp Response) (Record, error)
	// Release deletes the in-progress claim (id, claimID), so the key is
	// free at once; a claim that is gone or no longer in progress stays.
	Release(ctx context.Context, id ID, claimID string) error
}

// ClaimResult says how a claim ended.
type ClaimResult struct {
	// Record is the new record, or for a replay the one that holds the key.
	Record Record
	// Replayed is true when an earlier claim with the same fingerprint holds
	// the key: answer with Record.Response instead of doing the work again.
	Replayed bool
}

// Defaults of Options.
const (
	// DefaultTTL is how long a record lives after its claim.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long an in-progress claim blocks its key when the
	// claim does not ask for a lease of its own (Record.Lease).
	DefaultLease = 30 * time.Second
)

// Options configure the stores of packages dynamostore and memorystore.
type Options struct {
	// TTL is how long a record lives after it is claimed (and after an
	// update that restarts its expiry). Defaults to DefaultTTL.
	TTL time.Duration
	// Lease is how long an in-progress claim blocks other requests before
	// it may be taken over, unless the claim sets Record.Lease. Defaults to
	// DefaultLease.
	Lease time.Duration
	// Now is the clock, by which expiry and leases are judged. Defaults to
	// time.Now.
	Now func() time.Time
	// Schema names the table's key and attributes (dynamostore only).
	// Defaults to DefaultSchema; each empty field takes its default.
	Schema Schema
}

// NewOptions returns the defaults with optFns applied, as the stores take
// them.
func NewOptions(optFns ...func(*Options)) Options {
	o := Options{TTL: DefaultTTL, Lease: DefaultLease, Now: time.Now}
	for _, fn := range optFns {
		fn(&o)
	}
	return o
}

// JudgeClaim is what a claim of rec gets when holder, live at now, holds
// rec.ID: the answer of every store of this module, for a Store of one's
// own that reads the holder in its claim's round trip. A store returns the
// holder when it is not expired and is not an in-progress claim whose
// lease ran out (unless rec.NoTakeover: then that one too); an in-progress
// record without a lease holds its key until it expires.
//
// The answer is an *UnknownStateError if holder's state is neither
// StateInProgress nor StateCompleted; rec's own claim again (a retry that
// met the write it made) if holder has rec's claim id and fingerprint; a
// *ConflictError wrapping ErrKeyReused for another fingerprint; while
// holder is in progress, an *InProgressError until its lease (or, without
// one, its expiry), and a *TimedOutError once its lease ran out; and a
// replay of holder once it is completed.
func JudgeClaim(rec, holder Record, now time.Time) (ClaimResult, error) {
	if holder.State != StateInProgress && holder.State != StateCompleted {
		return ClaimResult{}, &UnknownStateError{Existing: holder}
	}
	if holder.ClaimID == rec.ClaimID && holder.Fingerprint == rec.Fingerprint {
		// Our own claim: the write was made but its answer lost, and the
		// client's retry met it. The claim is ours, not a replay.
		return ClaimResult{Record: holder}, nil
	}
	if holder.Fingerprint != rec.Fingerprint {
		return ClaimResult{}, &ConflictError{Err: ErrKeyReused, Existing: holder}
	}
	if holder.State == StateInProgress {
		until := holder.LeaseExpiresAt
		if until.IsZero() {
			// Written by something else, with no lease: held until it
			// expires, never taken over.
			until = holder.ExpiresAt
		} else if rec.NoTakeover && until.Before(now) {
			return ClaimResult{}, &TimedOutError{Existing: holder}
		}
		wait := time.Duration(RetryAfterSeconds(until.Sub(now))) * time.Second
		return ClaimResult{}, &InProgressError{RetryAfter: wait}
	}
	return ClaimResult{Record: holder, Replayed: true}, nil
}

// Free reports whether a claim at now may take id's key from holder: it
// is expired, or an in-progress claim whose lease ran out and the claim
// does not ask to keep it (noTakeover). An in-progress record without a
// lease is held until it expires. It is the condition every store of this
// module writes its claim on, in one form or another.
func Free(holder Record, now time.Time, noTakeover bool) bool {
	if holder.Expired(now) {
		return true
	}
	if holder.State != StateInProgress || holder.LeaseExpiresAt.IsZero() || noTakeover {
		return false
	}
	// Leases are stored in milliseconds.
	return holder.LeaseExpiresAt.Before(time.UnixMilli(now.UnixMilli()))
}

// ReleaseTimedOut frees the key of id when it is held by an in-progress
// claim whose lease ran out at now (the store's clock), which claims with
// Record.NoTakeover refuse with a *TimedOutError: call it once the
// application knows what that claim's work did (or did not do). A key
// that is free already is no error; a claim still in its lease, or a
// completed record, is not released and is an error.
func ReleaseTimedOut(ctx context.Context, store Store, id ID, now time.Time) error {
	rec, err := store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release timed-out %s: %w", id, err)
	}
	if rec.State != StateInProgress || rec.LeaseExpiresAt.IsZero() || !rec.LeaseExpiresAt.Before(now) {
		return fmt.Errorf("release timed-out %s: the record (claim %s, state %s) has not timed out", id, rec.ClaimID, rec.State)
	}
	return store.Release(ctx, id, rec.ClaimID)
}
