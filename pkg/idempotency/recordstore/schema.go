package recordstore

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Codec is a Schema with its defaults applied: it encodes records as the
// table's items and decodes them, for the store on the table
// (dynamostore).
type Codec struct {
	idempotency.Schema
	// Err is Validate's: a store returns it from every operation.
	Err error
}

// NewCodec returns s's codec.
func NewCodec(s idempotency.Schema) *Codec {
	return &Codec{Schema: s.WithDefaults(), Err: s.Validate()}
}

// Key is the primary key of id's record.
func (s *Codec) Key(id idempotency.ID) map[string]types.AttributeValue {
	return s.putKey(make(map[string]types.AttributeValue, 2), id)
}

// putKey writes the primary key of id's record into item.
func (s *Codec) putKey(item map[string]types.AttributeValue, id idempotency.ID) map[string]types.AttributeValue {
	if s.SortKey == "" {
		item[s.PartitionKey] = &types.AttributeValueMemberS{Value: s.KeyPrefix + string(id)}
		return item
	}
	item[s.PartitionKey] = &types.AttributeValueMemberS{Value: s.StaticPartitionValue}
	item[s.SortKey] = &types.AttributeValueMemberS{Value: s.KeyPrefix + string(id)}
	return item
}

// IDAttr is the attribute that holds a record's ID.
func (s *Codec) IDAttr() string {
	if s.SortKey != "" {
		return s.SortKey
	}
	return s.PartitionKey
}

// fixedAttrs are the attributes whose names no Schema changes, encoded with
// attributevalue. Times are epoch milliseconds.
type fixedAttrs struct {
	Tenant    string `dynamodbav:"tenant"`
	ClaimID   string `dynamodbav:"claim_id"`
	CreatedAt int64  `dynamodbav:"created_at"`
	UpdatedAt int64  `dynamodbav:"updated_at"`
}

// EncodeItem encodes a Record: the fixed attributes with attributevalue,
// then the ones the Schema names, and the caller's Data as a map.
func (s *Codec) EncodeItem(r Record) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(fixedAttrs{
		Tenant: r.Tenant, ClaimID: r.ClaimID,
		CreatedAt: r.CreatedAt.UnixMilli(), UpdatedAt: r.UpdatedAt.UnixMilli(),
	})
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	s.putKey(item, r.ID)
	item[s.Fingerprint] = &types.AttributeValueMemberS{Value: r.Fingerprint}
	item[s.State] = &types.AttributeValueMemberS{Value: string(r.State)}
	item[s.ExpiresAt] = EpochSeconds(r.ExpiresAt)
	data := r.Data.m
	if data == nil {
		data = map[string]types.AttributeValue{}
	}
	item[idempotency.AttrData] = &types.AttributeValueMemberM{Value: data} // a map, never NULL, so updates can SET data.x
	if len(r.Response.Body) > 0 {
		item[s.ResponseBody] = &types.AttributeValueMemberS{Value: string(r.Response.Body)}
	}
	if !r.LeaseExpiresAt.IsZero() {
		item[s.LeaseExpiresAt] = EpochMillis(r.LeaseExpiresAt)
	}
	if r.Group != "" {
		item[s.Group] = &types.AttributeValueMemberS{Value: r.Group}
	}
	return item, nil
}

// DecodeItem decodes a stored Record, refusing items of another shape.
func (s *Codec) DecodeItem(av map[string]types.AttributeValue) (Record, error) {
	var fixed fixedAttrs
	if err := attributevalue.UnmarshalMap(av, &fixed); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	var errs []error
	str := func(name string, optional bool) string {
		v, ok := av[name].(*types.AttributeValueMemberS)
		if !ok {
			if !optional || av[name] != nil {
				errs = append(errs, fmt.Errorf("attribute %s: not a string", name))
			}
			return ""
		}
		return v.Value
	}
	num := func(name string, optional bool) int64 {
		var n int64
		if av[name] == nil && optional {
			return 0
		}
		if _, ok := av[name].(*types.AttributeValueMemberN); !ok {
			errs = append(errs, fmt.Errorf("attribute %s: not a number", name))
			return 0
		}
		if err := attributevalue.Unmarshal(av[name], &n); err != nil {
			errs = append(errs, fmt.Errorf("attribute %s: %w", name, err))
		}
		return n
	}
	for _, name := range []string{idempotency.AttrTenant, idempotency.AttrClaimID} {
		str(name, false)
	}
	for _, name := range []string{idempotency.AttrCreatedAt, idempotency.AttrUpdatedAt} {
		num(name, false)
	}
	id, ok := strings.CutPrefix(str(s.IDAttr(), false), s.KeyPrefix)
	if !ok {
		errs = append(errs, fmt.Errorf("attribute %s: no prefix %q", s.IDAttr(), s.KeyPrefix))
	}
	r := Record{Record: idempotency.Record{
		ID: idempotency.ID(id), Tenant: fixed.Tenant, ClaimID: fixed.ClaimID, Fingerprint: str(s.Fingerprint, false),
		State:     idempotency.State(str(s.State, false)),
		CreatedAt: time.UnixMilli(fixed.CreatedAt), UpdatedAt: time.UnixMilli(fixed.UpdatedAt),
		ExpiresAt: time.Unix(num(s.ExpiresAt, false), 0),
	}, Data: Data{m: map[string]types.AttributeValue{}}}
	if body := str(s.ResponseBody, true); body != "" {
		r.Response.Body = []byte(body)
	}
	if lease := num(s.LeaseExpiresAt, true); lease != 0 {
		r.LeaseExpiresAt = time.UnixMilli(lease)
	}
	r.Group = str(s.Group, true)
	if m, ok := av[idempotency.AttrData].(*types.AttributeValueMemberM); ok {
		maps.Copy(r.Data.m, m.Value)
	}
	if err := errors.Join(errs...); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	return r, nil
}

// EpochSeconds is t as the table stores an expiry.
func EpochSeconds(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}
}

// EpochMillis is t as the table stores a timestamp or a lease.
func EpochMillis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// DecodeItem decodes a table item written by a store of this schema: a
// record as GetItem returns it, or a stream record's old or new image, so a
// reader of the table's stream sees the same Record the store does.
func DecodeItem(s idempotency.Schema, item map[string]types.AttributeValue) (Record, error) {
	// Decoding needs only the attribute names: no Validate per item.
	return (&Codec{Schema: s.WithDefaults()}).DecodeItem(item)
}
