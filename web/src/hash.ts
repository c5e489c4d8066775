/**
 * SHA-256 of a Blob, read in chunks so that memory stays bounded whatever the
 * file's size, with hash-wasm's incremental hasher (crypto.subtle has no
 * streaming digest). With `partBytes`, the same pass also gives the SHA-256
 * of every part of that size. A Blob of at most `wholeBytes` is read whole
 * instead and hashed by crypto.subtle.digest: native code (SHA-NI where the
 * CPU has it), several times faster here than the wasm hasher, which made
 * the hashing of parts the browser client's bottleneck.
 *
 * {@link workerHasher} runs this in a Web Worker, so that hashing a file for
 * a single PUT never blocks the page. A multipart upload hashes no whole
 * file: {@link workerPool} hashes each part, as it is about to be sent, in a
 * small pool of Web Workers, each reading its slice of the file itself (a
 * Blob passes to a worker without its bytes).
 */
import { createSHA256 } from "hash-wasm";
import { UploadError, type UploadErrorKind, abortError } from "./errors.js";
import { type PutRequest, type PutResponse, type PutTransport, xhrTransport } from "./transport.js";

export interface HashOptions {
  /** Bytes read at a time. Default 4 MiB. */
  chunkBytes?: number;
  /** Also hash each part of this size (the last one may be shorter). */
  partBytes?: number;
  /**
   * A Blob of at most this many bytes (without partBytes) is read whole and
   * hashed by crypto.subtle.digest, where it exists (a secure context);
   * progress then says 0 and all. Default 0: always in chunks.
   */
  wholeBytes?: number;
  signal?: AbortSignal;
  onProgress?: (loaded: number, total: number) => void;
}

export interface FileHashes {
  /** The whole file's SHA-256, 64 lower-case hex characters. */
  sha256: string;
  /** Each part's SHA-256 (hex), in order; present when partBytes was given. */
  parts?: string[];
  /** Where they were computed, when the hasher knows ({@link workerHasher} says). */
  hashedIn?: HashedIn;
}

/**
 * Where a hash was computed: in a Web Worker, or on the page's own thread
 * (where a large file's hashing competes with the page for it).
 */
export type HashedIn = "worker" | "page";

/** Hashes a file: on this thread ({@link hashFile}) or in a worker ({@link workerHasher}). */
export type Hasher = (blob: Blob, opts: HashOptions) => Promise<FileHashes>;

export const DEFAULT_HASH_CHUNK = 4 << 20;

/**
 * The bytes a multipart upload's part hasher holds at once to hash parts
 * whole (every worker's part counted): 8 MiB parts in two to eight workers
 * fit; parts too large for it are hashed in chunks.
 */
export const DEFAULT_WHOLE_HASH_BYTES = 64 << 20;

/** crypto.subtle.digest, where this context has it (a secure context: https, localhost). */
function nativeDigest(): SubtleCrypto["digest"] | undefined {
  const subtle = globalThis.crypto?.subtle;
  return typeof subtle?.digest === "function" ? subtle.digest.bind(subtle) : undefined;
}

/** Hashes on the calling thread (in a worker, or where there are no workers). */
export async function hashFile(blob: Blob, opts: HashOptions = {}): Promise<FileHashes> {
  const chunk = Math.max(1, opts.chunkBytes ?? DEFAULT_HASH_CHUNK);
  const partBytes = opts.partBytes;
  const digest = !partBytes && blob.size <= (opts.wholeBytes ?? 0) ? nativeDigest() : undefined;
  if (digest) return { sha256: await hashWhole(blob, digest, opts) };
  const whole = await createSHA256();
  whole.init();
  const part = partBytes ? await createSHA256() : undefined;
  part?.init();
  const parts: string[] = [];
  const total = blob.size;
  opts.onProgress?.(0, total);
  for (let offset = 0; offset < total; ) {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    // A chunk never spans two parts.
    const partEnd = partBytes ? (Math.floor(offset / partBytes) + 1) * partBytes : Infinity;
    const end = Math.min(total, offset + chunk, partEnd);
    const bytes = new Uint8Array(await blob.slice(offset, end).arrayBuffer());
    whole.update(bytes);
    part?.update(bytes);
    offset = end;
    if (part && (offset === partEnd || offset === total)) {
      parts.push(part.digest("hex"));
      part.init();
    }
    opts.onProgress?.(offset, total);
  }
  if (opts.signal?.aborted) throw abortError(opts.signal);
  return partBytes ? { sha256: whole.digest("hex"), parts } : { sha256: whole.digest("hex") };
}

/** The SHA-256 (hex) of a Blob read whole, by the native digest. */
async function hashWhole(blob: Blob, digest: SubtleCrypto["digest"], opts: HashOptions): Promise<string> {
  if (opts.signal?.aborted) throw abortError(opts.signal);
  opts.onProgress?.(0, blob.size);
  const hex = toHex(new Uint8Array(await digest("SHA-256", await blob.arrayBuffer())));
  if (opts.signal?.aborted) throw abortError(opts.signal);
  opts.onProgress?.(blob.size, blob.size);
  return hex;
}

function toHex(sum: Uint8Array): string {
  let hex = "";
  for (const b of sum) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/** The SHA-256 (hex) of bytes at hand: natively where this context can, else by hash-wasm. */
export async function sha256Bytes(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = nativeDigest();
  if (digest) return toHex(new Uint8Array(await digest("SHA-256", bytes)));
  const h = await createSHA256();
  h.init();
  h.update(bytes);
  return h.digest("hex");
}

/**
 * The version of the worker's messages that adds holding a part: a job
 * with `hold` (and `v`) is read whole, hashed and kept by the worker, which
 * answers `held: true` and then sends the part itself ({@link PartCommand}).
 * A worker of an earlier version ignores both and answers the hash alone:
 * the page then sends the part itself, as before.
 */
export const WORKER_PROTOCOL = 2;

/** What the page sends the worker. */
export interface HashJob {
  /** {@link WORKER_PROTOCOL}, with hold. */
  v?: number;
  /** Read whole, hash, and keep the bytes until released (a worker that does not know this only hashes). */
  hold?: boolean;
  /**
   * With hold: send the bytes as a Blob made of them, not as they are.
   * For a page under automation (navigator.webdriver: Playwright,
   * Puppeteer), whose driver has the browser copy every request body of
   * bytes into its events (1 GiB took 107 s under Playwright, against 11 s
   * for the file's slices); a Blob's bytes it does not copy. Elsewhere the
   * bytes as they are cost less (a Blob moves them to the browser's blob
   * store and back: 0.7 s of CPU per GiB).
   */
  asBlob?: boolean;
  /** Echoed in every answer, so that a pooled worker's answers are matched to their job. */
  id?: number;
  blob: Blob;
  chunkBytes?: number;
  partBytes?: number;
  /** See {@link HashOptions.wholeBytes}. */
  wholeBytes?: number;
  /** Progress messages (default true; a part's hash needs none). */
  progress?: boolean;
}

/** What the page tells a worker about a part it holds (protocol 2; only to a worker that answered `held`). */
export type PartCommand =
  /** Send the part held for job `id` (attempt `put`) by XHR. */
  | { v: 2; type: "put"; id: number; put: number; url: string; method: string; headers: Record<string, string>; stallTimeoutMs?: number }
  | { v: 2; type: "put-abort"; id: number; put: number }
  /** Drop the part's bytes. */
  | { v: 2; type: "release"; id: number };

/** What the worker sends back. */
export type HashMessage =
  | { type: "progress"; id?: number; loaded: number; total: number }
  /** `held`: the worker keeps the part's bytes (a worker of protocol 2 answering a hold job). */
  | { type: "done"; id?: number; hashes: FileHashes; held?: boolean; v?: number }
  | { type: "error"; id?: number; message: string }
  | { type: "put-progress"; v: 2; id: number; put: number; loaded: number; total: number }
  | { type: "put-done"; v: 2; id: number; put: number; res: PutResponse }
  | { type: "put-error"; v: 2; id: number; put: number; kind: UploadErrorKind; message: string; retryable: boolean; code?: string };

/**
 * Hashes in a dedicated Web Worker (hash-worker.js, built next to the
 * bundle), one worker per file, terminated when done or aborted: Cancel stops
 * the reading at once. If the worker cannot start (the script is missing, or
 * a policy forbids workers), it hashes on this thread instead and says so on
 * the console, so that uploads still work.
 */
export function workerHasher(url: string | URL): Hasher {
  return (blob, opts) =>
    new Promise<FileHashes>((resolve, reject) => {
      if (opts.signal?.aborted) return reject(abortError(opts.signal));
      let worker: Worker;
      try {
        worker = new Worker(url);
      } catch (e) {
        console.warn("onceupload: no hashing worker, hashing on the page's thread", e);
        return resolve(onPage(blob, opts));
      }
      let started = false;
      const finish = () => {
        worker.terminate();
        opts.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        finish();
        reject(abortError(opts.signal));
      };
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      worker.onmessage = (e: MessageEvent<HashMessage>) => {
        const m = e.data;
        started = true;
        if (m.type === "progress") opts.onProgress?.(m.loaded, m.total);
        else if (m.type === "done") {
          finish();
          resolve({ ...m.hashes, hashedIn: "worker" });
        } else if (m.type === "error") {
          finish();
          reject(new UploadError({ kind: "file", message: m.message }));
        }
      };
      worker.onerror = (e) => {
        e.preventDefault();
        finish();
        if (started) return reject(new UploadError({ kind: "file", message: `Hashing failed: ${e.message}` }));
        console.warn("onceupload: the hashing worker did not start, hashing on the page's thread", e.message);
        resolve(onPage(blob, opts));
      };
      const job: HashJob = { blob, chunkBytes: opts.chunkBytes, partBytes: opts.partBytes };
      worker.postMessage(job);
    });
}

/** {@link hashFile} on this thread, saying so. */
export async function onPage(blob: Blob, opts: HashOptions): Promise<FileHashes> {
  return { ...(await hashFile(blob, opts)), hashedIn: "page" };
}

/**
 * Hashes parts of a file (slices of it): each one's SHA-256, hex. Jobs run
 * in the order they are given, a few at a time.
 */
export interface PartHasher {
  hash(part: Blob, signal?: AbortSignal): Promise<string>;
  /** Stops the jobs under way and waiting (they reject as aborted) and the workers. */
  close(): void;
  /**
   * Where its parts are hashed, once it knows: "worker" after one of its
   * workers answered, "page" once it hashes on this thread (workers could
   * not start). Undefined before, or when it does not say.
   */
  readonly hashedIn?: HashedIn;
}

/**
 * Hashes parts on the calling thread, one at a time (where there are no
 * workers, and in tests); a part of at most `wholeBytes` is read whole
 * ({@link HashOptions.wholeBytes}).
 */
export function inlinePartHasher(chunkBytes = DEFAULT_HASH_CHUNK, wholeBytes = 0): PartHasher {
  let closed = new AbortController();
  let tail: Promise<unknown> = Promise.resolve();
  return {
    hashedIn: "page",
    hash(part, signal) {
      const stop = closed.signal;
      const run = async () => {
        if (signal?.aborted) throw abortError(signal);
        if (stop.aborted) throw abortError(stop);
        if (!signal) return (await hashFile(part, { chunkBytes, wholeBytes, signal: stop })).sha256;
        const both = new AbortController();
        const onAbort = () => both.abort(signal.aborted ? signal.reason : stop.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        stop.addEventListener("abort", onAbort, { once: true });
        try {
          return (await hashFile(part, { chunkBytes, wholeBytes, signal: both.signal })).sha256;
        } finally {
          signal.removeEventListener("abort", onAbort);
          stop.removeEventListener("abort", onAbort);
        }
      };
      const p = tail.then(run, run);
      tail = p.catch(() => undefined);
      return p;
    },
    close() {
      closed.abort();
      closed = new AbortController();
    },
  };
}

/** A part whose bytes a worker holds after hashing them: it sends them, so that they are read once and never cross to the page. */
export interface HeldPart {
  /**
   * PUTs the part. The first call sends the held bytes from the worker,
   * which drops them as XHR takes its copy; a later one (a retry), or one
   * whose worker is gone, sends the request's body (the file's slice) from
   * the page.
   */
  put: PutTransport;
  /** Drops the bytes, if no PUT took them (the part is given up). */
  release(): void;
}

/** A part's SHA-256, and its bytes held by the worker that read it (absent: the page sends the part). */
export interface HashedPart {
  sha256: string;
  held?: HeldPart;
}

/** A part hasher whose workers can also send the parts they read (the default pool, for parts small enough to hold). */
export interface PartHolder extends PartHasher {
  hold(part: Blob, signal?: AbortSignal): Promise<HashedPart>;
}

export function isPartHolder(h: PartHasher): h is PartHolder {
  return typeof (h as Partial<PartHolder>).hold === "function";
}

/** The part of a Worker the pool uses (a test can give its own). */
export interface WorkerLike {
  postMessage(job: HashJob | PartCommand): void;
  terminate(): void;
  onmessage: ((e: { data: HashMessage }) => void) | null;
  onerror: ((e: { message: string; preventDefault(): void }) => void) | null;
}

export interface WorkerPoolOptions {
  /** The worker script (hash-worker.js). */
  url: string | URL;
  /** Workers at most (at least 1). */
  size: number;
  /** Bytes a worker reads at a time. Default 4 MiB. */
  chunkBytes?: number;
  /**
   * The bytes the pool may hold to hash parts whole, every worker's part at
   * once: a part of at most wholeBytes / size is read whole and hashed
   * natively ({@link HashOptions.wholeBytes}), a larger one in chunks.
   * Default 0: all in chunks.
   */
  wholeBytes?: number;
  /** Starts a worker. Default: `new Worker(url)`. */
  newWorker?: (url: string | URL) => WorkerLike;
  /**
   * Whether hold() asks the workers to keep and send the parts they read
   * (an older worker script answers with the hash alone). Default false:
   * hold() only hashes.
   */
  holds?: boolean;
  /** Sends a held part from the page when its worker is gone. Default: XHR. */
  transport?: PutTransport;
}

interface PoolJob {
  id: number;
  part: Blob;
  hold?: boolean;
  /** Resolved with the part held, for hold jobs a worker holds. */
  onHeld?: (slot: PoolSlot, sha256: string) => void;
  signal?: AbortSignal;
  resolve: (sha256: string) => void;
  reject: (e: unknown) => void;
  onAbort: () => void;
  slot?: PoolSlot;
}

interface PoolSlot {
  worker: WorkerLike;
  job?: PoolJob;
  /** The PUTs this worker makes of parts it holds, by attempt. */
  puts: Map<number, { resolve: (r: PutResponse) => void; reject: (e: UploadError) => void; onProgress?: (loaded: number, total: number) => void }>;
  /** The parts it holds (job ids). */
  held: Set<number>;
}

/**
 * A pool of up to `size` hashing workers, started at once (they load while
 * the upload is created) and kept for every part: a worker is given a
 * slice of the file (a Blob: no bytes are copied), reads it in chunks and
 * answers with its SHA-256, so memory is `size` chunks whatever the part
 * size. Jobs wait their turn in order. A job aborted while it runs stops
 * its worker (terminated; another starts when needed). If workers cannot
 * start (the script is missing, or a policy forbids workers), the parts
 * are hashed on this thread instead, with a warning on the console.
 */
export function workerPool(opts: WorkerPoolOptions): PartHolder {
  return new WorkerPool(opts);
}

class WorkerPool implements PartHolder {
  private readonly holds: boolean;
  /** navigator.webdriver: held parts are sent as Blobs ({@link HashJob.asBlob}). */
  private readonly underAutomation: boolean;
  private readonly transport: PutTransport;
  private putSeq = 0;
  private readonly size: number;
  private readonly chunkBytes: number;
  /** The largest part a worker reads whole: each of the pool's workers may hold one at once. */
  private readonly wholeBytes: number;
  private readonly start: () => WorkerLike;
  private readonly slots = new Set<PoolSlot>();
  private readonly waiting: PoolJob[] = [];
  private seq = 0;
  private closed = false;
  /**
   * Whether any worker of this pool ever answered: until one does, a worker
   * that fails means workers cannot start here; after, it is that worker's
   * failure (a replacement that fails does not send the pool to this thread).
   */
  private answered = false;
  /** Workers do not work here: hash on this thread. */
  private inline?: PartHasher;

  constructor(opts: WorkerPoolOptions) {
    this.size = Math.max(1, Math.floor(opts.size));
    this.holds = opts.holds ?? false;
    this.underAutomation = (globalThis.navigator as { webdriver?: boolean } | undefined)?.webdriver === true;
    this.transport = opts.transport ?? xhrTransport;
    this.chunkBytes = opts.chunkBytes ?? DEFAULT_HASH_CHUNK;
    this.wholeBytes = Math.floor((opts.wholeBytes ?? 0) / this.size);
    const make = opts.newWorker ?? ((url: string | URL) => new Worker(url) as unknown as WorkerLike);
    this.start = () => make(opts.url);
    for (let i = 0; i < this.size && !this.inline; i++) this.spawn();
  }

  get hashedIn(): HashedIn | undefined {
    return this.inline ? "page" : this.answered ? "worker" : undefined;
  }

  hash(part: Blob, signal?: AbortSignal): Promise<string> {
    if (this.inline) return this.inline.hash(part, signal);
    return new Promise<string>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      if (this.closed) return reject(abortError());
      const job: PoolJob = { id: ++this.seq, part, signal, resolve, reject, onAbort: () => this.cancel(job) };
      signal?.addEventListener("abort", job.onAbort, { once: true });
      this.waiting.push(job);
      this.pump();
    });
  }

  /**
   * Hashes part, its worker keeping the bytes to send them (when the pool
   * holds, and the worker knows how: one of an earlier version answers
   * with the hash alone, and the page sends the part).
   */
  hold(part: Blob, signal?: AbortSignal): Promise<HashedPart> {
    if (this.inline || !this.holds) return this.hash(part, signal).then((sha256) => ({ sha256 }));
    return new Promise<HashedPart>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      if (this.closed) return reject(abortError());
      const job: PoolJob = {
        id: ++this.seq,
        part,
        hold: true,
        signal,
        resolve: (sha256) => resolve({ sha256 }),
        onHeld: (slot, sha256) => resolve({ sha256, held: this.heldPart(slot, job.id) }),
        reject,
        onAbort: () => this.cancel(job),
      };
      signal?.addEventListener("abort", job.onAbort, { once: true });
      this.waiting.push(job);
      this.pump();
    });
  }

  /** The part of job id that the worker of slot holds. */
  private heldPart(slot: PoolSlot, id: number): HeldPart {
    slot.held.add(id);
    let released = false;
    return {
      put: (req: PutRequest) => {
        // Sent already (this is a retry), or its worker is gone (terminated, failed): the page sends the part.
        if (released || !this.slots.has(slot)) return this.transport(req);
        // The worker drops the bytes as it sends them.
        released = true;
        slot.held.delete(id);
        return new Promise<PutResponse>((resolve, reject) => {
          if (req.signal?.aborted) return reject(abortError(req.signal));
          const put = ++this.putSeq;
          const onAbort = () => {
            slot.puts.delete(put);
            if (this.slots.has(slot)) slot.worker.postMessage({ v: 2, type: "put-abort", id, put });
            reject(abortError(req.signal));
          };
          req.signal?.addEventListener("abort", onAbort, { once: true });
          const settled = () => req.signal?.removeEventListener("abort", onAbort);
          slot.puts.set(put, {
            resolve: (r) => {
              settled();
              resolve(r);
            },
            reject: (e) => {
              settled();
              reject(e);
            },
            onProgress: req.onProgress,
          });
          slot.worker.postMessage({ v: 2, type: "put", id, put, url: req.url, method: req.method, headers: req.headers, stallTimeoutMs: req.stallTimeoutMs });
        });
      },
      release: () => {
        if (released) return;
        released = true;
        if (slot.held.delete(id) && this.slots.has(slot)) slot.worker.postMessage({ v: 2, type: "release", id });
      },
    };
  }

  close(): void {
    this.closed = true;
    for (const job of this.waiting.splice(0)) this.settle(job, abortError());
    for (const slot of [...this.slots]) {
      if (slot.job) this.settle(slot.job, abortError());
      this.drop(slot);
    }
    this.inline?.close();
  }

  private spawn(): PoolSlot | undefined {
    let worker: WorkerLike;
    try {
      worker = this.start();
    } catch (e) {
      this.goInline(e);
      return undefined;
    }
    const slot: PoolSlot = { worker, puts: new Map(), held: new Set() };
    worker.onmessage = (e) => this.onMessage(slot, e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      this.onError(slot, e.message);
    };
    this.slots.add(slot);
    return slot;
  }

  /** Gives waiting jobs to idle workers, starting workers up to the pool's size. */
  private pump(): void {
    while (this.waiting.length > 0 && !this.inline) {
      let slot = [...this.slots].find((s) => !s.job);
      if (!slot && this.slots.size < this.size) slot = this.spawn();
      if (!slot) return;
      const job = this.waiting.shift()!;
      job.slot = slot;
      slot.job = job;
      const hold = job.hold ? { v: WORKER_PROTOCOL, hold: true, asBlob: this.underAutomation } : {};
      slot.worker.postMessage({ id: job.id, blob: job.part, chunkBytes: this.chunkBytes, wholeBytes: this.wholeBytes, progress: false, ...hold });
    }
  }

  private onMessage(slot: PoolSlot, m: HashMessage): void {
    this.answered = true;
    if (m.type === "put-progress" || m.type === "put-done" || m.type === "put-error") return this.onPut(slot, m);
    const job = slot.job;
    if (!job || (m.id !== undefined && m.id !== job.id) || m.type === "progress") return;
    slot.job = undefined;
    if (m.type === "done" && m.held && job.onHeld) {
      job.signal?.removeEventListener("abort", job.onAbort);
      job.slot = undefined;
      job.onHeld(slot, m.hashes.sha256);
    } else if (m.type === "done") this.settle(job, undefined, m.hashes.sha256);
    else this.settle(job, new UploadError({ kind: "file", message: m.message }));
    this.pump();
  }

  private onPut(slot: PoolSlot, m: Extract<HashMessage, { type: "put-progress" | "put-done" | "put-error" }>): void {
    const p = slot.puts.get(m.put);
    if (!p) return;
    if (m.type === "put-progress") return p.onProgress?.(m.loaded, m.total);
    slot.puts.delete(m.put);
    if (m.type === "put-done") p.resolve(m.res);
    else p.reject(m.kind === "aborted" ? abortError() : new UploadError({ kind: m.kind, code: m.code, message: m.message, retryable: m.retryable }));
  }

  private onError(slot: PoolSlot, message: string): void {
    const job = slot.job;
    this.drop(slot);
    if (!this.answered) {
      // No worker of this pool ever answered: none will here. This job, and the others, on this thread.
      this.goInline(message);
      if (job) this.inline!.hash(job.part, job.signal).then((h) => this.settle(job, undefined, h), (e: unknown) => this.settle(job, e));
      return;
    }
    if (job) this.settle(job, new UploadError({ kind: "file", message: `Hashing failed: ${message}` }));
    this.pump();
  }

  private cancel(job: PoolJob): void {
    const i = this.waiting.indexOf(job);
    if (i >= 0) this.waiting.splice(i, 1);
    // Running: stop its reading at once; a fresh worker takes the next job.
    if (job.slot?.job === job) this.drop(job.slot);
    this.settle(job, abortError(job.signal));
    this.pump();
  }

  private drop(slot: PoolSlot): void {
    slot.worker.onmessage = null;
    slot.worker.onerror = null;
    slot.worker.terminate();
    slot.job = undefined;
    this.slots.delete(slot);
    // Its PUTs stop with it; a retry sends those parts from the page.
    for (const p of slot.puts.values()) p.reject(new UploadError({ kind: "network", message: "the worker sending the part stopped", retryable: true }));
    slot.puts.clear();
    slot.held.clear();
  }

  private goInline(why: unknown): void {
    if (this.inline) return;
    console.warn("onceupload: no hashing worker, hashing parts on the page's thread", why);
    // One part at a time on this thread: the pool's bytes go to it.
    this.inline = inlinePartHasher(this.chunkBytes, this.wholeBytes * this.size);
    for (const slot of [...this.slots]) {
      const job = slot.job;
      this.drop(slot);
      if (job) this.waiting.unshift(job);
    }
    for (const job of this.waiting.splice(0)) this.inline.hash(job.part, job.signal).then((h) => this.settle(job, undefined, h), (e: unknown) => this.settle(job, e));
  }

  private settle(job: PoolJob, err: unknown, sha256?: string): void {
    job.signal?.removeEventListener("abort", job.onAbort);
    job.slot = undefined;
    if (err === undefined) job.resolve(sha256!);
    else job.reject(err);
  }
}
