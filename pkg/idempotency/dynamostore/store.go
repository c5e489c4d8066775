// Package dynamostore is an [idempotency.Store] on a DynamoDB table,
// through the SDK's own client (any [DynamoDBAPI], so the client's
// middleware, endpoint and retry settings apply):
//
//	store := dynamostore.New(dynamodb.NewFromConfig(cfg), "idempotency")
//	handler := idempotency.MakeIdempotent(store, charge, opts)
//
// The table is laid out as its [idempotency.Schema] says: by default a
// string partition key "pk" and the TTL attribute "expires_at". Every call
// is one round trip: a claim is one conditional PutItem that asks for the
// holder with ReturnValuesOnConditionCheckFailure=ALL_OLD, so its replay
// is too ([Store.ClaimRecord] says how); Get is a consistent GetItem,
// Complete a conditional UpdateItem, Release a conditional DeleteItem.
// Records are encoded with feature/dynamodb/attributevalue and the
// conditions with feature/dynamodb/expression.
//
// The same Store is a [recordstore.Store], for records that carry fields
// of their own, states beyond completed, conditional updates and groups
// (the upload service's records): it is the one package of that engine
// that calls a DynamoDB client, so code that only reads the table's items
// (a stream consumer) links none.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

var (
	_ idempotency.Store        = (*Store)(nil)
	_ recordstore.Store        = (*Store)(nil)
	_ recordstore.GroupCounter = (*Store)(nil)
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

// Store is the store on one DynamoDB table: an idempotency.Store (Claim,
// Get, Complete, Release) and a recordstore.Store (ClaimRecord,
// GetRecord, Update, CountGroup) on the same items.
type Store struct {
	client DynamoDBAPI
	table  string
	opts   idempotency.Options
	schema *recordstore.Codec
	// claimNames and noTakeoverNames are claimCondition's and
	// noTakeoverCondition's attribute names, built once: the SDK only
	// reads them, so every claim shares them.
	claimNames, noTakeoverNames map[string]string
}

// New returns a store on table. A Schema whose names collide
// makes every operation fail with the error of Schema.Validate.
func New(client DynamoDBAPI, table string, optFns ...func(*idempotency.Options)) *Store {
	opts := idempotency.NewOptions(optFns...)
	s := &Store{client: client, table: table, opts: opts, schema: recordstore.NewCodec(opts.Schema)}
	s.claimNames = map[string]string{"#0": s.schema.PartitionKey, "#1": s.schema.ExpiresAt,
		"#2": s.schema.State, "#3": s.schema.LeaseExpiresAt}
	s.noTakeoverNames = map[string]string{"#0": s.schema.PartitionKey, "#1": s.schema.ExpiresAt}
	return s
}

// Claim is idempotency.Store's Claim: one ClaimRecord of rec in
// progress (see recordstore.Claim).
func (s *Store) Claim(ctx context.Context, rec idempotency.Record) (idempotency.ClaimResult, error) {
	return recordstore.Claim(ctx, s, rec)
}

// Get is idempotency.Store's Get: one GetRecord.
func (s *Store) Get(ctx context.Context, id idempotency.ID) (idempotency.Record, error) {
	return recordstore.Get(ctx, s, id)
}

// Complete is idempotency.Store's Complete: one Update (see
// recordstore.Complete).
func (s *Store) Complete(ctx context.Context, id idempotency.ID, claimID string, resp idempotency.Response) (idempotency.Record, error) {
	return recordstore.Complete(ctx, s, id, claimID, resp)
}

// TTL is Options.TTL.
func (s *Store) TTL() time.Duration { return s.opts.TTL }

// Now is Options.Now's time.
func (s *Store) Now() time.Time { return s.opts.Now() }

// ClaimRecord writes rec as the holder of rec.ID in one conditional PutItem. The
// caller fills ID, Tenant, ClaimID (unique per claim), Fingerprint, Data and
// either State=StatePending with Response (or none, for a caller that keeps
// what it answers with in Data), or State=StateInProgress (the
// store sets the lease). The store sets the timestamps and expiry.
//
// When the key is held, the holder comes back from the same call: the put
// asks for it with ReturnValuesOnConditionCheckFailure=ALL_OLD, so a replay
// costs the claim's one round trip and is judged on the item that call
// returns (recordstore.JudgeHolder): a replay if its fingerprint matches, a
// *ConflictError wrapping ErrKeyReused if not, an *InProgressError while an
// in-progress lease runs. A server that does not return the old item costs
// one more, strongly consistent, GetItem (conditionFailureItem). This is
// the one place the claim's round trip is explained; the packages built on
// it say only that it is one.
func (s *Store) ClaimRecord(ctx context.Context, rec recordstore.Record) (recordstore.ClaimResult, error) {
	if rec.State != recordstore.StatePending && rec.State != idempotency.StateInProgress {
		return recordstore.ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed", rec.ID, rec.State)
	}
	if s.schema.Err != nil {
		return recordstore.ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, s.schema.Err)
	}
	// Two attempts: a holder seen by the put can vanish (expire, be
	// released) before the fallback read sees it.
	for attempt := 0; ; attempt++ {
		now := s.opts.Now()
		// Stamp a copy: stamping consumes rec.Lease, which the second
		// attempt needs as much as the first.
		stamped := recordstore.Stamp(&s.opts, rec, now)
		item, err := s.schema.EncodeItem(stamped)
		if err != nil {
			return recordstore.ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, err)
		}
		in := &dynamodb.PutItemInput{
			TableName:                           aws.String(s.table),
			Item:                                item,
			ConditionExpression:                 aws.String(claimCondition),
			ExpressionAttributeNames:            s.claimNames,
			ExpressionAttributeValues:           claimValues(now),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if rec.NoTakeover {
			in.ConditionExpression, in.ExpressionAttributeNames = aws.String(noTakeoverCondition), s.noTakeoverNames
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":0": recordstore.EpochSeconds(now)}
		}
		_, err = s.client.PutItem(ctx, in)
		if err == nil {
			return recordstore.ClaimResult{Record: stamped}, nil
		}
		holder, err := s.conditionFailureItem(ctx, rec.ID, err)
		if err != nil {
			return recordstore.ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, err)
		}
		if holder == nil || holder.Expired(now) {
			if attempt == 0 {
				continue
			}
			return recordstore.ClaimResult{}, fmt.Errorf("claim %s: key held but no live holder found", rec.ID)
		}
		return recordstore.JudgeHolder(rec, *holder, now)
	}
}

// claimCondition lets a claim succeed on a free key: never claimed (#0,
// the partition key), expired (#1 < :0, now in seconds), or an
// in-progress claim (#2 = :1) whose lease ran out (#3 < :2, now in
// milliseconds). It is written once, with the schema's names mapped once
// per store (Store.claimNames), so a claim builds only the values of
// now (claimValues) instead of running the expression builder. The text is
// the builder's, byte for byte, so requests are as they were
// (internal/checks/golden holds them).
const claimCondition = "(attribute_not_exists (#0)) OR (#1 < :0) OR ((#2 = :1) AND (#3 < :2))"

// noTakeoverCondition is claimCondition for a claim with
// Record.NoTakeover: only a key never claimed or expired is free, so a
// timed-out claim comes back as the holder (idempotency.Free's rule). An
// in-progress record without a lease fails claimCondition's #3 < :2 (a
// comparison with an absent attribute is false): it is held until it
// expires, as idempotency.Free says.
const noTakeoverCondition = "(attribute_not_exists (#0)) OR (#1 < :0)"

// inProgressValue is StateInProgress as stored; the SDK only reads it.
var inProgressValue types.AttributeValue = &types.AttributeValueMemberS{Value: string(idempotency.StateInProgress)}

// claimValues are claimCondition's values at now: expiry in seconds and
// leases in milliseconds, as they are stored.
func claimValues(now time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":0": recordstore.EpochSeconds(now), ":1": inProgressValue, ":2": recordstore.EpochMillis(now),
	}
}

// conditionFailureItem returns the item that made a conditional write fail:
// from the error when the server honoured ALL_OLD, else from one consistent
// GetItem. It returns (nil, nil) when no item exists. Any other error is
// returned classified.
func (s *Store) conditionFailureItem(ctx context.Context, id idempotency.ID, err error) (*recordstore.Record, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, recordstore.Classify(err)
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
	r, err := s.schema.DecodeItem(av)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Store) getItem(ctx context.Context, id idempotency.ID) (map[string]types.AttributeValue, error) {
	if s.schema.Err != nil {
		return nil, s.schema.Err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.schema.Key(id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, recordstore.Classify(err)
	}
	return out.Item, nil
}

// GetRecord returns the live record of id with one strongly consistent
// read, or idempotency.ErrNotFound.
func (s *Store) GetRecord(ctx context.Context, id idempotency.ID) (recordstore.Record, error) {
	av, err := s.getItem(ctx, id)
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if len(av) == 0 {
		return recordstore.Record{}, fmt.Errorf("get %s: %w", id, idempotency.ErrNotFound)
	}
	r, err := s.schema.DecodeItem(av)
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if r.Expired(s.opts.Now()) {
		return recordstore.Record{}, fmt.Errorf("get %s: expired: %w", id, idempotency.ErrNotFound)
	}
	return r, nil
}

// Update applies u to the live record of (id, claimID) with one conditional
// UpdateItem and returns the updated record. It fails with ErrNotFound when
// there is no such live claim (absent, expired, or id reclaimed by another
// claim), a *ConflictError wrapping ErrAlreadyCompleted or ErrAborted when
// the record is already in that final state (a duplicate), or wrapping
// ErrMismatch when Require, RequireAbsentOrEqual or From does not hold.
func (s *Store) Update(ctx context.Context, id idempotency.ID, claimID string, u recordstore.Update) (recordstore.Record, error) {
	enc, err := u.Encode()
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	if s.schema.Err != nil {
		return recordstore.Record{}, fmt.Errorf("update %s: %w", id, s.schema.Err)
	}
	now := s.opts.Now()
	expr, err := s.updateExpression(enc, claimID, now)
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.schema.Key(id),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		r, err := s.schema.DecodeItem(out.Attributes)
		if err != nil {
			return recordstore.Record{}, fmt.Errorf("update %s: %w", id, err)
		}
		return r, nil
	}
	old, err := s.conditionFailureItem(ctx, id, err)
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	return recordstore.Record{}, recordstore.UpdateRefusal(id, claimID, u, old, now)
}

// name is an attribute name as it is, dots included (Schema.Validate and
// Update.Encode refuse brackets, which an expression cannot escape).
func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }

// dataName is the caller's field k inside the data map.
func dataName(k string) expression.NameBuilder { return name(idempotency.AttrData).AppendName(name(k)) }

// updateExpression is u as an update of claimID's record at now, on the
// condition that the record is that claim's, not final, live (unless
// u.Revive) and holds u.Require and u.RequireAbsentOrEqual.
func (s *Store) updateExpression(u recordstore.EncodedUpdate, claimID string, now time.Time) (expression.Expression, error) {
	state := name(s.schema.State)
	cond := name(idempotency.AttrClaimID).Equal(expression.Value(claimID)).
		And(state.NotEqual(expression.Value(idempotency.StateCompleted)), state.NotEqual(expression.Value(recordstore.StateAborted)))
	if !u.Revive {
		cond = cond.And(name(s.schema.ExpiresAt).GreaterThanEqual(expression.Value(recordstore.EpochSeconds(now))))
	}
	for _, f := range u.RequireValues {
		cond = cond.And(dataName(f.Name).Equal(expression.Value(f.Value)))
	}
	for _, f := range u.AbsentOrEqualValues {
		field := dataName(f.Name)
		cond = cond.And(expression.AttributeNotExists(field).Or(field.Equal(expression.Value(f.Value))))
	}
	if u.From != "" {
		cond = cond.And(state.Equal(expression.Value(u.From)))
	}
	// Neither target state has a lease.
	set := expression.Set(state, expression.Value(u.State)).
		Set(name(idempotency.AttrUpdatedAt), expression.Value(recordstore.EpochMillis(now))).
		Remove(name(s.schema.LeaseExpiresAt))
	if u.State == idempotency.StateCompleted || u.State == recordstore.StateAborted {
		// A finished record leaves its group (and the sparse index) in the
		// write that finishes it.
		set = set.Remove(name(s.schema.Group))
	}
	if u.Response != nil {
		set = set.Set(name(s.schema.ResponseBody), expression.Value(string(u.Response.Body)))
	}
	if u.RestartExpiry {
		set = set.Set(name(s.schema.ExpiresAt), expression.Value(recordstore.EpochSeconds(now.Add(s.opts.TTL))))
	}
	for _, k := range slices.Sorted(maps.Keys(u.SetValues)) {
		set = set.Set(dataName(k), expression.Value(u.SetValues[k]))
	}
	for _, k := range u.RemoveNames {
		set = set.Remove(dataName(k))
	}
	return expression.NewBuilder().WithCondition(cond).WithUpdate(set).Build()
}

// Release deletes the in-progress claim (id, claimID) so the key is free at
// once, for work that failed before it recorded a response. Releasing a
// claim that is gone, taken over or no longer in progress does nothing.
func (s *Store) Release(ctx context.Context, id idempotency.ID, claimID string) error {
	if s.schema.Err != nil {
		return fmt.Errorf("release %s: %w", id, s.schema.Err)
	}
	cond, err := expression.NewBuilder().WithCondition(
		name(idempotency.AttrClaimID).Equal(expression.Value(claimID)).
			And(name(s.schema.State).Equal(expression.Value(idempotency.StateInProgress)))).Build()
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.schema.Key(id),
		ConditionExpression:       cond.Condition(),
		ExpressionAttributeNames:  cond.Names(),
		ExpressionAttributeValues: cond.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release %s: %w", id, recordstore.Classify(err))
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
func (s *Store) CountGroup(ctx context.Context, group string, except idempotency.ID) (int, error) {
	if s.schema.Err != nil {
		return 0, fmt.Errorf("count group: %w", s.schema.Err)
	}
	if group == "" {
		return 0, errors.New("count group: no group named")
	}
	now := s.opts.Now()
	b := expression.NewBuilder().WithKeyCondition(expression.Key(s.schema.Group).Equal(expression.Value(group)).
		And(expression.Key(s.schema.ExpiresAt).GreaterThanEqual(expression.Value(recordstore.EpochSeconds(now)))))
	if except != "" {
		b = b.WithFilter(name(s.schema.IDAttr()).NotEqual(expression.Value(s.schema.KeyPrefix + string(except))))
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
			return 0, fmt.Errorf("count group: %w", recordstore.Classify(err))
		}
		count += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return count, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// TableName returns the table the store writes to.
func (s *Store) TableName() string { return s.table }
