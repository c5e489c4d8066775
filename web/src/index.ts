/**
 * onceupload's browser client: idempotent direct-to-S3 uploads.
 *
 * ```ts
 * import { UploadClient } from "@onceupload/web";
 * const client = new UploadClient({ apiBase: "https://api.example.com", hashWorkerUrl: "/assets/hash-worker.js" });
 * const rec = await client.add(file);            // key minted and stored (a single PUT's SHA-256 computed in a worker)
 * const done = await client.upload(rec.key, { onEvent: console.log });
 * // after a reload: for (const r of await client.pending()) await client.upload(r.key, { file: pickedAgainIfNeeded });
 * ```
 *
 * This is what an application uses, and what later releases keep: the
 * client, its stores, its errors and the few codes and helpers a page
 * needs (test/entry.test.ts lists them: adding one is a decision). The
 * rest (the retry loop, the transport, the hashers, the API calls) is the
 * client's own and may change.
 */
export { UploadClient } from "./client.js";
export type { UploadClientOptions, UploadEvent, RunOptions, ResumeOptions, CompletionPolicy, Step } from "./client.js";
export { UploadError, describeError, toUploadError } from "./errors.js";
export type { UploadErrorKind, UploadErrorInit, SerializedUploadError } from "./errors.js";
export { TOO_MANY_UPLOADS, PROBABLY_CORS, STORAGE_UNANSWERED } from "./codes.js";
export type { ErrorCode } from "./codes.js";
export { IndexedDBStore, MemoryStore, ACTIVE_PHASES } from "./store.js";
export type { UploadRecord, UploadStore, Phase, IndexedDBStoreOptions } from "./store.js";
export { normalizeBaseUrl } from "./baseurl.js";
export { printable } from "./text.js";
// Types the options and events above name.
export type {
  Authorization,
  AuthorizationRequest,
  CreateRequest,
  UploadResponse,
  PendingUpload,
  PendingMultipartUpload,
  CompletedUpload,
  AbortedUpload,
  MultipartLayout,
} from "./api.js";
export type { Clock, Network, RetryPolicy, RetryInfo } from "./retry.js";
export type { Hasher, HashOptions, FileHashes, HashedIn, PartHasher } from "./hash.js";
export type { PutTransport, PutRequest, PutResponse, PutOutcome, StorageProbe } from "./transport.js";
