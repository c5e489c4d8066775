package idempotency

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DynamoDBAPI is the part of *dynamodb.Client the store uses.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Store is what callers of this package depend on; [DynamoStore] is the
// implementation, and tests may pass an in-memory one.
type Store interface {
	Claim(ctx context.Context, rec Record) (ClaimResult, error)
	Get(ctx context.Context, id ID) (Record, error)
	Update(ctx context.Context, id ID, claimID string, u Update) (Record, error)
	Release(ctx context.Context, id ID, claimID string) error
}

var _ Store = (*DynamoStore)(nil)

// Options configure a DynamoStore.
type Options struct {
	// TTL is how long a record lives after it is claimed (and after an
	// update that asks to restart it). Defaults to 24 hours.
	TTL time.Duration
	// Lease is how long an in-progress claim blocks other requests before it
	// may be taken over. Defaults to 30 seconds.
	Lease time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// DynamoStore is a Store on one DynamoDB table whose partition key is the
// string attribute "pk" and whose TTL attribute is "expires_at".
type DynamoStore struct {
	client DynamoDBAPI
	table  string
	opts   Options
}

// NewDynamoStore returns a store on table.
func NewDynamoStore(client DynamoDBAPI, table string, optFns ...func(*Options)) *DynamoStore {
	return &DynamoStore{client: client, table: table, opts: newOptions(optFns)}
}

func newOptions(optFns []func(*Options)) Options {
	o := Options{TTL: 24 * time.Hour, Lease: 30 * time.Second, Now: time.Now}
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
		rec.LeaseExpiresAt = truncMillis(now.Add(o.Lease))
	}
	if rec.Data == nil {
		rec.Data = map[string]string{}
	}
	return rec
}

// Attribute names of a stored Record. expires_at (epoch seconds) is the
// table's TTL attribute; created_at, updated_at and lease_expires_at are
// epoch milliseconds.
const (
	attrPK, attrTenant, attrClaimID, attrFingerprint, attrState = "pk", "tenant", "claim_id", "fingerprint", "state"
	attrStatus, attrBody, attrData                              = "response_status", "response_body", "data"
	attrCreated, attrUpdated, attrExpires, attrLease            = "created_at", "updated_at", "expires_at", "lease_expires_at"
)

// toItem encodes a Record. The mapping is written out rather than left to
// feature/dynamodb/attributevalue: that package's reflection and its
// dependency on the DynamoDB Streams client cost the bootstrap ~2 MB and
// the hot path dozens of allocations, for twelve fixed attributes.
func toItem(r Record) map[string]types.AttributeValue {
	data := make(map[string]types.AttributeValue, len(r.Data))
	for k, v := range r.Data {
		data[k] = str(v)
	}
	item := map[string]types.AttributeValue{
		attrPK: str(string(r.ID)), attrTenant: str(r.Tenant), attrClaimID: str(r.ClaimID),
		attrFingerprint: str(r.Fingerprint), attrState: str(string(r.State)),
		attrData:    &types.AttributeValueMemberM{Value: data}, // a map, never NULL, so updates can SET data.x
		attrCreated: epochMillis(r.CreatedAt), attrUpdated: epochMillis(r.UpdatedAt), attrExpires: epochSeconds(r.ExpiresAt),
	}
	if r.Response.Status != 0 {
		item[attrStatus] = &types.AttributeValueMemberN{Value: strconv.Itoa(r.Response.Status)}
	}
	if len(r.Response.Body) > 0 {
		item[attrBody] = str(string(r.Response.Body))
	}
	if !r.LeaseExpiresAt.IsZero() {
		item[attrLease] = epochMillis(r.LeaseExpiresAt)
	}
	return item
}

// fromItem decodes a stored Record, refusing items of another shape.
func fromItem(av map[string]types.AttributeValue) (Record, error) {
	var errs []error
	s := func(name string) string {
		v, ok := av[name].(*types.AttributeValueMemberS)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s: not a string", name))
			return ""
		}
		return v.Value
	}
	n := func(name string, optional bool) int64 {
		v, ok := av[name].(*types.AttributeValueMemberN)
		if !ok {
			if !optional || av[name] != nil {
				errs = append(errs, fmt.Errorf("attribute %s: not a number", name))
			}
			return 0
		}
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %s: %w", name, err))
		}
		return i
	}
	r := Record{
		ID: ID(s(attrPK)), Tenant: s(attrTenant), ClaimID: s(attrClaimID), Fingerprint: s(attrFingerprint),
		State: State(s(attrState)), Response: Response{Status: int(n(attrStatus, true))},
		CreatedAt: time.UnixMilli(n(attrCreated, false)), UpdatedAt: time.UnixMilli(n(attrUpdated, false)),
		ExpiresAt: time.Unix(n(attrExpires, false), 0), Data: map[string]string{},
	}
	if body, ok := av[attrBody].(*types.AttributeValueMemberS); ok {
		r.Response.Body = []byte(body.Value)
	}
	if lease := n(attrLease, true); lease != 0 {
		r.LeaseExpiresAt = time.UnixMilli(lease)
	}
	if data, ok := av[attrData].(*types.AttributeValueMemberM); ok {
		for k, v := range data.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				r.Data[k] = sv.Value
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	return r, nil
}

// ClaimResult says how a claim ended.
type ClaimResult struct {
	// Record is the new record, or for a replay the one that holds the key.
	Record Record
	// Replayed is true when an earlier claim with the same fingerprint holds
	// the key: answer with Record.Response instead of doing the work again.
	Replayed bool
}

// The claim succeeds on a free key: never claimed, expired, or an
// in-progress claim whose lease ran out.
const claimCondition = "attribute_not_exists(pk) OR expires_at < :now" +
	" OR (#state = :in_progress AND lease_expires_at < :now_ms)"

// Claim writes rec as the holder of rec.ID in one conditional PutItem. The
// caller fills ID, Tenant, ClaimID (unique per claim), Fingerprint, Data and
// either State=StatePending with Response, or State=StateInProgress (the
// store sets the lease). The store sets the timestamps and expiry.
//
// When the key is held, the holder comes back from the same call: a replay
// if its fingerprint matches, a *ConflictError wrapping ErrKeyReused if not,
// an *InProgressError while an in-progress lease runs.
func (s *DynamoStore) Claim(ctx context.Context, rec Record) (ClaimResult, error) {
	if rec.State != StatePending && rec.State != StateInProgress {
		return ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed", rec.ID, rec.State)
	}
	// Two attempts: a holder seen by the put can vanish (expire, be
	// released) before the fallback read sees it.
	for attempt := 0; ; attempt++ {
		now := s.opts.Now()
		rec = s.opts.stamp(rec, now)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           &s.table,
			Item:                                toItem(rec),
			ConditionExpression:                 aws.String(claimCondition),
			ExpressionAttributeNames:            map[string]string{"#state": "state"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": epochSeconds(now), ":now_ms": epochMillis(now), ":in_progress": str(string(StateInProgress))},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return ClaimResult{Record: rec}, nil
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
		return judgeHolder(rec, *holder, now)
	}
}

// judgeHolder decides what a claimant gets when holder has the key.
func judgeHolder(rec, holder Record, now time.Time) (ClaimResult, error) {
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
		return nil, classify(err)
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
	r, err := fromItem(av)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *DynamoStore) getItem(ctx context.Context, id ID) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            key(id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, classify(err)
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
	r, err := fromItem(av)
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
	// State is the new state: StatePending (after in-progress work) or
	// StateCompleted, which is final.
	State State
	// Response, if not nil, replaces the recorded response.
	Response *Response
	// Data fields are set (merged into the record's Data).
	Data map[string]string
	// Require lists Data fields that must hold these values, or the update
	// fails with ErrMismatch.
	Require map[string]string
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
// claim), a *ConflictError wrapping ErrAlreadyCompleted when the record is
// already completed (a duplicate), or wrapping ErrMismatch when Require does
// not hold.
func (s *DynamoStore) Update(ctx context.Context, id ID, claimID string, u Update) (Record, error) {
	if u.State != StatePending && u.State != StateCompleted {
		return Record{}, fmt.Errorf("update %s: state %q is not a target", id, u.State)
	}
	now := s.opts.Now()
	names := map[string]string{"#state": "state"}
	values := map[string]types.AttributeValue{
		":claim": str(claimID), ":completed": str(string(StateCompleted)),
		":state": str(string(u.State)), ":now_ms": epochMillis(now),
	}
	cond := []string{"claim_id = :claim", "#state <> :completed"}
	if !u.Revive {
		cond = append(cond, "expires_at >= :now")
		values[":now"] = epochSeconds(now)
	}
	set := []string{"#state = :state", "updated_at = :now_ms"}
	if u.Response != nil {
		set = append(set, "response_status = :rs", "response_body = :rb")
		values[":rs"] = &types.AttributeValueMemberN{Value: strconv.Itoa(u.Response.Status)}
		values[":rb"] = str(string(u.Response.Body))
	}
	if u.RestartExpiry {
		set = append(set, "expires_at = :exp")
		values[":exp"] = epochSeconds(now.Add(s.opts.TTL))
	}
	if len(u.Data)+len(u.Require) > 0 {
		names["#data"] = "data"
	}
	for i, k := range slices.Sorted(maps.Keys(u.Data)) {
		n, v := fmt.Sprintf("#d%d", i), fmt.Sprintf(":d%d", i)
		names[n], values[v] = k, str(u.Data[k])
		set = append(set, "#data."+n+" = "+v)
	}
	for i, k := range slices.Sorted(maps.Keys(u.Require)) {
		n, v := fmt.Sprintf("#r%d", i), fmt.Sprintf(":r%d", i)
		names[n], values[v] = k, str(u.Require[k])
		cond = append(cond, "#data."+n+" = "+v)
	}
	// Neither target state has a lease.
	expr := "SET " + strings.Join(set, ", ") + " REMOVE lease_expires_at"
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 key(id),
		UpdateExpression:                    &expr,
		ConditionExpression:                 aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		r, err := fromItem(out.Attributes)
		if err != nil {
			return Record{}, fmt.Errorf("update %s: %w", id, err)
		}
		return r, nil
	}
	old, err := s.conditionFailureItem(ctx, id, err)
	if err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	switch {
	case old == nil || old.Expired(now) && !u.Revive || old.ClaimID != claimID:
		return Record{}, fmt.Errorf("update %s claim %s: %w", id, claimID, ErrNotFound)
	case old.State == StateCompleted:
		return Record{}, fmt.Errorf("update %s: %w", id, &ConflictError{Err: ErrAlreadyCompleted, Existing: *old})
	default:
		return Record{}, fmt.Errorf("update %s: %w", id, &ConflictError{Err: ErrMismatch, Existing: *old})
	}
}

// Release deletes the in-progress claim (id, claimID) so the key is free at
// once, for work that failed before it recorded a response. Releasing a
// claim that is gone, taken over or no longer in progress does nothing.
func (s *DynamoStore) Release(ctx context.Context, id ID, claimID string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       key(id),
		ConditionExpression:       aws.String("claim_id = :claim AND #state = :in_progress"),
		ExpressionAttributeNames:  map[string]string{"#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":claim": str(claimID), ":in_progress": str(string(StateInProgress))},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release %s: %w", id, classify(err))
	}
	return nil
}

// classify marks errors that a later retry can cure with ErrUnavailable:
// throttling, server faults and network failures that outlived the SDK's
// own retries.
func classify(err error) error {
	if Transient(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Transient reports whether err from an AWS SDK call is one that a later
// retry can cure: throttling, a server fault, a network failure or a
// timeout that outlived the SDK's own retries.
func Transient(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable", "TransactionConflictException":
			return true
		}
		if apiErr.ErrorFault() == smithy.FaultServer {
			return true
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500 {
		return true
	}
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	return errors.As(err, &sendErr) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded)
}

func key(id ID) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(string(id))}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func epochSeconds(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}
}

func epochMillis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// TableName returns the table the store writes to.
func (s *DynamoStore) TableName() string { return s.table }
