package idempotency

import (
	"errors"
	"fmt"
	"strings"
)

// Schema names the DynamoDB table's key and the attributes a record is
// stored in (package dynamostore stores records as it says, and package
// recordstore decodes the table's items by it). Every empty field takes
// its default, so a table that differs from [DefaultSchema] in one name
// sets that name only. The defaults are this project's table: partition
// key "pk", no sort key.
//
// The configurable names are the ones Powertools for AWS Lambda lets a
// persistence layer rename (its keyAttr, sortKeyAttr, staticPkValue,
// expiryAttr, inProgressExpiryAttr, statusAttr, dataAttr and
// validationKeyAttr), and the group of records that have one. The other
// attributes keep fixed names: [AttrTenant], [AttrClaimID], [AttrData],
// [AttrCreatedAt] and [AttrUpdatedAt]; [AttrResponseStatus] is reserved
// (nothing writes it; items from before the status code was dropped may
// hold it).
type Schema struct {
	// PartitionKey is the table's partition key, a string attribute.
	// Defaults to "pk".
	PartitionKey string
	// SortKey is the table's sort key, a string attribute, for a table that
	// has one. With a sort key, every record's partition key holds
	// StaticPartitionValue and its ID goes in the sort key. Defaults to ""
	// (no sort key; the ID is the partition key).
	SortKey string
	// StaticPartitionValue is the partition key of every record when
	// SortKey is set, so that records sit under one partition key value in
	// a single-table design. Ignored without SortKey. Defaults to
	// DefaultStaticPartitionValue.
	StaticPartitionValue string
	// KeyPrefix is written before the record's ID in the key attribute
	// that holds it (the partition key, or the sort key when there is
	// one), to keep records apart from the other items of a single-table
	// design, for example "IDEMPOTENCY#". Defaults to "".
	KeyPrefix string
	// ExpiresAt is the expiry attribute (epoch seconds), which should be
	// the table's TTL attribute. Defaults to "expires_at".
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
	// Group holds the group of a record that is in one (package
	// recordstore's Record.Group), and only while the record is
	// unfinished: a string attribute, the partition key of GroupIndex. A
	// record of MakeIdempotent is in none. Defaults to "group".
	Group string
	// GroupIndex is the global secondary index that counts a group's
	// records: partition key Group (string), sort key ExpiresAt (number),
	// projection KEYS_ONLY. It is sparse: only records in a group are in
	// it, so a table whose records never have a group needs no such index.
	// Defaults to "by_group".
	GroupIndex string
}

// Attributes whose names no Schema changes. Times are epoch milliseconds.
const (
	AttrTenant    = "tenant"
	AttrClaimID   = "claim_id"
	AttrData      = "data"
	AttrCreatedAt = "created_at"
	AttrUpdatedAt = "updated_at"
	// AttrResponseStatus is reserved: nothing writes or reads it.
	AttrResponseStatus = "response_status"
)

// DefaultStaticPartitionValue is the partition key of every record when
// Schema.SortKey is set and Schema.StaticPartitionValue is not.
const DefaultStaticPartitionValue = "idempotency"

// DefaultSchema returns the schema of this project's table, every field
// set but SortKey, StaticPartitionValue and KeyPrefix.
func DefaultSchema() Schema {
	return Schema{
		PartitionKey: "pk", ExpiresAt: "expires_at", LeaseExpiresAt: "lease_expires_at",
		State: "state", ResponseBody: "response_body", Fingerprint: "fingerprint",
		Group: "group", GroupIndex: "by_group",
	}
}

// WithDefaults returns s with every empty field set to its default.
func (s Schema) WithDefaults() Schema {
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

// Validate reports a schema whose names collide, once defaults are
// applied, or that DynamoDB would refuse.
func (s Schema) Validate() error {
	s = s.WithDefaults()
	seen := map[string]string{}
	var errs []error
	for _, a := range []struct{ role, name string }{
		{"PartitionKey", s.PartitionKey}, {"SortKey", s.SortKey}, {"ExpiresAt", s.ExpiresAt},
		{"LeaseExpiresAt", s.LeaseExpiresAt}, {"State", s.State}, {"ResponseBody", s.ResponseBody},
		{"Fingerprint", s.Fingerprint}, {"Group", s.Group}, {"(fixed) tenant", AttrTenant}, {"(fixed) claim_id", AttrClaimID},
		{"(fixed) response_status", AttrResponseStatus}, {"(fixed) data", AttrData},
		{"(fixed) created_at", AttrCreatedAt}, {"(fixed) updated_at", AttrUpdatedAt},
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
