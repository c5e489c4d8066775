/**
 * Every error code this client names, in one place: the API's (openapi.yaml's
 * ErrorCode), the storage's (S3's `<Code>`), and the client's own. An
 * {@link UploadError}'s `code` is one of these, or a code a newer server
 * sends. This module imports no other at run time, so that the modules that
 * read codes (errors, retry, api, transport, client) never import each other
 * for one.
 */
import type { components } from "./openapi.gen.js";

/** An error code of the API (openapi.yaml's ErrorCode). */
export type ErrorCode = components["schemas"]["ErrorCode"];

/**
 * The API's 429 to a multipart create: the tenant holds as many unfinished
 * multipart uploads as the server allows. Never retried: time frees no
 * place, only one of them completing or being aborted does. Nothing was
 * created, so the same create may be made again once one has.
 */
export const TOO_MANY_UPLOADS = "too_many_uploads" satisfies ErrorCode;
/** The API's 409: another request of the same key is running. Retried. */
export const IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress" satisfies ErrorCode;
/** The upload is completed already (a multipart route, or DELETE, too late). */
export const UPLOAD_COMPLETED = "upload_completed" satisfies ErrorCode;
/** The upload is neither pending nor, for this route, anything it can act on. */
export const UPLOAD_NOT_PENDING = "upload_not_pending" satisfies ErrorCode;
/** The API knows no such upload (never created, or expired). */
export const NOT_FOUND = "not_found" satisfies ErrorCode;
/** Complete: the storage lacks parts the request declared; they are listed, sent and completed again. */
export const PARTS_MISSING = "parts_missing" satisfies ErrorCode;
/** Complete: the storage holds other bytes under this upload than the parts declared. Final. */
export const PARTS_MISMATCH = "parts_mismatch" satisfies ErrorCode;

/** The API's error codes: every one of openapi.yaml's ErrorCode (tsc fails on one missing or extra). */
export const API_CODES: ReadonlySet<string> = new Set(
  Object.keys({
    idempotency_key_required: true,
    idempotency_key_invalid: true,
    invalid_request: true,
    unauthenticated: true,
    [NOT_FOUND]: true,
    [IDEMPOTENCY_IN_PROGRESS]: true,
    [UPLOAD_NOT_PENDING]: true,
    [UPLOAD_COMPLETED]: true,
    [PARTS_MISSING]: true,
    [PARTS_MISMATCH]: true,
    request_too_large: true,
    file_too_large: true,
    unsupported_media_type: true,
    idempotency_key_reuse: true,
    [TOO_MANY_UPLOADS]: true,
    internal_error: true,
    service_unavailable: true,
  } satisfies Record<ErrorCode, true>),
);

/**
 * S3's 409 to a PUT with `If-None-Match: *` (a single PUT's URL signs it)
 * that raced another PUT of the same object. Retried: the retry is stored
 * (200) or finds the object stored by the other one (412, see `putOutcome`).
 */
export const CONDITIONAL_REQUEST_CONFLICT = "ConditionalRequestConflict";
/** S3's 400 to an upload connection that stalled. Retried. */
export const REQUEST_TIMEOUT = "RequestTimeout";
/** S3's 400 to a presigned URL past its expiry: a fresh URL is asked for. */
export const EXPIRED_TOKEN = "ExpiredToken";
/** S3 no longer knows the multipart upload (completed or aborted meanwhile). */
export const NO_SUCH_UPLOAD = "NoSuchUpload";
/** S3's 400s to bytes that are not those the URL signs (their SHA-256 or their size): the file changed after it was picked. */
export const CHANGED_BYTES_CODES: ReadonlySet<string> = new Set(["BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest", "IncompleteBody"]);

/**
 * The client's own: the storage refuses this page's origin (CORS), as far
 * as a page can tell (kind "network"; see `StorageReach` in transport.ts):
 * a page cannot see a CORS failure as such, but the storage was found
 * reachable without CORS (a `no-cors` request got an answer) before and
 * after a PUT that failed with no answer, its third. Ends the run;
 * retryable, for a Resume once the rules allow the origin.
 */
export const PROBABLY_CORS = "probably_cors";
/**
 * The client's own: a storage request failed with no answer again (its
 * third try or later) before the storage answered anything in the run, and
 * nothing shows whether the network is down or the storage refuses this
 * origin (CORS). Kind "network", retried as any no-answer is: a retry
 * event's error, whose message is a hint a page may show ("no answer from
 * the storage; if this persists, check its CORS rules for this origin").
 */
export const STORAGE_UNANSWERED = "storage_unanswered";
/** The client's own: the file given to resume is not the one picked first (kind "file", retryable with the right file). */
export const FILE_MISMATCH = "file_mismatch";
/** The client's own: the browser kept no copy of the file; it must be picked again to resume (kind "file"). */
export const FILE_NEEDED = "file_needed";
/** The client's own: the upload was discarded (aborted on the server) while this page held its key (kind "state"). */
export const UPLOAD_ABORTED = "upload_aborted";
