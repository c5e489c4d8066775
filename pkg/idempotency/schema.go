package idempotency

import "github.com/onceupload/onceupload/internal/recordstore"

// Schema names the DynamoDB table's key and the attributes a record is
// stored in. Every empty field takes its default, so a table that differs
// from [DefaultSchema] in one name sets that name only. The defaults are
// this project's table: partition key "pk", no sort key.
//
// The configurable names are the ones Powertools for AWS Lambda lets a
// persistence layer rename (its keyAttr, sortKeyAttr, staticPkValue,
// expiryAttr, inProgressExpiryAttr, statusAttr, dataAttr and
// validationKeyAttr). The other attributes keep fixed names: tenant,
// claim_id, data, created_at and updated_at; response_status and group are
// reserved: nothing writes response_status (items from before its status
// code was dropped may hold it), and a completion removes group (the upload
// service's records, on the same engine, keep a group there until they
// finish).
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
	// SortKey is set. Defaults to DefaultStaticPartitionValue.
	StaticPartitionValue string
	// KeyPrefix is written before the record's ID in the key attribute
	// that holds it, to keep records apart from the other items of a
	// single-table design, for example "IDEMPOTENCY#". Defaults to "".
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
}

// DefaultStaticPartitionValue is the partition key of every record when
// Schema.SortKey is set and Schema.StaticPartitionValue is not.
const DefaultStaticPartitionValue = recordstore.DefaultStaticPartitionValue

// DefaultSchema returns the schema of this project's table, every field
// set but SortKey, StaticPartitionValue and KeyPrefix.
func DefaultSchema() Schema {
	var s Schema
	d := recordstore.DefaultSchema()
	for _, n := range s.names(&d) {
		*n[0] = *n[1]
	}
	return s
}

// Validate reports a schema whose names collide, once defaults are
// applied.
func (s Schema) Validate() error { return s.engine().Validate() }

// engine is s as the engine's schema.
func (s Schema) engine() recordstore.Schema {
	var e recordstore.Schema
	for _, n := range s.names(&e) {
		*n[1] = *n[0]
	}
	return e
}

// names pairs each name of s with the engine's field for it.
func (s *Schema) names(e *recordstore.Schema) [][2]*string {
	return [][2]*string{
		{&s.PartitionKey, &e.PartitionKey}, {&s.SortKey, &e.SortKey}, {&s.StaticPartitionValue, &e.StaticPartitionValue},
		{&s.KeyPrefix, &e.KeyPrefix}, {&s.ExpiresAt, &e.ExpiresAt}, {&s.LeaseExpiresAt, &e.LeaseExpiresAt},
		{&s.State, &e.State}, {&s.ResponseBody, &e.ResponseBody}, {&s.Fingerprint, &e.Fingerprint},
	}
}
