package idempotency

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/onceupload/onceupload/pkg/awslite"
)

// DynamoDBAPI is the part of *awslite.DynamoDB the store uses. The store
// does not take the SDK's *dynamodb.Client: importing that package links
// its generated schema tables and client, about 1.5 MB of every Lambda
// binary that uses this package (see package awslite). Make one with
// awslite.NewDynamoDB(cfg) from the same aws.Config.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *awslite.PutItemInput) (*awslite.PutItemOutput, error)
	GetItem(ctx context.Context, in *awslite.GetItemInput) (*awslite.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *awslite.UpdateItemInput) (*awslite.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *awslite.DeleteItemInput) (*awslite.DeleteItemOutput, error)
}

var _ DynamoDBAPI = (*awslite.DynamoDB)(nil)

// Store is what callers of this package depend on; [DynamoStore] is the
// implementation, and tests may pass an in-memory one.
type Store interface {
	Claim(ctx context.Context, rec Record) (ClaimResult, error)
	Get(ctx context.Context, id ID) (Record, error)
	Update(ctx context.Context, id ID, claimID string, u Update) (Record, error)
	Release(ctx context.Context, id ID, claimID string) error
}

var _ Store = (*DynamoStore)(nil)

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
}

// NewDynamoStore returns a store on table. A Schema whose names collide
// makes every operation fail with the error of Schema.Validate.
func NewDynamoStore(client DynamoDBAPI, table string, optFns ...func(*Options)) *DynamoStore {
	opts := newOptions(optFns)
	return &DynamoStore{client: client, table: table, opts: opts, schema: newSchema(opts.Schema)}
}

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
	if rec.Data == nil {
		rec.Data = map[string]string{}
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
		_, err := s.client.PutItem(ctx, &awslite.PutItemInput{
			TableName:                           s.table,
			Item:                                s.schema.toItem(stamped),
			ConditionExpression:                 claimCond,
			ExpressionAttributeNames:            s.schema.claimNames,
			ExpressionAttributeValues:           map[string]awslite.AttributeValue{":now": epochSeconds(now), ":now_ms": epochMillis(now), ":in_progress": str(string(StateInProgress))},
			ReturnValuesOnConditionCheckFailure: "ALL_OLD",
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
		return judgeHolder(rec, *holder, now)
	}
}

// judgeHolder decides what a claimant gets when holder has the key.
func judgeHolder(rec, holder Record, now time.Time) (ClaimResult, error) {
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
	av, ok := awslite.ConditionalCheckFailed(err)
	if !ok {
		return nil, Classify(err)
	}
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

func (s *DynamoStore) getItem(ctx context.Context, id ID) (map[string]awslite.AttributeValue, error) {
	if s.schema.err != nil {
		return nil, s.schema.err
	}
	out, err := s.client.GetItem(ctx, &awslite.GetItemInput{
		TableName:      s.table,
		Key:            s.schema.key(id),
		ConsistentRead: true,
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
	if s.schema.err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, s.schema.err)
	}
	now := s.opts.Now()
	names := map[string]string{"#state": s.schema.State, "#lease": s.schema.LeaseExpiresAt}
	values := map[string]awslite.AttributeValue{
		":claim": str(claimID), ":completed": str(string(StateCompleted)),
		":state": str(string(u.State)), ":now_ms": epochMillis(now),
	}
	cond := []string{"claim_id = :claim", "#state <> :completed"}
	if !u.Revive {
		cond = append(cond, "#exp >= :now")
		names["#exp"] = s.schema.ExpiresAt
		values[":now"] = epochSeconds(now)
	}
	set := []string{"#state = :state", "updated_at = :now_ms"}
	if u.Response != nil {
		set = append(set, "response_status = :rs", "#body = :rb")
		names["#body"] = s.schema.ResponseBody
		values[":rs"] = awslite.N(int64(u.Response.Status))
		values[":rb"] = str(string(u.Response.Body))
	}
	if u.RestartExpiry {
		set = append(set, "#exp = :exp")
		names["#exp"] = s.schema.ExpiresAt
		values[":exp"] = epochSeconds(now.Add(s.opts.TTL))
	}
	if len(u.Data)+len(u.Require) > 0 {
		names["#data"] = attrData
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
	expr := "SET " + strings.Join(set, ", ") + " REMOVE #lease"
	out, err := s.client.UpdateItem(ctx, &awslite.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 s.schema.key(id),
		UpdateExpression:                    expr,
		ConditionExpression:                 strings.Join(cond, " AND "),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        "ALL_NEW",
		ReturnValuesOnConditionCheckFailure: "ALL_OLD",
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
	if s.schema.err != nil {
		return fmt.Errorf("release %s: %w", id, s.schema.err)
	}
	_, err := s.client.DeleteItem(ctx, &awslite.DeleteItemInput{
		TableName:                 s.table,
		Key:                       s.schema.key(id),
		ConditionExpression:       "claim_id = :claim AND #state = :in_progress",
		ExpressionAttributeNames:  s.schema.stateNames,
		ExpressionAttributeValues: map[string]awslite.AttributeValue{":claim": str(claimID), ":in_progress": str(string(StateInProgress))},
	})
	if _, ccf := awslite.ConditionalCheckFailed(err); err != nil && !ccf {
		return fmt.Errorf("release %s: %w", id, Classify(err))
	}
	return nil
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

// Transient reports whether err from an AWS call (package awslite's or the
// SDK's) is one that a later retry can cure: throttling, a server fault, a
// network failure or a timeout that outlived the client's own retries.
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
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && (status.HTTPStatusCode() >= 500 || status.HTTPStatusCode() == http.StatusTooManyRequests) {
		return true
	}
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	return errors.As(err, &sendErr) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded)
}

// TableName returns the table the store writes to.
func (s *DynamoStore) TableName() string { return s.table }
