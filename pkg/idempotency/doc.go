// Package idempotency records the outcome of a request against a client's
// idempotency key in DynamoDB, so that a retried request is answered from the
// record instead of redoing its work.
//
// It is the Go counterpart of the idempotency utility of Powertools for AWS
// Lambda, and knows nothing about what the requests do. A record is addressed
// by an [ID], a fixed-length hash of (tenant, key), and carries:
//
//   - a fingerprint of the request that claimed it, compared on every replay;
//   - a claim id, unique per claim, so that late work for an earlier claim of
//     the same key can never touch a newer one;
//   - a state: [StatePending] or [StateCompleted] with a recorded response,
//     or [StateInProgress] with a lease while side-effecting work runs;
//   - expires_at (epoch seconds), the table's TTL attribute. Expiry is
//     enforced here, never left to TTL deletion, which can lag for days: an
//     expired record is absent for every method of [DynamoStore].
//
// Every operation is one DynamoDB round trip. A claim is one conditional
// PutItem with ReturnValuesOnConditionCheckFailure=ALL_OLD, so a replay costs
// the same single call; a server that does not return the old item costs one
// more, strongly consistent, GetItem.
package idempotency
