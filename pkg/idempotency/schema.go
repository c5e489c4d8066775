package idempotency

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/awslite"
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
// claim_id, response_status, data (a map of the caller's own fields),
// created_at and updated_at.
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
}

// DefaultStaticPartitionValue is the partition key of every record when
// Schema.SortKey is set and Schema.StaticPartitionValue is not.
const DefaultStaticPartitionValue = "idempotency"

// DefaultSchema returns the schema of this project's table, every field set.
func DefaultSchema() Schema {
	return Schema{
		PartitionKey: "pk", ExpiresAt: "expires_at", LeaseExpiresAt: "lease_expires_at",
		State: "state", ResponseBody: "response_body", Fingerprint: "fingerprint",
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
	if s.SortKey != "" {
		def(&s.StaticPartitionValue, DefaultStaticPartitionValue)
	}
	return s
}

// Fixed attribute names. expires_at (epoch seconds) is the table's TTL
// attribute; created_at, updated_at and lease_expires_at are epoch
// milliseconds.
const attrTenant, attrClaimID, attrStatus, attrData, attrCreated, attrUpdated = "tenant", "claim_id", "response_status", "data", "created_at", "updated_at"

// Validate reports a schema whose names collide, once defaults are applied.
func (s Schema) Validate() error {
	s = s.withDefaults()
	seen := map[string]string{}
	var errs []error
	for _, a := range []struct{ role, name string }{
		{"PartitionKey", s.PartitionKey}, {"SortKey", s.SortKey}, {"ExpiresAt", s.ExpiresAt},
		{"LeaseExpiresAt", s.LeaseExpiresAt}, {"State", s.State}, {"ResponseBody", s.ResponseBody},
		{"Fingerprint", s.Fingerprint}, {"(fixed) tenant", attrTenant}, {"(fixed) claim_id", attrClaimID},
		{"(fixed) response_status", attrStatus}, {"(fixed) data", attrData},
		{"(fixed) created_at", attrCreated}, {"(fixed) updated_at", attrUpdated},
	} {
		if a.name == "" {
			continue
		}
		if other, dup := seen[a.name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both %q", other, a.role, a.name))
		}
		seen[a.name] = a.role
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("idempotency: invalid schema: %w", err)
	}
	return nil
}

// schema is a Schema with its defaults applied and the expressions that
// depend on its names built once, so a claim costs no more than with fixed
// names. Its maps are shared by concurrent calls and never written.
type schema struct {
	Schema
	err        error // from Validate, returned by every operation
	claimNames map[string]string
	stateNames map[string]string
}

// claimCond lets a claim succeed on a free key: never claimed, expired, or
// an in-progress claim whose lease ran out. Its names are the schema's
// (claimNames).
const claimCond = "attribute_not_exists(#pk) OR #exp < :now OR (#state = :in_progress AND #lease < :now_ms)"

func newSchema(s Schema) *schema {
	sc := &schema{Schema: s.withDefaults(), err: s.Validate()}
	sc.claimNames = map[string]string{"#pk": sc.PartitionKey, "#exp": sc.ExpiresAt, "#state": sc.State, "#lease": sc.LeaseExpiresAt}
	sc.stateNames = map[string]string{"#state": sc.State}
	return sc
}

// key is the primary key of id's record.
func (s *schema) key(id ID) map[string]awslite.AttributeValue {
	return s.putKey(make(map[string]awslite.AttributeValue, 2), id)
}

// putKey writes the primary key of id's record into item.
func (s *schema) putKey(item map[string]awslite.AttributeValue, id ID) map[string]awslite.AttributeValue {
	if s.SortKey == "" {
		item[s.PartitionKey] = str(s.KeyPrefix + string(id))
		return item
	}
	item[s.PartitionKey] = str(s.StaticPartitionValue)
	item[s.SortKey] = str(s.KeyPrefix + string(id))
	return item
}

// idAttr is the attribute that holds a record's ID.
func (s *schema) idAttr() string {
	if s.SortKey != "" {
		return s.SortKey
	}
	return s.PartitionKey
}

// toItem encodes a Record. The mapping is written out: the SDK's
// feature/dynamodb/attributevalue produces the SDK's own attribute types,
// which this package does not link (see DynamoDBAPI), and its struct tags
// could not follow a configurable Schema anyway.
func (s *schema) toItem(r Record) map[string]awslite.AttributeValue {
	data := make(map[string]awslite.AttributeValue, len(r.Data))
	for k, v := range r.Data {
		data[k] = str(v)
	}
	item := s.putKey(make(map[string]awslite.AttributeValue, 13), r.ID)
	item[attrTenant] = str(r.Tenant)
	item[attrClaimID] = str(r.ClaimID)
	item[s.Fingerprint] = str(r.Fingerprint)
	item[s.State] = str(string(r.State))
	item[attrData] = awslite.AttributeValue{M: data} // a map, never NULL, so updates can SET data.x
	item[attrCreated] = epochMillis(r.CreatedAt)
	item[attrUpdated] = epochMillis(r.UpdatedAt)
	item[s.ExpiresAt] = epochSeconds(r.ExpiresAt)
	if r.Response.Status != 0 {
		item[attrStatus] = awslite.N(int64(r.Response.Status))
	}
	if len(r.Response.Body) > 0 {
		item[s.ResponseBody] = str(string(r.Response.Body))
	}
	if !r.LeaseExpiresAt.IsZero() {
		item[s.LeaseExpiresAt] = epochMillis(r.LeaseExpiresAt)
	}
	return item
}

// fromItem decodes a stored Record, refusing items of another shape.
func (s *schema) fromItem(av map[string]awslite.AttributeValue) (Record, error) {
	var errs []error
	str := func(name string) string {
		v, ok := av[name].AsString()
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s: not a string", name))
		}
		return v
	}
	n := func(name string, optional bool) int64 {
		v, present := av[name]
		if v.N == nil {
			if !optional || present {
				errs = append(errs, fmt.Errorf("attribute %s: not a number", name))
			}
			return 0
		}
		i, err := v.AsInt()
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %s: %w", name, err))
		}
		return i
	}
	id, ok := strings.CutPrefix(str(s.idAttr()), s.KeyPrefix)
	if !ok {
		errs = append(errs, fmt.Errorf("attribute %s: no prefix %q", s.idAttr(), s.KeyPrefix))
	}
	r := Record{
		ID: ID(id), Tenant: str(attrTenant), ClaimID: str(attrClaimID), Fingerprint: str(s.Fingerprint),
		State: State(str(s.State)), Response: Response{Status: int(n(attrStatus, true))},
		CreatedAt: time.UnixMilli(n(attrCreated, false)), UpdatedAt: time.UnixMilli(n(attrUpdated, false)),
		ExpiresAt: time.Unix(n(s.ExpiresAt, false), 0), Data: map[string]string{},
	}
	if body, ok := av[s.ResponseBody].AsString(); ok {
		r.Response.Body = []byte(body)
	}
	if lease := n(s.LeaseExpiresAt, true); lease != 0 {
		r.LeaseExpiresAt = time.UnixMilli(lease)
	}
	for k, v := range av[attrData].M {
		if sv, ok := v.AsString(); ok {
			r.Data[k] = sv
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	return r, nil
}

func str(s string) awslite.AttributeValue { return awslite.S(s) }

func epochSeconds(t time.Time) awslite.AttributeValue { return awslite.N(t.Unix()) }

func epochMillis(t time.Time) awslite.AttributeValue { return awslite.N(t.UnixMilli()) }
