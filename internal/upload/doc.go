// Package upload is the upload service: it validates and fingerprints
// create requests, claims their idempotency key, presigns the S3 PUT,
// records completion from S3 events (each confirmed by S3 itself), and
// reports status.
//
// Object keys are the configured prefix followed by the upload id, which
// starts with the hash that addresses the idempotency record: finalize and
// status reach the record in one call, no client text ever enters an object
// key, and S3 load spreads over hashed prefixes. Presigning is pure CPU, so
// a create costs exactly one DynamoDB call, and so does a replay.
//
// The package has no Lambda imports; functions/ adapt events to it.
package upload
