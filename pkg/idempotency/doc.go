// Package idempotency makes a Lambda handler (any func(ctx, Req) (Resp,
// error)) idempotent: the outcome of a request is recorded against the
// client's idempotency key in DynamoDB, and a retried request is answered
// from the record instead of redoing its work. It is the Go counterpart of
// the idempotency utility of Powertools for AWS Lambda.
//
// [MakeIdempotent] wraps the handler: it takes the key from the request (a
// member path such as "headers.Idempotency-Key", or a function), checks
// that a retry repeats the request (its canonical JSON, or the parts named
// by paths), claims the key for the invocation's remaining time, records
// the JSON-encoded response, replays it, and releases the key when the
// handler fails. See [HandlerOptions].
//
// Underneath, a [Store] keeps the records. Each of this module's stores is
// a package of its own, so a program links only the one it uses:
// dynamostore (a DynamoDB table, through your own *dynamodb.Client),
// redisstore (Redis or Valkey) and memorystore (in memory, for tests); a
// store of your own is four methods, held to the same cases as these by
// package storetest. This package imports none of them, and no AWS SDK
// client. A record is addressed by an [ID], a fixed-length hash of (scope,
// key), and carries:
//
//   - a fingerprint of the request that claimed it, compared on every
//     replay;
//   - a claim id, unique per claim, so that late work for an earlier claim
//     of the same key can never touch a newer one;
//   - a state: [StateInProgress] with a lease while the handler runs, then
//     [StateCompleted] with the recorded response;
//   - an expiry, on DynamoDB the table's TTL attribute. Expiry is enforced
//     by the store, never left to the storage's own deletion, which can
//     lag (for days, on DynamoDB): a claim, a read or a completion treats
//     an expired record as absent.
//
// Every operation of each store is one round trip, a claim's replay
// included ([JudgeClaim] judges the holder the claim brings back). A
// DynamoDB table's layout (key names, an optional sort key with a static
// partition value, attribute names) is a [Schema].
package idempotency
