package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/internal/recordstore"
	"github.com/onceupload/onceupload/internal/recordstore/dynamostore"
)

// Store keeps the records MakeIdempotent reads and writes: [DynamoStore]
// on a table, [MemoryStore] in tests, or a store of your own.
type Store interface {
	// Claim claims rec.ID in progress for rec.Lease (or the store's
	// Options.Lease), with one conditional write that also brings back the
	// record holding the key, if one does: its ClaimResult is a replay when
	// that record has rec's fingerprint and is not in progress, and the
	// error is an *InProgressError while its lease runs, a *ConflictError
	// wrapping ErrKeyReused for another fingerprint. An expired record
	// counts as absent. The caller fills ID, Tenant, ClaimID (unique per
	// claim), Fingerprint and optionally Lease; State is StateInProgress or
	// empty.
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

var (
	_ Store = (*DynamoStore)(nil)
	_ Store = (*MemoryStore)(nil)
)

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
	DefaultTTL = recordstore.DefaultTTL
	// DefaultLease is how long an in-progress claim blocks its key when the
	// claim does not ask for a lease of its own (Record.Lease).
	DefaultLease = recordstore.DefaultLease
)

// Options configure a DynamoStore or a MemoryStore.
type Options struct {
	// TTL is how long a record lives after it is claimed. Defaults to
	// DefaultTTL.
	TTL time.Duration
	// Lease is how long an in-progress claim blocks other requests before
	// it may be taken over, unless the claim sets Record.Lease. Defaults to
	// DefaultLease.
	Lease time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Schema names the table's key and attributes (DynamoStore only).
	// Defaults to DefaultSchema; each empty field takes its default.
	Schema Schema
}

// engineOptions applies optFns to the engine's options, its defaults
// first.
func engineOptions(optFns []func(*Options)) func(*recordstore.Options) {
	return func(e *recordstore.Options) {
		o := Options{TTL: e.TTL, Lease: e.Lease, Now: e.Now}
		for _, fn := range optFns {
			fn(&o)
		}
		e.TTL, e.Lease, e.Now, e.Schema = o.TTL, o.Lease, o.Now, o.Schema.engine()
	}
}

// DynamoDBAPI is the part of the SDK's DynamoDB client the store uses, in
// its exact method signatures: pass your own *dynamodb.Client (with its
// middleware, endpoint and retry settings), or a fake in tests.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// withoutQuery is a client for the engine, which queries only to count
// groups, which this package never does.
type withoutQuery struct{ DynamoDBAPI }

func (withoutQuery) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, errors.New("idempotency: a store without groups sends no Query")
}

// DynamoStore is a Store on one DynamoDB table, laid out as its Schema
// says: by default a string partition key "pk" and the TTL attribute
// "expires_at". Every call is one round trip: a claim is one conditional
// PutItem that asks for the holder with
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so its replay is too (with
// one strongly consistent GetItem more from a server that does not return
// the holder); Get is a consistent GetItem, Complete a conditional
// UpdateItem, Release a conditional DeleteItem.
type DynamoStore struct {
	adapter
	dynamo *dynamostore.Store
}

// NewDynamoStore returns a store on table. A Schema whose names collide
// makes every operation fail with the error of Schema.Validate.
func NewDynamoStore(client DynamoDBAPI, table string, optFns ...func(*Options)) *DynamoStore {
	e := dynamostore.New(withoutQuery{client}, table, engineOptions(optFns))
	return &DynamoStore{adapter: adapter{e}, dynamo: e}
}

// TableName returns the table the store writes to.
func (s *DynamoStore) TableName() string { return s.dynamo.TableName() }

// MemoryStore is an in-memory Store with the same semantics as
// DynamoStore, for fast tests of code built on this package: both run on
// the same engine, whose conformance tests hold its in-memory and
// DynamoDB forms to the same cases.
type MemoryStore struct {
	adapter
	memory *recordstore.MemoryStore
}

// NewMemoryStore returns an empty store with the same Options as
// NewDynamoStore.
func NewMemoryStore(optFns ...func(*Options)) *MemoryStore {
	e := recordstore.NewMemoryStore(engineOptions(optFns))
	return &MemoryStore{adapter: adapter{e}, memory: e}
}

// Len returns how many records are stored, live or expired.
func (m *MemoryStore) Len() int { return m.memory.Len() }

// adapter is Store on the engine: the engine's records, states and errors
// as this package's.
type adapter struct{ engine recordstore.Store }

// Claim is Store.Claim.
func (a adapter) Claim(ctx context.Context, rec Record) (ClaimResult, error) {
	if rec.State != "" && rec.State != StateInProgress {
		return ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed; a claim is in progress", rec.ID, rec.State)
	}
	res, err := a.engine.Claim(ctx, recordstore.Record{
		ID: recordstore.ID(rec.ID), Tenant: rec.Tenant, ClaimID: rec.ClaimID, Fingerprint: rec.Fingerprint,
		State: recordstore.StateInProgress, Lease: rec.Lease,
	})
	if err != nil {
		return ClaimResult{}, publicError(err)
	}
	return ClaimResult{Record: record(res.Record), Replayed: res.Replayed}, nil
}

// Get is Store.Get.
func (a adapter) Get(ctx context.Context, id ID) (Record, error) {
	r, err := a.engine.Get(ctx, recordstore.ID(id))
	return record(r), err
}

// Complete is Store.Complete.
func (a adapter) Complete(ctx context.Context, id ID, claimID string, resp Response) (Record, error) {
	engineResp := recordstore.Response(resp)
	r, err := a.engine.Update(ctx, recordstore.ID(id), claimID, recordstore.Update{State: recordstore.StateCompleted, Response: &engineResp})
	if err != nil {
		return Record{}, publicError(err)
	}
	return record(r), nil
}

// Release is Store.Release.
func (a adapter) Release(ctx context.Context, id ID, claimID string) error {
	return a.engine.Release(ctx, recordstore.ID(id), claimID)
}

// JudgeClaim is what a claim of rec gets when holder, live at now (neither
// expired nor an in-progress claim whose lease ran out), holds rec.ID: the
// answer of this package's stores, for a Store of one's own that reads the
// holder in its claim's round trip. It is rec's own claim again (a retry
// that met the write it made) if holder has rec's claim id and
// fingerprint; else a *ConflictError wrapping ErrKeyReused for another
// fingerprint, an *InProgressError while holder's lease runs, and a replay
// of holder once it is completed.
func JudgeClaim(rec, holder Record, now time.Time) (ClaimResult, error) {
	res, err := recordstore.JudgeHolder(engineRecord(rec), engineRecord(holder), now)
	if err != nil {
		return ClaimResult{}, publicError(err)
	}
	return ClaimResult{Record: holder, Replayed: res.Replayed}, nil
}

// engineRecord is r as the engine's record.
func engineRecord(r Record) recordstore.Record {
	return recordstore.Record{
		ID: recordstore.ID(r.ID), Tenant: r.Tenant, ClaimID: r.ClaimID, Fingerprint: r.Fingerprint, State: recordstore.State(r.State),
		Response: recordstore.Response(r.Response), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ExpiresAt: r.ExpiresAt, LeaseExpiresAt: r.LeaseExpiresAt, Lease: r.Lease,
	}
}
