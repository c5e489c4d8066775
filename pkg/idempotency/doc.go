// Package idempotency records the outcome of a request against a client's
// idempotency key in DynamoDB, so that a retried request is answered from the
// record instead of redoing its work.
//
// It is the Go counterpart of the idempotency utility of Powertools for AWS
// Lambda, in two layers.
//
// [MakeIdempotent] wraps any handler, func(ctx, Req) (Resp, error): it
// takes the key from the request (a member path such as
// "headers.Idempotency-Key", or a function), checks that a retry repeats the
// request (its canonical JSON, or the parts named by paths), claims the key
// for the invocation's remaining time, records the JSON-encoded response,
// replays it, and releases the key when the handler fails. See
// [HandlerOptions].
//
// Underneath, a [Store] keeps the records and knows nothing about what the
// requests do; callers with their own state machine (internal/upload) use it
// directly. A record is addressed by an [ID], a fixed-length hash of
// (tenant, key), and carries:
//
//   - a fingerprint of the request that claimed it, compared on every replay;
//   - a claim id, unique per claim, so that late work for an earlier claim of
//     the same key can never touch a newer one;
//   - a state: [StateInProgress] with a lease while side-effecting work
//     runs; [StatePending] with a recorded response; a caller's own states
//     in between (internal/upload's "aborting"), treated like pending; and the
//     final [StateCompleted] and [StateAborted], which no update leaves;
//   - an expiry (epoch seconds), the table's TTL attribute. Expiry is
//     enforced here, never left to TTL deletion, which can lag for days: an
//     expired record is absent for every method of [DynamoStore];
//   - optionally a group ([Record.Group]), which it leaves when it reaches a
//     final state: [DynamoStore.CountGroup] counts a group's live,
//     unfinished records with one Query of a sparse index, so a caller can
//     cap them (internal/upload caps a tenant's open multipart uploads) with no
//     counter that could drift.
//
// Every operation is one DynamoDB round trip (CountGroup one per 1 MB of
// keys it reads). A claim is one conditional
// PutItem with ReturnValuesOnConditionCheckFailure=ALL_OLD, so a replay costs
// the same single call and the holder is judged on the item that call
// returns; a server that does not return the old item costs one more,
// strongly consistent, GetItem. The table's layout (key names, an optional
// sort key with a static partition value, attribute names) is a [Schema].
//
// [DynamoStore] takes the SDK's own *dynamodb.Client (any [DynamoDBAPI]),
// so the client's middleware, endpoint and retry settings apply. Records
// are encoded with feature/dynamodb/attributevalue and the conditions with
// feature/dynamodb/expression.
package idempotency
