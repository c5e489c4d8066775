/**
 * onceupload's browser client: idempotent direct-to-S3 uploads.
 *
 * ```ts
 * import { UploadClient } from "@onceupload/web";
 * const client = new UploadClient({ apiBase: "https://api.example.com" });
 * const rec = await client.add(file);            // key minted and stored (a single PUT's SHA-256 computed in a worker)
 * const done = await client.upload(rec.key, { onEvent: console.log });
 * // after a reload: for (const r of await client.pending()) await client.upload(r.key, { file: pickedAgainIfNeeded });
 * // dist/lib/hash-worker.js must be served next to onceupload.js (else hashing runs on the page's thread).
 * // Files over 64 MiB start at once: their parts are hashed as they are sent, in a pool of workers.
 * ```
 */
export { UploadClient, DEFAULT_COMPLETION, DEFAULT_PUT_POLICY, DEFAULT_MULTIPART_BYTES, DEFAULT_PART_BYTES, MAX_PARTS, choosePartSize } from "./client.js";
export type { UploadClientOptions, UploadEvent, RunOptions, ResumeOptions, CompletionPolicy, Step } from "./client.js";
export { Api, apiError, parseUpload, classifyAnswer, describeAnswer } from "./api.js";
export { API_CODES, TOO_MANY_UPLOADS, CONDITIONAL_REQUEST_CONFLICT } from "./codes.js";
export type {
  ApiOptions,
  Authorization,
  AuthorizationRequest,
  ApiAnswer,
  CallOptions,
  CreateRequest,
  CompleteRequest,
  PartSha256,
  UploadInstructions,
  PartInstructions,
  StoredPart,
  MultipartLayout,
  PendingUpload,
  PendingMultipartUpload,
  CompletedUpload,
  AbortedUpload,
  UploadResponse,
} from "./api.js";
export { UploadError, isUploadError, isNotOnceupload, describeError, toUploadError } from "./errors.js";
export type { UploadErrorKind, UploadErrorInit, SerializedUploadError } from "./errors.js";
export {
  retry,
  backoffDelay,
  parseRetryAfter,
  isRetryableStatus,
  RETRYABLE_STATUSES,
  DEFAULT_POLICY,
  systemClock,
  browserNetwork,
} from "./retry.js";
export type { Clock, Network, RetryPolicy, RetryInfo, RetryOptions, AttemptContext, RequestState } from "./retry.js";
export { IndexedDBStore, MemoryStore, ACTIVE_PHASES } from "./store.js";
export type { UploadRecord, UploadStore, Phase, IndexedDBStoreOptions } from "./store.js";
export { hashFile, workerHasher, workerPool, inlinePartHasher, DEFAULT_HASH_CHUNK } from "./hash.js";
export type { HashOptions, FileHashes, Hasher, PartHasher, WorkerPoolOptions, WorkerLike } from "./hash.js";
export { xhrTransport, storageError, sendableHeaders, putOutcome, sendsIfNoneMatch } from "./transport.js";
export type { PutTransport, PutRequest, PutResponse, PutOutcome } from "./transport.js";
