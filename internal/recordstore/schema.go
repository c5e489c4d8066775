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
)

// Schema names the DynamoDB table's key and the attributes a record is
// stored in. Every empty field takes its default, so a table that differs
// from [DefaultSchema] in one name sets that name only. The defaults are
// this project's table: partition key "pk", no sort key.
//
// The configurable names are the ones Powertools for AWS Lambda lets a
// persistence layer rename (its keyAttr, sortKeyAttr, staticPkValue,
// expiryAttr, inProgressExpiryAttr, statusAttr, dataAttr and
// validationKeyAttr). The other attributes keep fixed names: tenant,
// claim_id, data (a map of the caller's own fields), created_at and
// updated_at; response_status is reserved too (nothing writes or reads it
// now, but items written before its status code was dropped may hold it).
type Schema struct {
	// PartitionKey is the table's partition key, a string attribute.
	// Defaults to "pk".
	PartitionKey string
	// SortKey is the table's sort key, a string attribute, for a table that
	// has one. With a sort key, every record's partition key holds
	// StaticPartitionValue and its ID goes in the sort key. Defaults to ""
	// (no sort key; the ID is the partition key).
	SortKey string
	// StaticPartitionValue is the partition key of every record when SortKey
	// is set, so that records sit under one partition key value in a
	// single-table design. Ignored without SortKey. Defaults to
	// DefaultStaticPartitionValue.
	StaticPartitionValue string
	// KeyPrefix is written before the record's ID in the key attribute that
	// holds it (the partition key, or the sort key when there is one), to
	// keep records apart from other items of a single-table design, for
	// example "IDEMPOTENCY#". Defaults to "".
	KeyPrefix string
	// ExpiresAt is the expiry attribute (epoch seconds), which should be the
	// table's TTL attribute. Defaults to "expires_at".
	ExpiresAt string
	// LeaseExpiresAt is when an in-progress claim may be taken over (epoch
	// milliseconds). Defaults to "lease_expires_at".
	LeaseExpiresAt string
	// State is the record's state attribute. Defaults to "state".
	State string
	// ResponseBody is the recorded response. Defaults to "response_body".
	ResponseBody string
	// Fingerprint is the fingerprint of the request that claimed the key.
	// Defaults to "fingerprint".
	Fingerprint string
	// Group holds a record's Record.Group, and only while the record is
	// unfinished: a string attribute, the partition key of GroupIndex.
	// Defaults to "group".
	Group string
	// GroupIndex is the global secondary index that CountGroup queries:
	// partition key Group (string), sort key ExpiresAt (number), projection
	// KEYS_ONLY. It is sparse: only records in a group are in it. A table
	// whose records never have a group needs no such index. Defaults to
	// "by_group".
	GroupIndex string
}

// DefaultStaticPartitionValue is the partition key of every record when
// Schema.SortKey is set and Schema.StaticPartitionValue is not.
const DefaultStaticPartitionValue = "idempotency"

// DefaultSchema returns the schema of this project's table, every field set.
func DefaultSchema() Schema {
	return Schema{
		PartitionKey: "pk", ExpiresAt: "expires_at", LeaseExpiresAt: "lease_expires_at",
		State: "state", ResponseBody: "response_body", Fingerprint: "fingerprint",
		Group: "group", GroupIndex: "by_group",
	}
}

// withDefaults fills every empty field with its default.
func (s Schema) withDefaults() Schema {
	d := DefaultSchema()
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.PartitionKey, d.PartitionKey)
	def(&s.ExpiresAt, d.ExpiresAt)
	def(&s.LeaseExpiresAt, d.LeaseExpiresAt)
	def(&s.State, d.State)
	def(&s.ResponseBody, d.ResponseBody)
	def(&s.Fingerprint, d.Fingerprint)
	def(&s.Group, d.Group)
	def(&s.GroupIndex, d.GroupIndex)
	if s.SortKey != "" {
		def(&s.StaticPartitionValue, DefaultStaticPartitionValue)
	}
	return s
}

// Fixed attribute names. expires_at (epoch seconds) is the table's TTL
// attribute; created_at, updated_at and lease_expires_at are epoch
// milliseconds. dynamostore names the exported ones in its expressions.
const (
	attrTenant, attrStatus, attrCreated = "tenant", "response_status", "created_at"
	AttrClaimID, AttrData, AttrUpdated  = "claim_id", "data", "updated_at"
)

// Validate reports a schema whose names collide, once defaults are applied.
func (s Schema) Validate() error {
	s = s.withDefaults()
	seen := map[string]string{}
	var errs []error
	for _, a := range []struct{ role, name string }{
		{"PartitionKey", s.PartitionKey}, {"SortKey", s.SortKey}, {"ExpiresAt", s.ExpiresAt},
		{"LeaseExpiresAt", s.LeaseExpiresAt}, {"State", s.State}, {"ResponseBody", s.ResponseBody},
		{"Fingerprint", s.Fingerprint}, {"Group", s.Group}, {"(fixed) tenant", attrTenant}, {"(fixed) claim_id", AttrClaimID},
		{"(fixed) response_status", attrStatus}, {"(fixed) data", AttrData},
		{"(fixed) created_at", attrCreated}, {"(fixed) updated_at", AttrUpdated},
	} {
		if a.name == "" {
			continue
		}
		if strings.ContainsAny(a.name, "[]") {
			errs = append(errs, fmt.Errorf("%s %q: an attribute name with brackets cannot be named in an expression", a.role, a.name))
		}
		if other, dup := seen[a.name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both %q", other, a.role, a.name))
		}
		seen[a.name] = a.role
	}
	if !validIndexName(s.GroupIndex) {
		errs = append(errs, fmt.Errorf("GroupIndex %q: an index name is 3 to 255 letters, digits, '_', '-' and '.'", s.GroupIndex))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("idempotency: invalid schema: %w", err)
	}
	return nil
}

// validIndexName reports whether DynamoDB accepts n as an index name.
func validIndexName(n string) bool {
	if len(n) < 3 || len(n) > 255 {
		return false
	}
	for _, c := range n {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Codec is a Schema with its defaults applied: it encodes records as the
// table's items and decodes them, for the store on the table
// (dynamostore).
type Codec struct {
	Schema
	// Err is Validate's: a store returns it from every operation.
	Err error
}

// NewCodec returns s's codec.
func NewCodec(s Schema) *Codec {
	return &Codec{Schema: s.withDefaults(), Err: s.Validate()}
}

// Key is the primary key of id's record.
func (s *Codec) Key(id ID) map[string]types.AttributeValue {
	return s.putKey(make(map[string]types.AttributeValue, 2), id)
}

// putKey writes the primary key of id's record into item.
func (s *Codec) putKey(item map[string]types.AttributeValue, id ID) map[string]types.AttributeValue {
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
	item[AttrData] = &types.AttributeValueMemberM{Value: data} // a map, never NULL, so updates can SET data.x
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
	for _, name := range []string{attrTenant, AttrClaimID} {
		str(name, false)
	}
	for _, name := range []string{attrCreated, AttrUpdated} {
		num(name, false)
	}
	id, ok := strings.CutPrefix(str(s.IDAttr(), false), s.KeyPrefix)
	if !ok {
		errs = append(errs, fmt.Errorf("attribute %s: no prefix %q", s.IDAttr(), s.KeyPrefix))
	}
	r := Record{
		ID: ID(id), Tenant: fixed.Tenant, ClaimID: fixed.ClaimID, Fingerprint: str(s.Fingerprint, false),
		State:     State(str(s.State, false)),
		CreatedAt: time.UnixMilli(fixed.CreatedAt), UpdatedAt: time.UnixMilli(fixed.UpdatedAt),
		ExpiresAt: time.Unix(num(s.ExpiresAt, false), 0), Data: Data{m: map[string]types.AttributeValue{}},
	}
	if body := str(s.ResponseBody, true); body != "" {
		r.Response.Body = []byte(body)
	}
	if lease := num(s.LeaseExpiresAt, true); lease != 0 {
		r.LeaseExpiresAt = time.UnixMilli(lease)
	}
	r.Group = str(s.Group, true)
	if m, ok := av[AttrData].(*types.AttributeValueMemberM); ok {
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
func (s Schema) DecodeItem(item map[string]types.AttributeValue) (Record, error) {
	// Decoding needs only the attribute names: no Validate per item.
	return (&Codec{Schema: s.withDefaults()}).DecodeItem(item)
}
