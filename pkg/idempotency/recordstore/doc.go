// Package recordstore is the engine under two of package idempotency's
// stores, dynamostore (a DynamoDB table) and memorystore (the same
// semantics in memory, held to the same conformance cases), and the
// upload service's record store. Its Record is an idempotency.Record with
// more: conditional updates, the caller's own states and fields, and
// groups.
//
// A record is addressed by an idempotency.ID, a fixed-length hash of
// (tenant, key), and carries:
//
//   - a fingerprint of the request that claimed it, compared on every
//     replay;
//   - a claim id, unique per claim, so that late work for an earlier claim
//     of the same key can never touch a newer one;
//   - a state: idempotency.StateInProgress with a lease while
//     side-effecting work runs; StatePending with a recorded response; a
//     caller's own states in between (the upload service's "aborting"),
//     treated like pending; and the final idempotency.StateCompleted and
//     StateAborted, which no update leaves;
//   - the caller's own fields (Data), written from a Go value and read
//     with Data.Decode: attribute values exist only inside this package
//     and its stores;
//   - an expiry (epoch seconds), the table's TTL attribute. Expiry is
//     enforced by the stores, never left to TTL deletion, which can lag
//     for days: a claim, a read, a count and an update treat an expired
//     record as absent, except an Update with Revive, which completes the
//     claim's own expired record for work it started that finished late;
//   - optionally a group (Record.Group), which it leaves when it reaches a
//     final state: a GroupCounter counts a group's live, unfinished
//     records with one Query of a sparse index, so a caller can cap them
//     (the upload service caps a tenant's open multipart uploads) with no
//     counter that could drift.
//
// Every operation is one DynamoDB round trip (a count one per 1 MB of
// keys it reads), a claim's replay included (dynamostore's ClaimRecord
// says how). The table's layout is an idempotency.Schema; DecodeItem reads
// the table's items as the store does, for readers of the table and its
// stream.
//
// This package calls no DynamoDB client (of DynamoDB's SDK it imports only
// the attribute value types and their codec), so neither a reader of the
// table's stream nor a program on the memory store links one: the store
// that calls one is dynamostore, which encodes with this package's Codec.
package recordstore
