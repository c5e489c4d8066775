// Package client uploads files to an onceupload API so that a retried
// upload is stored exactly once.
//
// Upload does the whole job: it streams the file once for its size and
// SHA-256, mints one Idempotency-Key before the first attempt (or takes the
// caller's, to resume after a crash), creates the upload, PUTs the bytes to
// the presigned URL with the signed headers, and waits for the recorded
// completion. Create, Put, Status and Wait are the steps, for callers who
// need them.
//
// Every request is retried by the same rules: network errors, timeouts,
// 408, 425, 429, 500, 502, 503, 504 and 409 idempotency_in_progress, with
// full-jitter exponential backoff or the server's Retry-After (seconds or
// an HTTP date, capped); never any other 4xx, which cannot succeed. Waits
// end with the context. A PUT refused with 403 (an expired URL) gets a
// fresh URL by replaying the create with the same key.
package client
