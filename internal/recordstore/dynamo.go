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
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBAPI is the part of the SDK's DynamoDB client the store uses, in
// its exact method signatures: pass your own *dynamodb.Client (with its
// middleware, endpoint and retry settings), or a fake in tests.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	// Query is only sent by CountGroup.
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Store is what callers of this package depend on; [DynamoStore] is the
// implementation, and tests may pass an in-memory one.
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

var _ Store = (*DynamoStore)(nil)

// GroupCounter counts the records of a group (Record.Group). Both stores of
// this package are one; a Store of your own need not be, unless its caller
// counts (internal/upload does when it caps a tenant's multipart uploads).
type GroupCounter interface {
	CountGroup(ctx context.Context, group string, except ID) (int, error)
}

var _ GroupCounter = (*DynamoStore)(nil)

// Defaults of Options.
const (
	// DefaultTTL is how long a record lives after its claim.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long an in-progress claim blocks its key when the
	// claim does not ask for a lease of its own (Record.Lease).
	DefaultLease = 30 * time.Second
)

// Options configure a DynamoStore or a MemoryStore.
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
	// Schema names the table's key and attributes (DynamoStore only).
	// Defaults to DefaultSchema; each empty field takes its default.
	Schema Schema
}

// DynamoStore is a Store on one DynamoDB table, laid out as its Schema
// says: by default a string partition key "pk" and the TTL attribute
// "expires_at".
type DynamoStore struct {
	client DynamoDBAPI
	table  string
	opts   Options
	schema *schema
	// claimNames are claimCondition's attribute names, built once: the
	// SDK only reads them, so every claim shares them.
	claimNames map[string]string
}

// NewDynamoStore returns a store on table. A Schema whose names collide
// makes every operation fail with the error of Schema.Validate.
func NewDynamoStore(client DynamoDBAPI, table string, optFns ...func(*Options)) *DynamoStore {
	opts := newOptions(optFns)
	s := &DynamoStore{client: client, table: table, opts: opts, schema: newSchema(opts.Schema)}
	s.claimNames = map[string]string{"#0": s.schema.PartitionKey, "#1": s.schema.ExpiresAt,
		"#2": s.schema.State, "#3": s.schema.LeaseExpiresAt}
	return s
}

// TTL is Options.TTL.
func (s *DynamoStore) TTL() time.Duration { return s.opts.TTL }

// Now is Options.Now's time.
func (s *DynamoStore) Now() time.Time { return s.opts.Now() }

func newOptions(optFns []func(*Options)) Options {
	o := Options{TTL: DefaultTTL, Lease: DefaultLease, Now: time.Now}
	for _, fn := range optFns {
		fn(&o)
	}
	return o
}

// stamp sets what a claim at now records besides the caller's fields:
// timestamps, expiry, the lease of an in-progress claim, and a non-nil Data.
// Times have the precision they are stored with.
func (o *Options) stamp(rec Record, now time.Time) Record {
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

// Claim writes rec as the holder of rec.ID in one conditional PutItem. The
// caller fills ID, Tenant, ClaimID (unique per claim), Fingerprint, Data and
// either State=StatePending with Response (or none, for a caller that keeps
// what it answers with in Data), or State=StateInProgress (the
// store sets the lease). The store sets the timestamps and expiry.
//
// When the key is held, the holder comes back from the same call: a replay
// if its fingerprint matches, a *ConflictError wrapping ErrKeyReused if not,
// an *InProgressError while an in-progress lease runs.
func (s *DynamoStore) Claim(ctx context.Context, rec Record) (ClaimResult, error) {
	if rec.State != StatePending && rec.State != StateInProgress {
		return ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed", rec.ID, rec.State)
	}
	if s.schema.err != nil {
		return ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, s.schema.err)
	}
	// Two attempts: a holder seen by the put can vanish (expire, be
	// released) before the fallback read sees it.
	for attempt := 0; ; attempt++ {
		now := s.opts.Now()
		// Stamp a copy: stamping consumes rec.Lease, which the second
		// attempt needs as much as the first.
		stamped := s.opts.stamp(rec, now)
		item, err := s.schema.toItem(stamped)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, err)
		}
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(s.table),
			Item:                                item,
			ConditionExpression:                 aws.String(claimCondition),
			ExpressionAttributeNames:            s.claimNames,
			ExpressionAttributeValues:           claimValues(now),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return ClaimResult{Record: stamped}, nil
		}
		holder, err := s.conditionFailureItem(ctx, rec.ID, err)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, err)
		}
		if holder == nil || holder.Expired(now) {
			if attempt == 0 {
				continue
			}
			return ClaimResult{}, fmt.Errorf("claim %s: key held but no live holder found", rec.ID)
		}
		return JudgeHolder(rec, *holder, now)
	}
}

// claimCondition lets a claim succeed on a free key: never claimed (#0,
// the partition key), expired (#1 < :0, now in seconds), or an
// in-progress claim (#2 = :1) whose lease ran out (#3 < :2, now in
// milliseconds). It is written once, with the schema's names mapped once
// per store (DynamoStore.claimNames), so a claim builds only the values of
// now (claimValues) instead of running the expression builder. The text is
// the builder's, byte for byte, so requests are as they were
// (internal/golden holds them).
const claimCondition = "(attribute_not_exists (#0)) OR (#1 < :0) OR ((#2 = :1) AND (#3 < :2))"

// inProgressValue is StateInProgress as stored; the SDK only reads it.
var inProgressValue types.AttributeValue = &types.AttributeValueMemberS{Value: string(StateInProgress)}

// claimValues are claimCondition's values at now: expiry in seconds and
// leases in milliseconds, as they are stored.
func claimValues(now time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":0": epochSeconds(now), ":1": inProgressValue, ":2": epochMillis(now),
	}
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
		wait := max(holder.LeaseExpiresAt.Sub(now).Round(time.Second), time.Second)
		return ClaimResult{}, &InProgressError{RetryAfter: wait}
	}
	return ClaimResult{Record: holder, Replayed: true}, nil
}

// conditionFailureItem returns the item that made a conditional write fail:
// from the error when the server honoured ALL_OLD, else from one consistent
// GetItem. It returns (nil, nil) when no item exists. Any other error is
// returned classified.
func (s *DynamoStore) conditionFailureItem(ctx context.Context, id ID, err error) (*Record, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, Classify(err)
	}
	av := ccf.Item
	if len(av) == 0 {
		out, err := s.getItem(ctx, id)
		if err != nil {
			return nil, err
		}
		av = out
	}
	if len(av) == 0 {
		return nil, nil
	}
	r, err := s.schema.fromItem(av)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *DynamoStore) getItem(ctx context.Context, id ID) (map[string]types.AttributeValue, error) {
	if s.schema.err != nil {
		return nil, s.schema.err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.schema.key(id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, Classify(err)
	}
	return out.Item, nil
}

// Get returns the live record of id with one strongly consistent read, or
// ErrNotFound.
func (s *DynamoStore) Get(ctx context.Context, id ID) (Record, error) {
	av, err := s.getItem(ctx, id)
	if err != nil {
		return Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if len(av) == 0 {
		return Record{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	r, err := s.schema.fromItem(av)
	if err != nil {
		return Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if r.Expired(s.opts.Now()) {
		return Record{}, fmt.Errorf("get %s: expired: %w", id, ErrNotFound)
	}
	return r, nil
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

// Update applies u to the live record of (id, claimID) with one conditional
// UpdateItem and returns the updated record. It fails with ErrNotFound when
// there is no such live claim (absent, expired, or id reclaimed by another
// claim), a *ConflictError wrapping ErrAlreadyCompleted or ErrAborted when
// the record is already in that final state (a duplicate), or wrapping
// ErrMismatch when Require, RequireAbsentOrEqual or From does not hold.
func (s *DynamoStore) Update(ctx context.Context, id ID, claimID string, u Update) (Record, error) {
	enc, err := u.encode()
	if err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	if s.schema.err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, s.schema.err)
	}
	now := s.opts.Now()
	expr, err := s.updateExpression(enc, claimID, now)
	if err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.schema.key(id),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		r, err := s.schema.fromItem(out.Attributes)
		if err != nil {
			return Record{}, fmt.Errorf("update %s: %w", id, err)
		}
		return r, nil
	}
	old, err := s.conditionFailureItem(ctx, id, err)
	if err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	return Record{}, updateRefusal(id, claimID, u, old, now)
}

// encodedUpdate is an Update with its fields encoded, as both stores
// apply it.
type encodedUpdate struct {
	Update
	data                   map[string]types.AttributeValue
	require, absentOrEqual []field
}

// encode encodes u's fields, and refuses an update no store may apply.
func (u Update) encode() (encodedUpdate, error) {
	if u.State == "" || u.State == StateInProgress {
		return encodedUpdate{}, fmt.Errorf("state %q is not a target", u.State)
	}
	enc := encodedUpdate{Update: u}
	if u.Data != nil {
		d, err := NewData(u.Data)
		if err != nil {
			return encodedUpdate{}, err
		}
		enc.data = d.m
	}
	var err error
	if enc.require, err = fieldValues(u.Require); err != nil {
		return encodedUpdate{}, err
	}
	if enc.absentOrEqual, err = fieldValues(u.RequireAbsentOrEqual); err != nil {
		return encodedUpdate{}, err
	}
	if err := cmp.Or(checkNames(enc.data), checkNames(u.Require), checkNames(u.RequireAbsentOrEqual)); err != nil {
		return encodedUpdate{}, err
	}
	return enc, nil
}

// checkNames refuses a data field name that an expression's document path
// cannot hold: it cannot escape brackets.
func checkNames[V any](fields map[string]V) error {
	for k := range fields {
		if k == "" || strings.ContainsAny(k, "[]") {
			return fmt.Errorf("data field %q: want a name without brackets", k)
		}
	}
	return nil
}

// name is an attribute name as it is, dots included (Schema.Validate and
// Update.check refuse brackets, which an expression cannot escape).
func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }

// dataName is the caller's field k inside the data map.
func dataName(k string) expression.NameBuilder { return name(attrData).AppendName(name(k)) }

// updateExpression is u as an update of claimID's record at now, on the
// condition that the record is that claim's, not final, live (unless
// u.Revive) and holds u.Require and u.RequireAbsentOrEqual.
func (s *DynamoStore) updateExpression(u encodedUpdate, claimID string, now time.Time) (expression.Expression, error) {
	state := name(s.schema.State)
	cond := name(attrClaimID).Equal(expression.Value(claimID)).
		And(state.NotEqual(expression.Value(StateCompleted)), state.NotEqual(expression.Value(StateAborted)))
	if !u.Revive {
		cond = cond.And(name(s.schema.ExpiresAt).GreaterThanEqual(expression.Value(epochSeconds(now))))
	}
	for _, f := range u.require {
		cond = cond.And(dataName(f.name).Equal(expression.Value(f.value)))
	}
	for _, f := range u.absentOrEqual {
		field := dataName(f.name)
		cond = cond.And(expression.AttributeNotExists(field).Or(field.Equal(expression.Value(f.value))))
	}
	if u.From != "" {
		cond = cond.And(state.Equal(expression.Value(u.From)))
	}
	// Neither target state has a lease.
	set := expression.Set(state, expression.Value(u.State)).
		Set(name(attrUpdated), expression.Value(epochMillis(now))).
		Remove(name(s.schema.LeaseExpiresAt))
	if u.State == StateCompleted || u.State == StateAborted {
		// A finished record leaves its group (and the sparse index) in the
		// write that finishes it.
		set = set.Remove(name(s.schema.Group))
	}
	if u.Response != nil {
		set = set.Set(name(s.schema.ResponseBody), expression.Value(string(u.Response.Body)))
	}
	if u.RestartExpiry {
		set = set.Set(name(s.schema.ExpiresAt), expression.Value(epochSeconds(now.Add(s.opts.TTL))))
	}
	for _, k := range slices.Sorted(maps.Keys(u.data)) {
		set = set.Set(dataName(k), expression.Value(u.data[k]))
	}
	return expression.NewBuilder().WithCondition(cond).WithUpdate(set).Build()
}

// updateRefusal says why an update of (id, claimID) at now found old (nil:
// no record) instead of a record it could change. Both stores use it.
func updateRefusal(id ID, claimID string, u Update, old *Record, now time.Time) error {
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

// Release deletes the in-progress claim (id, claimID) so the key is free at
// once, for work that failed before it recorded a response. Releasing a
// claim that is gone, taken over or no longer in progress does nothing.
func (s *DynamoStore) Release(ctx context.Context, id ID, claimID string) error {
	if s.schema.err != nil {
		return fmt.Errorf("release %s: %w", id, s.schema.err)
	}
	cond, err := expression.NewBuilder().WithCondition(
		name(attrClaimID).Equal(expression.Value(claimID)).
			And(name(s.schema.State).Equal(expression.Value(StateInProgress)))).Build()
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.schema.key(id),
		ConditionExpression:       cond.Condition(),
		ExpressionAttributeNames:  cond.Names(),
		ExpressionAttributeValues: cond.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release %s: %w", id, Classify(err))
	}
	return nil
}

// CountGroup returns how many records of group are live and unfinished,
// leaving out the record of except (pass "" to count them all): claimed
// (in progress, pending, or in a caller's own state), not expired, not
// completed or aborted. An in-progress claim whose lease ran out still
// counts, until it expires or a newer claim of its key replaces it: the
// work it began may exist. The count is of records, never a counter kept
// beside them: a record stops counting when its final update removes its
// group, when it is released or replaced, and when it expires (the query
// asks for expires_at >= now, so TTL deletion, which lags, does not
// matter); a renewal (Update.RestartExpiry) keeps it counting.
//
// It is one Query of the index Schema.GroupIndex, reading keys only and
// answering a count (DynamoDB pages it per 1 MB read, some ten thousand
// records of this size). The index is eventually consistent, as every
// global secondary index is: a record claimed an instant ago may not be
// counted yet, and one finished an instant ago may still be.
func (s *DynamoStore) CountGroup(ctx context.Context, group string, except ID) (int, error) {
	if s.schema.err != nil {
		return 0, fmt.Errorf("count group: %w", s.schema.err)
	}
	if group == "" {
		return 0, errors.New("count group: no group named")
	}
	now := s.opts.Now()
	b := expression.NewBuilder().WithKeyCondition(expression.Key(s.schema.Group).Equal(expression.Value(group)).
		And(expression.Key(s.schema.ExpiresAt).GreaterThanEqual(expression.Value(epochSeconds(now)))))
	if except != "" {
		b = b.WithFilter(name(s.schema.idAttr()).NotEqual(expression.Value(s.schema.KeyPrefix + string(except))))
	}
	expr, err := b.Build()
	if err != nil {
		return 0, fmt.Errorf("count group: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(s.schema.GroupIndex),
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		Select:                    types.SelectCount,
	}
	count := 0
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("count group: %w", Classify(err))
		}
		count += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return count, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
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

// TableName returns the table the store writes to.
func (s *DynamoStore) TableName() string { return s.table }
