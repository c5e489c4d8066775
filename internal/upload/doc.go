// Package upload is the upload service: it validates and fingerprints
// create requests, claims their idempotency key, presigns the S3 PUT,
// records completion from S3 events (each confirmed by S3 itself), and
// reports status. It is the server's own, not a library: programs use
// pkg/api and pkg/client.
//
// Object keys are the configured prefix followed by the upload id, which
// starts with the hash that addresses the idempotency record: finalize and
// status reach the record in one call, no client text ever enters an object
// key, and S3 load spreads over hashed prefixes.
//
// DynamoDB calls per request, as the tests count them: presigning is pure
// CPU, so a single-PUT create costs one (the PutItem that claims the key
// with its answer), and so does every replay, of a multipart create too. A
// multipart create costs two around S3's CreateMultipartUpload (the claim,
// taken with a lease, then its answer), and three under
// Config.MaxPendingMultipart (a Query counts the tenant's unfinished
// uploads between them). Finalize costs one UpdateItem after its
// HeadObject; a status one GetItem, and while pending a HeadObject (and
// an UpdateItem when what it finds settles the upload).
//
// An upload's record (its fields, the upload a final record states, the
// event a change of it makes) is internal/upload/uploadrecord, which calls
// no AWS service, so the events function links no S3 client.
//
// The package has no Lambda imports; internal/handlers adapt events to it.
package upload
