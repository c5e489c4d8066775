/**
 * The upload client: one Idempotency-Key per logical upload, minted when the
 * file is picked and kept in IndexedDB with the upload's phase, so that a
 * reload or a browser restart resumes with the same key; create with
 * retries, PUT with progress, refresh of an expired URL by replaying the
 * create, and waiting for completion.
 *
 * Files up to `multipartBytes` (64 MiB) are hashed once (in a worker), and
 * their SHA-256 signed into their one PUT. Larger files go in parts and
 * start at once: no whole-file pass; the create gives no SHA-256, each part
 * is hashed (in a pool of workers, read whole for the native digest while
 * the parts fit in `wholeHashBytes`) just before it is sent, and complete
 * declares every part's SHA-256. The record keeps the part size (not the
 * file); a resumed upload checks the parts the storage holds against the
 * file picked again, and sends only the others.
 */
import {
  Api,
  type ApiAnswer,
  type ApiOptions,
  type CompletedUpload,
  type CreateRequest,
  type PartSha256,
  type PendingMultipartUpload,
  type PendingUpload,
  type UploadResponse,
} from "./api.js";
import { normalizeBaseUrl } from "./baseurl.js";
import { FILE_MISMATCH, FILE_NEEDED, NOT_FOUND, NO_SUCH_UPLOAD, PARTS_MISMATCH, PARTS_MISSING, TOO_MANY_UPLOADS, UPLOAD_ABORTED, UPLOAD_COMPLETED, UPLOAD_NOT_PENDING } from "./codes.js";
import { UploadError, abortError, toUploadError } from "./errors.js";
import {
  DEFAULT_HASH_CHUNK,
  DEFAULT_WHOLE_HASH_BYTES,
  type FileHashes,
  type HashedIn,
  type HashedPart,
  type Hasher,
  type PartHasher,
  type PartHolder,
  inlinePartHasher,
  isPartHolder,
  onPage,
  workerHasher,
  workerPool,
} from "./hash.js";
import { partCount, partRange, sendParts } from "./parts.js";
import { printable } from "./text.js";
import { type Clock, DEFAULT_POLICY, type Network, type RetryInfo, type RetryOptions, type RetryPolicy, Unretried, browserNetwork, retry, systemClock } from "./retry.js";
import { IndexedDBStore, type Phase, type UploadRecord, type UploadStore, foldRecords } from "./store.js";
import { type PutOutcome, type PutTransport, type StorageProbe, StorageReach, noCorsProbe, putOutcome, sendsIfNoneMatch, storageError, urlNoLongerWorks, xhrTransport } from "./transport.js";

/** What a retry was for: the create, a PUT (the file, or a part), a request for part URLs or the listing of parts, the completion. */
export type Step = "create" | "put" | "parts" | "complete";

/** What a UI hears while an upload runs. */
export type UploadEvent =
  | { type: "phase"; phase: Phase; record: UploadRecord }
  /** Hashing a file for a single PUT (multipart uploads have no such pass). */
  | { type: "hash-progress"; loaded: number; total: number }
  /**
   * Where the file was hashed (a single PUT: once its SHA-256 is known), or
   * where this run's parts are (multipart: once the first part's is known,
   * and again if that changes): "worker" in a Web Worker started from
   * {@link UploadClientOptions.hashWorkerUrl}, "page" on the page's own
   * thread. "page" where workers were expected means the worker script did
   * not start (a wrong hashWorkerUrl, or a Content-Security-Policy without
   * worker-src for it): uploads work, the page is less responsive while a
   * large file is hashed. Not sent by a hasher or partHasher of your own
   * that does not say.
   */
  | { type: "hashed-in"; where: HashedIn }
  /**
   * Resuming a multipart upload with the file picked again: the parts the
   * storage holds are hashed from it and compared (bytes hashed of theirs).
   */
  | { type: "verify-progress"; loaded: number; total: number }
  | { type: "upload-progress"; loaded: number; total: number }
  | { type: "created"; uploadId: string; status: UploadResponse["status"]; replay: boolean }
  | ({ type: "retry"; step: Step; partNumber?: number } & RetryInfo)
  | { type: "refresh"; reason: "expired" | "forbidden"; partNumber?: number }
  /**
   * A single PUT ended without an error: "stored" (S3 took the bytes) or
   * "already-stored" (S3 answered 412 to its If-None-Match: an earlier
   * attempt, whose answer was lost, or another PUT of this upload stored
   * them). Either way the upload is confirmed next with GET /uploads/{id}.
   */
  | { type: "stored"; outcome: PutOutcome }
  /** Multipart uploads: how many parts the storage holds (after listing them on resume, and after each part). */
  | { type: "parts"; done: number; total: number }
  | { type: "completed"; result: CompletedUpload }
  | { type: "failed"; error: UploadError };

export interface RunOptions {
  signal?: AbortSignal;
  onEvent?: (e: UploadEvent) => void;
}

export interface ResumeOptions extends RunOptions {
  /**
   * The file, picked again, when the record does not keep it. Checked
   * against the record: its size, and its SHA-256 (a single PUT) or that of
   * each part the storage holds (multipart).
   */
  file?: Blob;
}

export interface CompletionPolicy {
  /** First wait between status polls, in ms. */
  baseMs: number;
  /** Longest wait between status polls, in ms. */
  capMs: number;
  /** Give up waiting after this long, in ms. */
  timeoutMs: number;
}

export interface UploadClientOptions {
  /**
   * The API's base URL: absolute http(s). Kept, and sent to, in its one
   * spelling (scheme and host lower-cased, default port dropped, doubled and
   * trailing slashes removed: see {@link UploadClient.apiBase}); anything
   * else throws a TypeError here.
   */
  apiBase: string;
  /** Default: IndexedDB database "onceupload". */
  store?: UploadStore;
  /**
   * Authorization header value for the API (e.g. `Bearer <JWT>`), asked
   * before each request; after a 401 it is asked `{ fresh: true }` and the
   * request repeated once with a new token (see {@link ApiOptions.authorization}).
   */
  authorization?: ApiOptions["authorization"];
  /** Retries of POST /uploads and GET /uploads/{id}. */
  createPolicy?: Partial<RetryPolicy>;
  /** Retries of the PUT to storage (an attempt is limited by stalls, not by time). */
  putPolicy?: Partial<RetryPolicy>;
  completion?: Partial<CompletionPolicy>;
  /** Files up to this size are kept in IndexedDB, so a reload resumes without picking them again. Default 64 MiB. */
  keepFileBytes?: number;
  /** Files larger than this are sent in parts (multipart upload). Default 64 MiB. */
  multipartBytes?: number;
  /** The smallest part size; larger for files that would have over 10,000 parts. Default 8 MiB (S3's minimum is 5 MiB). */
  partBytes?: number;
  /** Part PUTs in flight at once. Default 4. */
  partConcurrency?: number;
  hashChunkBytes?: number;
  /**
   * Where the page serves the hashing worker, the package's
   * `hash-worker.js` (`@onceupload/web/hash-worker.js`): a bundler such as
   * esbuild neither copies it nor rewrites the URL the client would find it
   * at, so an application's build copies the file among its assets and
   * gives its URL here (relative URLs are the page's). Default: beside this
   * module (`new URL("./hash-worker.js", import.meta.url)`), which is right
   * for the module served as it is shipped, and for bundlers that copy what
   * that expression names (webpack 5, Vite). Where the worker cannot start,
   * files are hashed on the page's thread (a console warning, and the
   * "hashed-in" event, say so).
   */
  hashWorkerUrl?: string | URL;
  /**
   * Hashes picked files for a single PUT. Default: in a Web Worker
   * ({@link hashWorkerUrl}), or on the page's thread where there are no
   * workers.
   */
  hasher?: Hasher;
  /**
   * Makes the part hasher of one multipart run (closed when it ends).
   * Default: a pool of {@link hashWorkers} Web Workers ({@link hashWorkerUrl}),
   * or the page's thread where there are no workers.
   */
  partHasher?: () => PartHasher;
  /** Hashing workers of a multipart upload. Default: min(navigator.hardwareConcurrency, partConcurrency). */
  hashWorkers?: number;
  /**
   * A multipart upload's default part hasher reads parts whole and hashes
   * them with crypto.subtle.digest (native, several times faster than the
   * incremental wasm hasher) while every hashing worker's part fits in this
   * many bytes together (8 MiB parts in up to 8 workers, by default); larger
   * parts are read in chunks of hashChunkBytes. Default 64 MiB; 0 reads in
   * chunks always.
   */
  wholeHashBytes?: number;
  /** A PUT attempt without upload progress for this long is abandoned and retried. Default 60 s. */
  stallTimeoutMs?: number;
  /** Injected for tests. */
  fetch?: typeof fetch;
  transport?: PutTransport;
  /**
   * Whether the storage can be reached from this page outside CORS, asked
   * when its PUTs keep failing with no answer before it answered anything
   * in the run: the evidence that ends a run taken for a CORS refusal (see
   * `StorageReach`). Default: `fetch(origin, {mode: "no-cors"})`.
   */
  probeStorage?: StorageProbe;
  clock?: Clock;
  random?: () => number;
  /** Whether the device is online (retries wait for it). Default: navigator.onLine and the online/offline events. */
  network?: Network;
  newKey?: () => string;
  /** Web Locks, to keep two tabs from running one upload at once. Default: navigator.locks if present. */
  locks?: LockManager | null;
}

/** A PUT has no time limit of its own: an attempt ends when it stalls (stallTimeoutMs). Otherwise the shared policy. */
export const DEFAULT_PUT_POLICY: Partial<RetryPolicy> = { attemptTimeoutMs: Infinity };
export const DEFAULT_COMPLETION: CompletionPolicy = { baseMs: 200, capMs: 3_000, timeoutMs: 120_000 };

export const DEFAULT_MULTIPART_BYTES = 64 << 20;
export const DEFAULT_PART_BYTES = 8 << 20;
/** S3's limit on the parts of one upload. */
export const MAX_PARTS = 10_000;
/** A `parts_missing` answer to complete lists and sends the parts again at most this many times. */
const MAX_COMPLETE_ROUNDS = 3;

/**
 * The part size for a file: `minPartBytes`, or the smallest whole number of
 * MiB that keeps the file within 10,000 parts.
 */
export function choosePartSize(size: number, minPartBytes = DEFAULT_PART_BYTES): number {
  const needed = Math.ceil(size / MAX_PARTS);
  if (needed <= minPartBytes) return minPartBytes;
  const mib = 1 << 20;
  return Math.ceil(needed / mib) * mib;
}

/** A URL with less than this left is refreshed before use. */
const EXPIRY_MARGIN_MS = 10_000;
/** At most this many URL refreshes per run. */
const MAX_REFRESHES = 5;

export class UploadClient {
  /**
   * The API's base URL as given, normalised: the uploads it keeps are the
   * API's, not a spelling's (`http://127.0.0.1:3000/` is `http://127.0.0.1:3000`;
   * `http://localhost:3000` is another API).
   */
  readonly apiBase: string;
  readonly store: UploadStore;
  private readonly api: Api;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly network: Network;
  private readonly transport: PutTransport;
  private readonly probeStorage: StorageProbe;
  private readonly newKey: () => string;
  private readonly createPolicy: Partial<RetryPolicy>;
  private readonly putPolicy: Partial<RetryPolicy>;
  private readonly completion: CompletionPolicy;
  private readonly keepFileBytes: number;
  private readonly multipartBytes: number;
  private readonly partBytes: number;
  private readonly partConcurrency: number;
  private readonly hashChunkBytes: number;
  private readonly hasher: Hasher;
  private readonly partHasher: () => PartHasher;
  /**
   * Makes a run's pool of workers that also send the parts they read, for
   * parts of this size; undefined where the parts are hashed otherwise (an
   * application's partHasher or transport, no workers, parts too large to
   * hold: then the page sends them, read by the worker to hash them and
   * again by the PUT).
   */
  private readonly partSender: (partSize: number) => PartHolder | undefined;
  private readonly stallTimeoutMs: number;
  private readonly locks: LockManager | null;
  private readonly running = new Set<string>();
  /**
   * Files picked in this page, by key: a file too large to keep in IndexedDB
   * is still at hand until the page goes away, so upload(key) after add(file)
   * (or Resume after Cancel) needs no second pick and no second hash.
   */
  private readonly picked = new Map<string, Blob>();
  /**
   * Multipart uploads: the SHA-256 of the parts hashed in this page, by key,
   * for the blob they were hashed from. A Pause and Resume (or a
   * parts_missing round) needs not hash them again; a file picked again
   * starts afresh.
   */
  private readonly partHashes = new Map<string, { blob: Blob; hashes: Map<number, string> }>();

  constructor(opts: UploadClientOptions) {
    this.apiBase = normalizeBaseUrl(opts.apiBase);
    this.clock = opts.clock ?? systemClock;
    this.api = new Api({ baseUrl: this.apiBase, fetch: opts.fetch, authorization: opts.authorization, now: () => this.clock.now() });
    this.store = opts.store ?? new IndexedDBStore();
    this.random = opts.random ?? Math.random;
    this.network = opts.network ?? browserNetwork;
    this.transport = opts.transport ?? xhrTransport;
    this.probeStorage = opts.probeStorage ?? noCorsProbe;
    this.newKey = opts.newKey ?? mintKey;
    this.createPolicy = { ...DEFAULT_POLICY, ...opts.createPolicy };
    this.putPolicy = { ...DEFAULT_POLICY, ...DEFAULT_PUT_POLICY, ...opts.putPolicy };
    this.completion = { ...DEFAULT_COMPLETION, ...opts.completion };
    this.keepFileBytes = opts.keepFileBytes ?? 64 << 20;
    this.multipartBytes = opts.multipartBytes ?? DEFAULT_MULTIPART_BYTES;
    this.partBytes = opts.partBytes ?? DEFAULT_PART_BYTES;
    this.partConcurrency = Math.max(1, opts.partConcurrency ?? 4);
    this.hashChunkBytes = opts.hashChunkBytes ?? DEFAULT_HASH_CHUNK;
    const workerUrl = typeof Worker === "function" && (!opts.hasher || !opts.partHasher) ? (opts.hashWorkerUrl ?? besideThisModule()) : undefined;
    this.hasher = opts.hasher ?? (workerUrl ? workerHasher(workerUrl) : onPage);
    const workers = Math.max(1, opts.hashWorkers ?? Math.min(globalThis.navigator?.hardwareConcurrency || 2, this.partConcurrency));
    const chunkBytes = this.hashChunkBytes;
    const wholeBytes = Math.max(0, opts.wholeHashBytes ?? DEFAULT_WHOLE_HASH_BYTES);
    this.partHasher =
      opts.partHasher ?? (workerUrl ? () => workerPool({ url: workerUrl, size: workers, chunkBytes, wholeBytes }) : () => inlinePartHasher(chunkBytes, wholeBytes));
    // At most partConcurrency parts are held by the workers at once, in
    // all, and as many are in XHR's hands being sent: together they must
    // fit in wholeHashBytes (8 MiB parts, 4 at a time, in the 64 MiB default).
    const holdable = Math.floor(wholeBytes / (2 * this.partConcurrency));
    this.partSender = (partSize) =>
      workerUrl && !opts.partHasher && !opts.transport && partSize <= holdable
        ? workerPool({ url: workerUrl, size: workers, chunkBytes, wholeBytes, holds: true })
        : undefined;
    this.stallTimeoutMs = opts.stallTimeoutMs ?? 60_000;
    this.locks = opts.locks !== undefined ? opts.locks : (globalThis.navigator?.locks ?? null);
  }

  /**
   * Starts a logical upload for a picked file: mints its Idempotency-Key and
   * stores it before anything else, then (a file for a single PUT) computes
   * its SHA-256; a file for a multipart upload is ready at once, its parts
   * are hashed as they are sent. Resolves with the record in phase
   * "ready"; pass its key to {@link upload}.
   */
  async add(file: File, opts: RunOptions = {}): Promise<UploadRecord> {
    if (file.size === 0) {
      throw new UploadError({ kind: "file", message: `"${printable(file.name)}" is empty; there is nothing to upload.` });
    }
    const now = this.clock.now();
    let rec: UploadRecord = {
      key: this.newKey(),
      api: this.apiBase,
      filename: file.name,
      contentType: file.type || "application/octet-stream",
      size: file.size,
      lastModified: file.lastModified,
      file: file.size <= this.keepFileBytes ? file : undefined,
      partSize: file.size > this.multipartBytes ? choosePartSize(file.size, this.partBytes) : undefined,
      phase: "hashing",
      createdAt: now,
      updatedAt: now,
    };
    if (rec.partSize) rec.phase = "ready";
    await this.store.put(rec);
    this.picked.set(rec.key, file);
    emit(opts, { type: "phase", phase: rec.phase, record: rec });
    if (rec.partSize) return rec;
    try {
      const { sha256 } = await this.hash(file, opts);
      rec = { ...rec, sha256, phase: "ready", updatedAt: this.clock.now() };
      await this.store.put(rec);
      emit(opts, { type: "phase", phase: rec.phase, record: rec });
      return rec;
    } catch (e) {
      const err = toUploadError(e, "file");
      rec = { ...rec, phase: err.kind === "aborted" ? "paused" : "failed", error: err.kind === "aborted" ? undefined : err.toJSON(), updatedAt: this.clock.now() };
      await this.store.put(rec).catch(() => undefined);
      emit(opts, { type: "phase", phase: rec.phase, record: rec });
      throw err;
    }
  }

  /** {@link add} then {@link upload}. */
  async start(file: File, opts: RunOptions = {}): Promise<CompletedUpload> {
    const rec = await this.add(file, opts);
    return this.upload(rec.key, opts);
  }

  /**
   * Records of this API that are not completed (to list after a reload),
   * oldest first. Records that earlier versions kept under another spelling
   * of the base URL are found, and respelled; several records of one file
   * that this left are folded into one (see {@link foldRecords}), so that a
   * reload resumes the upload under way rather than offering a second one.
   */
  async pending(): Promise<UploadRecord[]> {
    const held = await this.heldLocks();
    const folded = foldRecords(await this.store.list(), this.apiBase, (key) => this.running.has(key) || held.has(`onceupload:${key}`));
    // The survivor first: a reload between the two leaves the duplicates, to be folded next time, never no record.
    for (const r of folded.put) await this.store.put(r);
    for (const key of folded.drop) {
      await this.store.delete(key);
      this.picked.delete(key);
      this.partHashes.delete(key);
    }
    return folded.records.filter((r) => r.phase !== "completed");
  }

  /** The Web Locks held now (by any tab of this origin): uploads running elsewhere. */
  private async heldLocks(): Promise<Set<string>> {
    try {
      const state = this.locks && typeof this.locks.query === "function" ? await this.locks.query() : undefined;
      return new Set((state?.held ?? []).map((l) => l.name ?? ""));
    } catch {
      return new Set();
    }
  }

  async get(key: string): Promise<UploadRecord | undefined> {
    return this.store.get(key);
  }

  /** Forgets an upload (its key and kept file). Does not delete anything on the server: see {@link discard}. */
  async remove(key: string): Promise<void> {
    this.picked.delete(key);
    this.partHashes.delete(key);
    await this.store.delete(key);
  }

  /** Whether {@link upload} can run without the file being picked again (kept in IndexedDB, or picked in this page). */
  hasFile(rec: UploadRecord): boolean {
    return !!rec.file || this.picked.has(rec.key);
  }

  /**
   * Gives up an upload for good: a multipart upload is deleted on the server
   * (DELETE /uploads/{id}: the storage drops the parts it holds), then the
   * key is forgotten. Resolves with "aborted", "completed" (too late: it
   * completed meanwhile; its record is forgotten all the same) or
   * "forgotten" (nothing was held on the server). Not while it runs: cancel first.
   */
  async discard(key: string, opts: RunOptions = {}): Promise<"aborted" | "completed" | "forgotten"> {
    if (this.running.has(key)) throw busy();
    const rec = await this.store.get(key);
    if (!rec) return "forgotten";
    let outcome: "aborted" | "completed" | "forgotten" = "forgotten";
    // A single PUT stores all or nothing: an unfinished one holds nothing to delete.
    if (rec.partSize && (rec.uploadId || rec.sent)) {
      let uploadId = rec.uploadId;
      if (!uploadId) {
        // The create's answer never arrived: replaying it with the same key says which upload the server holds.
        try {
          uploadId = (await this.create(rec.key, this.createRequest(rec), opts)).body.uploadId;
        } catch (e) {
          // Refused for too many unfinished uploads: the key holds none (it would be replayed).
          if (toUploadError(e).code !== TOO_MANY_UPLOADS) throw e;
          await this.remove(key);
          return "forgotten";
        }
      }
      try {
        const ans = await retry((ctx) => this.api.abort(uploadId, ctx), this.retryOptions("complete", opts));
        outcome = ans.body.status === "completed" ? "completed" : "aborted";
      } catch (e) {
        const err = toUploadError(e);
        if (err.code === UPLOAD_COMPLETED) outcome = "completed";
        // Expired on the server already: nothing is left to delete.
        else if (err.code !== NOT_FOUND) throw err;
      }
    }
    await this.remove(key);
    return outcome;
  }

  /** Whether this page is running the upload now. */
  isRunning(key: string): boolean {
    return this.running.has(key);
  }

  /**
   * Runs (or resumes) the upload of a stored record, with the key it was
   * given when the file was picked, up to completion. Rejects with an
   * UploadError; the record keeps the phase ("paused" when aborted, else
   * "failed") and the error.
   */
  async upload(key: string, opts: ResumeOptions = {}): Promise<CompletedUpload> {
    if (this.running.has(key)) throw busy();
    this.running.add(key);
    try {
      if (!this.locks) return await this.run(key, opts);
      return await this.locks.request(`onceupload:${key}`, { ifAvailable: true }, async (lock) => {
        if (!lock) throw busy();
        return this.run(key, opts);
      });
    } finally {
      this.running.delete(key);
    }
  }

  private async run(key: string, opts: ResumeOptions): Promise<CompletedUpload> {
    let rec = await this.store.get(key);
    if (!rec) throw new UploadError({ kind: "state", message: "This upload is no longer stored in the browser." });
    const save = async (patch: Partial<UploadRecord>) => {
      const before = rec!.phase;
      rec = { ...rec!, ...patch, updatedAt: this.clock.now() };
      await this.store.put(rec);
      if (rec.phase !== before) emit(opts, { type: "phase", phase: rec.phase, record: rec });
    };
    try {
      if (rec.phase === "completed" && rec.result) return rec.result;
      const blob = this.fileFor(rec, opts.file);
      if (rec.partSize) {
        // No whole-file pass: the parts are hashed as they are sent, and a
        // file picked again is checked against the parts the storage holds.
        const meta = this.createRequest(rec);
        // Never sent: the create makes a new upload, which holds no parts.
        const firstTime = !rec.sent && !rec.uploadId;
        await save({ phase: "creating", error: undefined, sent: true });
        const result = await this.runMultipart(rec, meta, blob, firstTime, save, opts);
        return await this.finish(key, result, meta, save, opts);
      }
      // A file picked again is checked against the record; the very file
      // hashed by add() in this page need not be.
      if (!rec.sha256 || (opts.file && opts.file !== this.picked.get(key))) {
        await save({ phase: "hashing", error: undefined });
        const { sha256 } = await this.hash(blob, opts);
        if (rec.sha256 && rec.sha256 !== sha256) {
          throw new UploadError({ kind: "file", code: FILE_MISMATCH, retryable: true, message: `This is not the same "${printable(rec.filename)}": its content differs from the file picked first.` });
        }
        await save({ sha256, file: rec.file ?? (blob.size <= this.keepFileBytes ? blob : undefined) });
        this.picked.set(key, blob);
      }
      const meta = this.createRequest(rec);

      await save({ phase: "creating", error: undefined, sent: true });
      let created = (await this.create(rec.key, meta, opts)).body;
      let refreshes = 0;
      let justRefreshed = false;
      // Across the PUTs of this run (a refreshed URL's too): a storage that never answers this page.
      const reach = new StorageReach(() => this.network.isOnline(), this.probeStorage);
      const refresh = async (reason: "expired" | "forbidden") => {
        refreshes++;
        justRefreshed = true;
        emit(opts, { type: "refresh", reason });
        created = (await this.create(rec!.key, meta, opts)).body;
      };
      if (created.status === "pending" && created.multipart) {
        throw new UploadError({ kind: "protocol", message: "The API answered with a multipart upload to a single-PUT create." });
      }
      while (created.status === "pending") {
        await save({ phase: "uploading", uploadId: created.uploadId, storageKey: created.storageKey });
        if (!justRefreshed && refreshes < MAX_REFRESHES && this.expiresSoon(created)) {
          await refresh("expired");
          continue;
        }
        try {
          // Stored, or already stored (412): the status route confirms either.
          await this.put(created, blob, opts, reach);
          break;
        } catch (e) {
          // A 403 from storage is most often an expired URL: replaying the
          // create with the same key gets a freshly signed one. Not when the
          // first try with a fresh URL was refused too.
          const err = toUploadError(e);
          const freshRefused = justRefreshed && err.attempts === 1;
          if (err.kind === "storage" && urlNoLongerWorks(err) && !freshRefused && refreshes < MAX_REFRESHES) {
            await refresh("forbidden");
            continue;
          }
          throw err;
        }
      }

      let result: CompletedUpload;
      if (created.status === "completed") {
        result = created;
      } else if (created.status === "aborted") {
        throw discarded();
      } else {
        await save({ phase: "completing", uploadId: created.uploadId, storageKey: created.storageKey });
        result = await this.waitForCompletion(created.uploadId, opts);
      }
      return await this.finish(key, result, meta, save, opts);
    } catch (e) {
      const err = toUploadError(e);
      const aborted = err.kind === "aborted";
      // A create refused for too many unfinished uploads created nothing
      // (a key that holds an upload is replayed, never refused): the server
      // holds nothing under this key, so Discard has nothing to delete.
      const nothingHeld = err.code === TOO_MANY_UPLOADS && !rec.uploadId;
      await save({ phase: aborted ? "paused" : "failed", error: aborted ? undefined : err.toJSON(), ...(nothingHeld ? { sent: false } : {}) }).catch(() => undefined);
      emit(opts, { type: "failed", error: err });
      throw err;
    }
  }

  private async finish(key: string, result: CompletedUpload, meta: CreateRequest, save: (patch: Partial<UploadRecord>) => Promise<void>, opts: RunOptions): Promise<CompletedUpload> {
    checkSame(result, meta);
    await save({ phase: "completed", result, uploadId: result.uploadId, storageKey: result.storageKey, file: undefined, error: undefined });
    // The key has done its work: forget it (and the kept file).
    await this.store.delete(key);
    this.picked.delete(key);
    this.partHashes.delete(key);
    emit(opts, { type: "completed", result });
    return result;
  }

  /**
   * Create (or replay) the multipart upload, send the parts the storage
   * lacks, complete it declaring every part's SHA-256. A replayed create
   * lists the parts first: after a reload or a Pause only the missing ones
   * are sent, once those held are found to be this file's.
   */
  private async runMultipart(
    rec: UploadRecord,
    meta: CreateRequest,
    blob: Blob,
    firstTime: boolean,
    save: (patch: Partial<UploadRecord>) => Promise<void>,
    opts: RunOptions,
  ): Promise<CompletedUpload> {
    // Started now, so that the workers load while the upload is created.
    const sender = this.partSender(meta.partSize!);
    const hasher = tellWhere(sender ?? this.partHasher(), opts, sender !== undefined);
    // A new upload holds no parts: its first parts are hashed (and held, by
    // a pool that sends) while it is created, so that the first PUT starts
    // as soon as it exists.
    const early = new Map<number, Promise<HashedPart>>();
    if (firstTime) {
      const count = partCount(rec.size, meta.partSize!);
      for (let n = 1; n <= Math.min(count, this.partConcurrency); n++) {
        const { start, end } = partRange(n, meta.partSize!, rec.size);
        const part = blob.slice(start, end);
        const p = isPartHolder(hasher) ? hasher.hold(part, opts.signal) : hasher.hash(part, opts.signal).then((sha256) => ({ sha256 }));
        p.catch(() => undefined);
        early.set(n, p);
      }
    }
    try {
      return await this.multipart(rec, meta, blob, hasher, early, save, opts);
    } finally {
      hasher.close();
    }
  }

  private async multipart(
    rec: UploadRecord,
    meta: CreateRequest,
    blob: Blob,
    hasher: PartHasher,
    early: Map<number, Promise<HashedPart>>,
    save: (patch: Partial<UploadRecord>) => Promise<void>,
    opts: RunOptions,
  ): Promise<CompletedUpload> {
    const ans = await this.create(rec.key, meta, opts);
    const created = ans.body;
    if (created.status === "completed") return created;
    if (created.status === "aborted") throw discarded();
    if (!created.multipart) throw new UploadError({ kind: "protocol", message: "The API answered a multipart create without a multipart layout." });
    const upload: PendingMultipartUpload = created;
    const partSize = meta.partSize!;
    const count = partCount(rec.size, partSize);
    const hashes = this.hashesFor(rec, blob);
    // A record of an earlier version: its create declared the file's
    // SHA-256, so each part must be the one its whole-file pass hashed.
    const expected = rec.partSha256 ? new Map(rec.partSha256.map((h, i) => [i + 1, h.toLowerCase()])) : undefined;
    await save({ phase: "uploading", uploadId: upload.uploadId, storageKey: upload.storageKey });
    // Across this run's part PUTs (and complete rounds): a storage that never answers this page.
    const reach = new StorageReach(() => this.network.isOnline(), this.probeStorage);
    try {
      // A first-time create holds no parts yet: no need to ask.
      let listed = ans.replay;
      for (let round = 1; ; round++) {
        const held = listed ? await retry((ctx) => this.api.listParts(upload.uploadId, ctx), this.retryOptions("parts", opts)) : [];
        listed = true;
        // Only where nothing is held: a held part is checked with a hash of its own.
        const useEarly = held.length === 0 && round === 1;
        // Early parts not used give their bytes back at once: they count against the parts held.
        if (!useEarly && round === 1) for (const p of early.values()) p.then((h) => h.held?.release(), () => undefined);
        await sendParts({
          api: this.api,
          transport: this.transport,
          uploadId: upload.uploadId,
          blob,
          filename: rec.filename,
          partSize,
          hashes,
          expected,
          hasher,
          early: useEarly ? early : undefined,
          held,
          concurrency: this.partConcurrency,
          stallTimeoutMs: this.stallTimeoutMs,
          reach,
          signal: opts.signal,
          retryOptions: (step, partNumber) => this.retryOptions(step, opts, partNumber),
          now: () => this.clock.now(),
          onProgress: (loaded, total) => emit(opts, { type: "upload-progress", loaded, total }),
          onParts: (done, total) => emit(opts, { type: "parts", done, total }),
          onRefresh: (partNumber) => emit(opts, { type: "refresh", reason: "forbidden", partNumber }),
          onVerify: (loaded, total) => emit(opts, { type: "verify-progress", loaded, total }),
          // The parts held are this file's: it need not be picked again for a Resume in this page.
          onChecked: () => this.picked.set(rec.key, blob),
        });
        await save({ phase: "completing" });
        const parts: PartSha256[] = [];
        for (let n = 1; n <= count; n++) {
          const sha256 = hashes.get(n);
          if (sha256 === undefined) throw new UploadError({ kind: "state", message: `Part ${n} was sent without its SHA-256 being known.` });
          parts.push({ partNumber: n, sha256 });
        }
        try {
          const done = await retry((ctx) => this.api.complete(upload.uploadId, { parts }, ctx), this.retryOptions("complete", opts));
          if (done.body.status !== "completed") throw new UploadError({ kind: "protocol", message: `The API answered complete with status "${done.body.status}".` });
          return done.body;
        } catch (e) {
          const err = toUploadError(e);
          if (err.code === PARTS_MISMATCH) throw partsMismatch(err, rec.filename);
          // The storage lacks parts we thought sent (or lost them): list, send, complete again.
          if (err.code !== PARTS_MISSING || round >= MAX_COMPLETE_ROUNDS) throw err;
          await save({ phase: "uploading" });
        }
      }
    } catch (e) {
      const err = toUploadError(e);
      // The API says the upload is no longer pending, or the storage no
      // longer knows it: completed meanwhile (another tab, an earlier complete
      // whose answer was lost), or discarded.
      if (err.code !== UPLOAD_NOT_PENDING && !(err.kind === "storage" && err.code === NO_SUCH_UPLOAD)) throw err;
      const now = await retry((ctx) => this.api.get(upload.uploadId, ctx), this.retryOptions("complete", opts));
      if (now.body.status === "completed") return now.body;
      throw discarded();
    }
  }

  /**
   * The part hashes known for this record's upload from this very blob:
   * those hashed from it in this page (kept across a Pause). A record of an
   * earlier version of this client keeps every part's from its whole-file
   * pass; they are this blob's only if it is the very file picked in this
   * page. Any other blob (picked again after a reload, or the copy kept in
   * IndexedDB) starts with none: the parts the storage holds are hashed
   * from it and compared, before anything is sent.
   */
  private hashesFor(rec: UploadRecord, blob: Blob): Map<number, string> {
    const kept = this.partHashes.get(rec.key);
    if (kept?.blob === blob) return kept.hashes;
    const hashes = new Map<number, string>();
    if (blob === this.picked.get(rec.key)) rec.partSha256?.forEach((h, i) => hashes.set(i + 1, h.toLowerCase()));
    this.partHashes.set(rec.key, { blob, hashes });
    return hashes;
  }

  private createRequest(rec: UploadRecord): CreateRequest {
    // A multipart record of this version has no whole-file SHA-256 (one of
    // an earlier version has, and its create is replayed with it: the same
    // key must send the same body).
    const meta: CreateRequest = { filename: rec.filename, contentType: rec.contentType, size: rec.size };
    if (rec.sha256) meta.sha256 = rec.sha256;
    if (rec.partSize) meta.partSize = rec.partSize;
    return meta;
  }

  private retryOptions(step: Step, opts: RunOptions, partNumber?: number): RetryOptions {
    return {
      policy: step === "put" ? this.putPolicy : this.createPolicy,
      clock: this.clock,
      random: this.random,
      network: this.network,
      signal: opts.signal,
      onRetry: (info) => emit(opts, { type: "retry", step, partNumber, ...info }),
    };
  }

  private fileFor(rec: UploadRecord, picked?: Blob): Blob {
    if (picked) {
      if (picked.size !== rec.size) {
        throw new UploadError({ kind: "file", code: FILE_MISMATCH, retryable: true, message: `This is not the same "${printable(rec.filename)}": it has ${picked.size} bytes, not ${rec.size}.` });
      }
      return picked;
    }
    const blob = rec.file ?? this.picked.get(rec.key);
    if (blob) return blob;
    throw new UploadError({ kind: "file", code: FILE_NEEDED, retryable: true, message: `Choose "${printable(rec.filename)}" again to resume: the browser did not keep a copy of it.` });
  }

  /** The whole file's SHA-256 (a single PUT's file: a multipart upload hashes its parts as they are sent). */
  private async hash(blob: Blob, opts: RunOptions): Promise<FileHashes> {
    try {
      const hashes = await this.hasher(blob, {
        chunkBytes: this.hashChunkBytes,
        signal: opts.signal,
        onProgress: (loaded, total) => emit(opts, { type: "hash-progress", loaded, total }),
      });
      if (hashes.hashedIn) emit(opts, { type: "hashed-in", where: hashes.hashedIn });
      return hashes;
    } catch (e) {
      if (opts.signal?.aborted) throw abortError(opts.signal);
      if (e instanceof UploadError) throw e;
      throw new UploadError({ kind: "file", message: `The file cannot be read (${e instanceof Error ? e.message : String(e)}). Pick it again.`, cause: e });
    }
  }

  private async create(key: string, meta: CreateRequest, opts: RunOptions): Promise<ApiAnswer> {
    const ans = await retry((ctx) => this.api.create(key, meta, ctx), this.retryOptions("create", opts));
    checkSame(ans.body, meta);
    emit(opts, { type: "created", uploadId: ans.body.uploadId, status: ans.body.status, replay: ans.replay });
    return ans;
  }

  private expiresSoon(p: PendingUpload): boolean {
    const at = Date.parse(p.upload.expiresAt);
    return Number.isFinite(at) && at - this.clock.now() < EXPIRY_MARGIN_MS;
  }

  /**
   * The single PUT, retried. It ends on either outcome of the shared policy:
   * S3 took the bytes (2xx), or, the URL signing If-None-Match: *, answered
   * 412 because the object is stored already (an earlier attempt whose
   * answer was lost stored it): not an error, not retried. Either way the
   * caller confirms with GET /uploads/{id}.
   */
  private async put(p: PendingUpload, blob: Blob, opts: RunOptions, reach: StorageReach): Promise<PutOutcome> {
    const headers = p.upload.headers ?? {};
    const createOnly = sendsIfNoneMatch(headers);
    const transport = reach.watch(this.transport);
    const outcome = await retry(
      async (ctx) => {
        emit(opts, { type: "upload-progress", loaded: 0, total: blob.size });
        const res = await transport({
          url: p.upload.url,
          method: p.upload.method ?? "PUT",
          headers,
          body: blob,
          signal: ctx.signal,
          stallTimeoutMs: this.stallTimeoutMs,
          onProgress: (loaded, total) => emit(opts, { type: "upload-progress", loaded, total }),
        });
        const done = putOutcome(res, createOnly);
        if (!done) throw storageError(res);
        return done;
      },
      this.retryOptions("put", opts),
    ).catch((e: unknown) => {
      throw e instanceof Unretried ? e.error : e;
    });
    // All of the file is in storage, whatever this attempt sent.
    emit(opts, { type: "upload-progress", loaded: blob.size, total: blob.size });
    emit(opts, { type: "stored", outcome });
    return outcome;
  }

  /** Polls GET /uploads/{id} until the upload is completed (GET also completes it when the storage event was lost). */
  private async waitForCompletion(uploadId: string, opts: RunOptions): Promise<CompletedUpload> {
    const started = this.clock.now();
    for (let poll = 0; ; poll++) {
      const ans = await retry((ctx) => this.api.get(uploadId, ctx), this.retryOptions("complete", opts));
      if (ans.body.status === "completed") return ans.body;
      const ceiling = Math.min(this.completion.capMs, this.completion.baseMs * 2 ** Math.min(poll, 30));
      const delay = Math.floor(ceiling / 2 + (this.random() * ceiling) / 2);
      if (this.clock.now() + delay - started > this.completion.timeoutMs) {
        throw new UploadError({
          kind: "deadline",
          retryable: true,
          attempts: poll + 1,
          message: `the upload was sent but not confirmed within ${Math.round(this.completion.timeoutMs / 1000)} s`,
        });
      }
      await this.clock.sleep(delay, opts.signal);
    }
  }
}

/**
 * hash-worker.js beside this module, or undefined where import.meta.url is
 * no URL (a bundle that is not an ES module): then files are hashed on the
 * page's thread, unless hashWorkerUrl says where the worker is. The
 * expression stays literal so that webpack 5 and Vite, which copy the file
 * it names, find it.
 */
function besideThisModule(): URL | undefined {
  try {
    return new URL("./hash-worker.js", import.meta.url);
  } catch {
    console.warn("onceupload: no hashWorkerUrl and no import.meta.url to find hash-worker.js beside this module: hashing on the page's thread");
    return undefined;
  }
}

/**
 * Wraps a run's part hasher to send "hashed-in" when it first says where it
 * hashes, and when that changes. Only the client's own pool may hold parts
 * (`holds`): an application's partHasher keeps the page sending.
 */
function tellWhere(hasher: PartHasher, opts: RunOptions, holds: boolean): PartHasher {
  let told: HashedIn | undefined;
  const tell = () => {
    const where = hasher.hashedIn;
    if (where && where !== told) {
      told = where;
      emit(opts, { type: "hashed-in", where });
    }
  };
  const wrapped: PartHasher = {
    async hash(part, signal) {
      const sha256 = await hasher.hash(part, signal);
      tell();
      return sha256;
    },
    close: () => hasher.close(),
  };
  if (!holds || !isPartHolder(hasher)) return wrapped;
  const holder: PartHolder = {
    ...wrapped,
    async hold(part, signal) {
      const got = await hasher.hold(part, signal);
      tell();
      return got;
    },
  };
  return holder;
}

/** A fresh Idempotency-Key: a random UUID (36 visible ASCII characters). */
function mintKey(): string {
  if (typeof globalThis.crypto?.randomUUID !== "function") {
    throw new UploadError({ kind: "state", message: "This page needs a secure context (https, or http://localhost) to make upload keys." });
  }
  return globalThis.crypto.randomUUID();
}

function busy(): UploadError {
  return new UploadError({ kind: "busy", retryable: true, message: "This upload is already running (in this page or another tab)." });
}

/**
 * Complete's 409 parts_mismatch: the parts the storage holds under this
 * upload are not this file's. Nothing was stored; final (the same
 * declaration gets the same answer).
 */
function partsMismatch(err: UploadError, filename: string): UploadError {
  return new UploadError({
    kind: "api",
    status: err.status,
    code: err.code,
    retryable: false,
    attempts: err.attempts,
    message: `The parts stored for this upload are not those of "${printable(filename)}" (${err.message}); nothing was stored. Discard this upload and upload the file again.`,
    cause: err,
  });
}

function discarded(): UploadError {
  return new UploadError({ kind: "state", code: UPLOAD_ABORTED, message: "This upload was discarded." });
}

/** The server's upload must be the one asked for (same size and content, and the same parts). */
function checkSame(u: UploadResponse, meta: CreateRequest): void {
  // A multipart upload created without the file's SHA-256 has none (and
  // declares its parts' at complete), unless a complete gave one: another
  // client of the same key may have declared the whole file's.
  const sha256 = (u.sha256 ?? undefined)?.toLowerCase();
  const givenAtComplete = meta.sha256 === undefined && meta.partSize !== undefined && u.status === "completed";
  if (u.bytes !== meta.size || (sha256 !== meta.sha256 && !givenAtComplete)) {
    throw new UploadError({ kind: "protocol", message: `The API answered for another file (${u.bytes} bytes, SHA-256 ${u.sha256 ?? "none"}).` });
  }
  const m = u.status === "pending" || u.status === "completed" ? u.multipart : undefined;
  if (meta.partSize && u.status === "pending" && (!m || m.partSize !== meta.partSize || m.partCount !== Math.ceil(meta.size / meta.partSize))) {
    throw new UploadError({ kind: "protocol", message: `The API answered with another part layout (${JSON.stringify(m)}).` });
  }
}

function emit(opts: RunOptions, e: UploadEvent): void {
  try {
    opts.onEvent?.(e);
  } catch (err) {
    // A listener's bug must not break the upload.
    console.error("onceupload: event listener failed", err);
  }
}
