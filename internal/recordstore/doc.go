// Package recordstore is the engine under pkg/idempotency and the upload
// service's record store: records of claims on keys in one DynamoDB table
// (dynamostore.Store, in the subpackage) or in memory (MemoryStore, the
// same semantics, held to the same conformance cases), with conditional
// updates, caller-defined states and groups.
//
// A record is addressed by an ID, a fixed-length hash of (tenant, key),
// and carries:
//
//   - a fingerprint of the request that claimed it, compared on every
//     replay;
//   - a claim id, unique per claim, so that late work for an earlier claim
//     of the same key can never touch a newer one;
//   - a state: StateInProgress with a lease while side-effecting work runs;
//     StatePending with a recorded response; a caller's own states in
//     between (the upload service's "aborting"), treated like pending; and
//     the final StateCompleted and StateAborted, which no update leaves;
//   - the caller's own fields (Data), written from a Go value and read
//     with Data.Decode: attribute values exist only inside this package;
//   - an expiry (epoch seconds), the table's TTL attribute. Expiry is
//     enforced here, never left to TTL deletion, which can lag for days: a
//     claim, Get, CountGroup and Update treat an expired record as absent,
//     except an Update with Revive, which completes the claim's own
//     expired record for work it started that finished late;
//   - optionally a group (Record.Group), which it leaves when it reaches a
//     final state: CountGroup counts a group's live, unfinished records
//     with one Query of a sparse index, so a caller can cap them (the
//     upload service caps a tenant's open multipart uploads) with no
//     counter that could drift.
//
// Every operation is one DynamoDB round trip (CountGroup one per 1 MB of
// keys it reads), a claim's replay included (dynamostore.Store.Claim says
// how). The table's layout is a Schema; Schema.DecodeItem reads the
// table's items as the store does, and Schema.DecodeStreamImage the images
// of its stream as Lambda delivers them: the one place both are decoded.
//
// This package calls no DynamoDB client (of DynamoDB's SDK it imports only
// the attribute value types and their codec), so a reader of the table's
// stream links none:
// the store that calls one is dynamostore, which encodes with this
// package's Codec.
package recordstore
