// Package client uploads files to an onceupload API so that a retried
// upload is stored exactly once.
//
// Upload does the whole job: it mints one Idempotency-Key before the first
// attempt (or takes the caller's, to resume after a crash), creates the
// upload, PUTs the bytes to the presigned URLs with the signed headers, and
// waits for the recorded completion. UploadReader does the same for bytes
// that are not a file on disk: any io.ReaderAt and its size. Create, Put,
// Status and Wait are the steps, for callers who need them.
//
// Files below MultipartThreshold (64 MiB) go in one PUT: the file is
// streamed once for its SHA-256, which the URL signs, then sent.
//
// Files from MultipartThreshold up go in parts (PartSizeFor), starting at
// once: there is no pass over the whole file before the create, which
// declares no whole-file SHA-256. Hashers (one per part in flight, up to
// half of GOMAXPROCS) read the parts, handed out in order, a bounded
// window ahead of the parts S3 has acknowledged, and hash each just before
// it is sent; parts are signed (their SHA-256 in the URL) in batches, and
// DefaultParallel of them are in flight, each read again from the file as
// its PUT's body and retried on its own. Memory stays a few MiB
// whatever the part size. Complete declares every part's SHA-256; the
// server compares them with what S3 holds (parts_mismatch when they
// differ, CodePartsMismatch), and the completed upload carries S3's
// compositeSha256 and no whole-file sha256. A file that changes while its
// parts are sent is not completed (CodeFileChanged). Given the key of an
// unfinished upload, Upload lists the parts S3 holds, hashes those parts of
// the file (in parallel) to check that they are the file's, refusing the
// upload with CodePartsMismatch before sending anything if one is not, and
// sends only the others. A completed upload in parts (after Complete, or
// replayed by the create, whose file's parts are then hashed, nothing sent)
// is the file only if its compositeSha256 is the one the file's parts make:
// another file sent with the key and completed first is CodePartsMismatch
// (Op "verify"), never a success. SignParts, ListParts, Complete and Abort
// are those steps.
//
// Every request is retried by the same rules, the policy every onceupload
// client shares (pkg/api/testdata/retry-policy.json; the tests read it):
// network errors, timeouts, 408, 425, 429 (but not too_many_uploads), 500,
// 502, 503, 504, 409 idempotency_in_progress and S3's 409
// ConditionalRequestConflict, with full-jitter exponential backoff (base
// 250 ms, cap 20 s) or the server's Retry-After (seconds or an HTTP date,
// capped at 60 s); never any other 4xx, which cannot succeed. Attempts are
// not counted by default: a request stops retrying when its next wait would
// end more than 5 minutes after its first attempt ended, so a network that drops
// for a few seconds or minutes does not fail an upload. Waits end with the
// context. A PUT refused with 403 (an expired URL) gets a
// fresh URL by replaying the create with the same key. A URL never
// overwrites (it signs If-None-Match: *), so a PUT answered 412 finds the
// object stored already, by an attempt whose answer was lost: not an
// error (PutAlreadyStored); Upload confirms with the status route, as
// after a 200.
//
// Failures that waiting cannot fix end a request after its one attempt
// instead of being retried for the budget. Before the API has answered the
// Client once: a host name that DNS says does not exist (ErrNoSuchHost), a
// refused connection (ErrConnectionRefused), an https:// URL at a port
// that speaks plain HTTP or the reverse (ErrServerSpeaksHTTP,
// ErrServerSpeaksHTTPS), and a certificate that fails verification
// (ErrCertificate): the base URL is most likely wrong. Only while no
// earlier attempt of the request may have reached the server, though: one
// that was sent and lost its answer may have been acted on (a create may
// have created its upload), so a refusal after it is retried as any
// network failure (Error.Reached says whether one may have). Once the API
// has answered, a certificate still ends a request at once, the API's or S3's;
// the others are retried, as a network on the move causes them for a
// moment. The *Error's Fault says which (errors.Is(err, ErrNoSuchHost)),
// FaultSentence says it with the host. An error, a retry's reason and a
// log line name the host and the innermost cause ("connection reset by
// peer", "i/o timeout"), never a URL's query: a presigned URL's signature
// and session token stay out of them.
//
// An answer that is not the API's (ErrNotOnceupload: a web server's page,
// a 2xx that is not JSON) ends a request at once before the API has
// answered the Client: the base URL is most likely wrong. Once the API has
// answered, it is taken for no answer (a captive portal's 511 or its page
// after a redirect, a proxy's 403 or 407 page) and retried until the
// attempts or the budget run out (Error.Exhausted).
//
// What S3 holds when an upload stops short is what UploadInput.OnStored
// said last (the parts answered, not those in flight that Progress
// counts); Result.Put says whether a single PUT sent the file, found it
// stored, or was not needed.
package client
