/**
 * Sending the parts of a multipart upload: the parts the storage does not
 * hold yet, up to `concurrency` PUTs at a time, each retried on its own by
 * the shared policy, with byte progress summed across parts.
 *
 * No part waits for the whole file to be read: each part is hashed (by a
 * {@link PartHasher}, a pool of workers) just before it is sent, a few parts
 * ahead of the PUTs, and its URL, which signs that SHA-256, is asked for in
 * a batch with the other parts hashed by then. With a hasher whose
 * workers hold the parts they read ({@link PartHolder}, the default pool),
 * each part is read once: its worker keeps the bytes and sends them with
 * the part's first PUT, at most `concurrency` parts held and waiting at once
 * (a part's bytes leave its worker as its PUT starts: XHR's copy, at most
 * `concurrency` of them), so the next parts are read while it is sent.
 * Parts the storage holds already are checked first: hashed from this file
 * (unless hashed in this page already) and compared with what the storage
 * lists, so that a changed file is caught before any of its bytes are sent.
 */
import type { Api, PartInstructions, StoredPart } from "./api.js";
import { FILE_MISMATCH } from "./codes.js";
import { UploadError, abortError, toUploadError } from "./errors.js";
import { type HashedPart, type HeldPart, type PartHasher, type PartHolder, isPartHolder } from "./hash.js";
import { printable } from "./text.js";
import { type RetryOptions, Unretried, retry } from "./retry.js";
import { type PutTransport, type StorageReach, storageError, urlNoLongerWorks } from "./transport.js";

/** At most 100 parts per POST /uploads/{id}/parts (the contract's limit). */
const MAX_BATCH = 100;
/**
 * A URL asked for earlier is not used with less than this left (or half its
 * lifetime, if that is shorter): a part PUT may take a while.
 */
const URL_MARGIN_MS = 60_000;
/** A part refused with 403 gets a fresh URL this many times. */
const MAX_PART_REFRESHES = 2;

export interface SendPartsInput {
  api: Api;
  transport: PutTransport;
  uploadId: string;
  /** The file, as picked (named in the error when it is not the file whose parts the storage holds). */
  blob: Blob;
  filename: string;
  partSize: number;
  /**
   * The SHA-256 (hex) of the parts known to be this file's, by part number:
   * hashed from this blob in this page (or kept by an older record for the
   * very file picked in this page). The parts hashed here are added to it;
   * complete declares them.
   */
  hashes: Map<number, string>;
  /**
   * The SHA-256 (hex) each part must have, by part number: those of the file
   * picked first, where the upload was created with its whole-file SHA-256
   * (a record of an earlier version of this client). A part hashed here
   * that differs is not this file's: "file_mismatch", and it is not sent.
   */
  expected?: Map<number, string>;
  /**
   * Hashes the parts (a pool of workers). One that holds ({@link PartHolder},
   * the default pool for parts that fit) has each part read once, by the
   * worker that hashes it and then sends it.
   */
  hasher: PartHasher;
  /**
   * Hashes of this blob's first parts already under way (started while the
   * upload was created; held, with a holding hasher: each counts against
   * the parts held, and is released here).
   */
  early?: Map<number, Promise<HashedPart>>;
  /** What the storage holds; a part is sent again unless its size and SHA-256 match. */
  held: StoredPart[];
  concurrency: number;
  /**
   * Parts hashed ahead of the PUTs, so that a part's hash is ready when a
   * PUT slot frees, and their URLs are asked for together. Default
   * 4 × concurrency (no memory: a hash keeps no bytes).
   */
  lookahead?: number;
  stallTimeoutMs: number;
  /** The run's watch for a storage that never answers this page (a CORS refusal): each part's PUT goes through it. */
  reach?: StorageReach;
  signal?: AbortSignal;
  /** Retry options (policy, clock, …) for the URL requests ("parts") and for each part's PUT ("put"). */
  retryOptions(step: "parts" | "put", partNumber?: number): Omit<RetryOptions, "signal">;
  now(): number;
  onProgress(loaded: number, total: number): void;
  /** After the listing and after each part: how many parts the storage holds. */
  onParts(done: number, total: number): void;
  /** A part URL was refused (expired on the way) and is asked for again. */
  onRefresh(partNumber: number): void;
  /** Checking the parts the storage holds against this file: bytes hashed of those to check. */
  onVerify?(loaded: number, total: number): void;
  /** The parts the storage holds are this file's (or it holds none): sending starts. */
  onChecked?(): void;
}


/** The byte range of part n (1-based). */
export function partRange(n: number, partSize: number, size: number): { start: number; end: number } {
  const start = (n - 1) * partSize;
  return { start, end: Math.min(size, start + partSize) };
}

/** The part count of a file of `size` bytes in parts of `partSize`. */
export function partCount(size: number, partSize: number): number {
  return Math.ceil(size / partSize);
}

/**
 * Sends every part the storage lacks, after checking those it holds.
 * Rejects with the first part's final failure, having stopped the others;
 * with a "file_mismatch" error, before sending anything, when a part the
 * storage holds is not this file's.
 */
export async function sendParts(input: SendPartsInput): Promise<void> {
  const count = partCount(input.blob.size, input.partSize);
  if (input.signal?.aborted) throw abortError(input.signal);

  // One failing part stops the others; Pause stops them all.
  const stop = new AbortController();
  const onAbort = () => stop.abort(input.signal?.reason);
  input.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const done = await checkHeld(input, count, (n) => partSlice(input, n), stop);
    input.onChecked?.();
    await new PartPipeline(input, count, done, stop).run();
  } finally {
    input.signal?.removeEventListener("abort", onAbort);
  }
}

/** Part n of the input's file, a slice (no bytes read). */
function partSlice(input: SendPartsInput, n: number): Blob {
  const { start, end } = partRange(n, input.partSize, input.blob.size);
  return input.blob.slice(start, end);
}

/** A part URL, and when it was given. */
interface SignedUrl {
  url: PartInstructions;
  at: number;
}

/**
 * One sendParts after the check: the parts the storage lacks, each through
 * four stages, the shape of the Go client's partPipeline. hash: read and
 * hashed a few parts ahead of the PUTs, in bursts ({@link hashAhead}), or
 * read and held by their workers, as slots free ({@link hashPart}); sign:
 * URLs asked for in batches of the parts hashed by then ({@link sign}),
 * those of held parts as soon as they are hashed ({@link signAhead}); send:
 * the PUT, retried on its own ({@link send}); record:
 * the part counted done ({@link record}). `concurrency` senders take the
 * parts in order ({@link run}); the first to fail for good stops the others
 * and is the error.
 */
class PartPipeline {
  private readonly total: number;
  /** The parts not taken by a sender yet, in order. */
  private readonly queue: number[] = [];
  private readonly lookahead: number;
  /** Bytes of the parts done, and of each part in flight. */
  private doneBytes = 0;
  private readonly inFlight = new Map<number, number>();
  /** Each part's hash under way (hash stage). */
  private readonly hashing = new Map<number, Promise<string>>();
  private hashingNow = 0;
  private readonly counting = new Set<number>();
  /** The URLs asked for (sign stage), the request under way, and the parts whose senders wait for one. */
  private readonly urls = new Map<number, SignedUrl>();
  private asking: Promise<void> | undefined;
  /** A request for the held parts' URLs started by {@link signAhead}, not by a sender. */
  private signingAhead = false;
  private readonly waitingForUrl = new Set<number>();
  /** Wakes the sign stage gathering a batch: a hash or a PUT ended. */
  private wake: (() => void)[] = [];
  private failure: UploadError | undefined;
  /** The hasher, when its workers hold and send the parts they read. */
  private readonly holder?: PartHolder;
  private readonly holdMax: number;
  /** Parts being held or read to be held (slots taken), the parts held, and those waiting for a slot. */
  private holding = 0;
  private readonly held = new Map<number, HeldPart>();
  private slotWaiters: (() => void)[] = [];
  private ended = false;

  constructor(
    private readonly input: SendPartsInput,
    private readonly count: number,
    private readonly done: Set<number>,
    private readonly stop: AbortController,
  ) {
    this.total = input.blob.size;
    for (let n = 1; n <= count; n++) if (!done.has(n)) this.queue.push(n);
    for (const n of done) this.doneBytes += this.size(n);
    this.lookahead = Math.max(1, input.lookahead ?? input.concurrency * 4);
    if (isPartHolder(input.hasher)) {
      this.holder = input.hasher;
      this.holdMax = Math.max(1, input.concurrency);
      // The early parts took their slots while the upload was created.
      this.holding = input.early?.size ?? 0;
    } else this.holdMax = Infinity;
  }

  async run(): Promise<void> {
    const { input, queue, stop } = this;
    input.onParts(this.done.size, this.count);
    this.progress();
    if (queue.length === 0) return;
    stop.signal.addEventListener("abort", () => this.notify(), { once: true });
    const sender = async () => {
      for (let n = queue.shift(); n !== undefined && !stop.signal.aborted; n = queue.shift()) {
        try {
          void this.hash(n);
          this.hashAhead();
          await this.hash(n);
          try {
            await this.send(n);
          } finally {
            this.release(n);
          }
        } catch (e) {
          if (!this.failure && !input.signal?.aborted) {
            this.failure = toUploadError(e);
            stop.abort(this.failure);
          }
          return;
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(input.concurrency, queue.length) }, sender));
    } finally {
      this.end();
    }
    if (input.signal?.aborted) throw abortError(input.signal);
    if (this.failure) throw this.failure;
  }

  // --- hash ---

  /** Part n's SHA-256: known, under way, or started now (in the hasher's order). */
  private hash(n: number): Promise<string> {
    const { input } = this;
    const known = input.hashes.get(n);
    // A holding hasher reads the part even so: the worker that reads it sends it.
    if (known !== undefined && !this.holder) return Promise.resolve(known);
    let p = this.hashing.get(n);
    if (!p) {
      p = this.hashPart(n).then((h) => {
        if (!matchesExpected(input, n, h)) throw notThisFile(input.filename, n, "that of the file picked first");
        if (known !== undefined && known !== h) throw notThisFile(input.filename, n, "what it was when it was first hashed");
        input.hashes.set(n, h);
        return h;
      });
      // Counted until its hash is recorded (the sign stage then finds it).
      const settled = () => {
        if (this.counting.delete(n)) this.hashingNow--;
        this.notify();
        this.signAhead();
      };
      // Awaited by the part's own sender; a part never sent (stopped) must not be an unhandled rejection.
      p.then(settled, settled);
      this.hashing.set(n, p);
    }
    return p;
  }

  /**
   * Reads and hashes part n; with a holding hasher, once one of the
   * `concurrency` slots is free, its worker keeping the bytes to send them. Only
   * a hash under way counts in hashingNow, not one waiting for a slot: the
   * sign stage never waits for parts that cannot be read until a PUT ends.
   */
  private async hashPart(n: number): Promise<string> {
    const { input } = this;
    const early = input.early?.get(n);
    if (!this.holder) {
      this.startCounting(n);
      return (await (early ?? input.hasher.hash(partSlice(input, n), this.stop.signal).then((sha256) => ({ sha256 })))).sha256;
    }
    if (!early) await this.takeSlot();
    this.startCounting(n);
    try {
      const got = await (early ?? this.holder.hold(partSlice(input, n), this.stop.signal));
      if (got.held && !this.ended) this.held.set(n, got.held);
      else {
        // An older worker hashed it only (the page sends it), or the run is over.
        got.held?.release();
        this.freeSlot();
      }
      return got.sha256;
    } catch (e) {
      this.freeSlot();
      throw e;
    }
  }

  private startCounting(n: number): void {
    this.counting.add(n);
    this.hashingNow++;
  }

  /** Waits for one of the slots for parts held (taken in the order asked). */
  private async takeSlot(): Promise<void> {
    if (this.holding < this.holdMax) {
      this.holding++;
      return;
    }
    await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
    if (this.ended || this.stop.signal.aborted) throw abortError(this.stop.signal);
  }

  /** A slot is free: to the next part waiting for one. */
  private freeSlot(): void {
    const next = this.slotWaiters.shift();
    if (next) next();
    else this.holding--;
  }

  /** Part n, held and never sent, is given up: its bytes dropped. */
  private release(n: number): void {
    const h = this.held.get(n);
    if (!h) return;
    this.held.delete(n);
    h.release();
    this.freeSlot();
  }

  /** The run is over: every part still held released, and the parts waiting for a slot woken (to stop). */
  private end(): void {
    this.ended = true;
    for (const n of [...this.held.keys()]) this.release(n);
    const waiting = this.slotWaiters;
    this.slotWaiters = [];
    for (const w of waiting) w();
  }

  /**
   * Hashes in bursts: once half the parts ahead are taken, the next ones up
   * to `lookahead` are hashed together, so that their URLs are asked for
   * together (one sign request for several parts, not one each).
   */
  private hashAhead(): void {
    const ahead = this.queue.slice(0, this.lookahead);
    if (ahead.filter((m) => this.hashing.has(m) || this.input.hashes.has(m)).length > this.lookahead / 2) return;
    for (const m of ahead) void this.hash(m);
  }

  // --- sign ---

  /** Part n's URL (n hashed), waiting with the other parts for a batch when it has none fresh. */
  private async sign(n: number): Promise<PartInstructions> {
    this.waitingForUrl.add(n);
    try {
      return await this.urlOf(n);
    } finally {
      this.waitingForUrl.delete(n);
    }
  }

  /**
   * A URL just asked for is used as it is (a clock that disagrees with the
   * server's must not stop the upload; storage refusing it gets it asked
   * for again).
   */
  private async urlOf(n: number): Promise<PartInstructions> {
    const { input, stop } = this;
    for (;;) {
      const u = this.urls.get(n);
      if (this.fresh(u)) return u!.url;
      if (this.asking) {
        await this.asking;
        continue;
      }
      const batch = this.batchWith(n);
      // While other parts are being sent and more are being hashed, wait
      // for enough of them to ask for a batch of URLs, not one each
      // (where hashing is the slower side, parts come one at a time). A
      // sender with nothing in flight asks at once: the first part, and
      // any moment the PUTs would otherwise stop.
      if (batch.length < Math.min(input.concurrency, 1 + this.queue.length) && this.inFlight.size > 0 && this.hashingNow > 0) {
        await this.changed();
        if (stop.signal.aborted) throw abortError(stop.signal);
        continue;
      }
      this.asking = retry((ctx) => input.api.partUrls(input.uploadId, batch.map((m) => ({ partNumber: m, sha256: input.hashes.get(m)! })), ctx), {
        ...input.retryOptions("parts"),
        signal: stop.signal,
      })
        .then((got) => {
          const at = input.now();
          for (const p of got) this.urls.set(p.partNumber, { url: p, at });
        })
        .finally(() => {
          this.asking = undefined;
          this.signAhead();
        });
      await this.asking;
      const got = this.urls.get(n);
      if (!got) throw new UploadError({ kind: "protocol", message: `The API gave no URL for part ${n}.` });
      return got.url;
    }
  }

  /**
   * With a holding hasher few parts are read ahead (those held), and a
   * sender asks for a part's URL only once a PUT ends: the held parts'
   * URLs are asked for as soon as they are hashed instead, so that signing
   * never waits behind sending. One such request at a time; if it fails, a
   * sender asks again when it takes the part.
   */
  private signAhead(): void {
    if (!this.holder || this.asking || this.signingAhead || this.stop.signal.aborted) return;
    const n = this.queue.find((m) => this.held.has(m) && !this.fresh(this.urls.get(m)));
    if (n === undefined) return;
    this.signingAhead = true;
    this.urlOf(n)
      .catch(() => undefined)
      .finally(() => {
        this.signingAhead = false;
        // Parts hashed meanwhile.
        this.signAhead();
      });
  }

  /** n, the other parts whose senders wait for a URL, and those hashed ahead (at the head of the queue), without a fresh URL. */
  private batchWith(n: number): number[] {
    const stale = (m: number) => !this.fresh(this.urls.get(m));
    const others = [...this.waitingForUrl].filter((m) => m !== n && stale(m));
    // n itself may be ahead (at the head of the queue): signed ahead, not for a sender.
    const ahead = this.queue.slice(0, this.lookahead).filter((m) => m !== n && this.input.hashes.has(m) && stale(m));
    return [n, ...others, ...ahead].slice(0, MAX_BATCH);
  }

  /** A URL asked for earlier is not used with less than URL_MARGIN_MS left (or half its lifetime). */
  private fresh(u: SignedUrl | undefined): boolean {
    if (!u) return false;
    const expires = Date.parse(u.url.expiresAt);
    if (!Number.isFinite(expires)) return true;
    return expires - this.input.now() > Math.min(URL_MARGIN_MS, (expires - u.at) / 2);
  }

  private notify(): void {
    const w = this.wake;
    this.wake = [];
    for (const f of w) f();
  }

  private changed(): Promise<void> {
    return new Promise<void>((resolve) => this.wake.push(resolve));
  }

  // --- send ---

  /** PUTs part n (hashed) to its URL, retried by the policy; a URL refused as expired is asked for again. */
  private async send(n: number): Promise<void> {
    const { input } = this;
    const size = this.size(n);
    const body = partSlice(input, n);
    let refreshes = 0;
    // A held part's first PUT is sent by the worker that read it, which
    // hands its bytes to XHR: its slot is free for the next part to be read
    // while this one is sent. A retry sends the slice from the page.
    const base: PutTransport = (req) => {
      const held = this.held.get(n);
      if (!held) return input.transport(req);
      this.held.delete(n);
      this.freeSlot();
      return held.put(req);
    };
    const transport = input.reach ? input.reach.watch(base) : base;
    await retry(
      async (ctx) => {
        // The URL request has had its own retries: this loop must not repeat them.
        const u = await this.sign(n).catch((e: unknown) => {
          throw new Unretried(toUploadError(e));
        });
        this.inFlight.set(n, 0);
        let res;
        try {
          res = await transport({
            url: u.url,
            method: u.method ?? "PUT",
            headers: u.headers ?? {},
            body,
            signal: ctx.signal,
            stallTimeoutMs: input.stallTimeoutMs,
            onProgress: (loaded) => {
              this.inFlight.set(n, Math.min(loaded, size));
              this.progress();
            },
          });
        } finally {
          this.inFlight.delete(n);
          this.notify();
        }
        if (res.status >= 200 && res.status <= 299) {
          // In the same turn as it leaves the in-flight bytes: the bar never steps back for a part that arrived.
          this.record(n);
          return;
        }
        const err = storageError(res);
        if (urlNoLongerWorks(err) && refreshes < MAX_PART_REFRESHES) {
          // Most often a URL that expired on the way (a long stall, a laptop
          // asleep): ask for a fresh one and try again at once.
          refreshes++;
          this.urls.delete(n);
          input.onRefresh(n);
          throw new UploadError({ kind: "storage", status: err.status, code: err.code, message: err.message, retryable: true, retryAfterMs: 0 });
        }
        throw err;
      },
      { ...input.retryOptions("put", n), signal: this.stop.signal },
    ).catch((e: unknown) => {
      throw e instanceof Unretried ? e.error : e;
    });
  }

  // --- record ---

  /** Part n is stored: counted done, and told. */
  private record(n: number): void {
    this.done.add(n);
    this.doneBytes += this.size(n);
    this.input.onParts(this.done.size, this.count);
    this.progress();
  }

  private progress(): void {
    let loaded = this.doneBytes;
    for (const b of this.inFlight.values()) loaded += b;
    this.input.onProgress(loaded, this.total);
  }

  private size(n: number): number {
    const { start, end } = partRange(n, this.input.partSize, this.total);
    return end - start;
  }
}

/** Whether part n's SHA-256 is the one expected of it (or none is expected). */
function matchesExpected(input: SendPartsInput, n: number, sha256: string): boolean {
  const want = input.expected?.get(n);
  return want === undefined || want === sha256;
}

function notThisFile(filename: string, partNumber: number, what: string): UploadError {
  return new UploadError({
    kind: "file",
    code: FILE_MISMATCH,
    retryable: true,
    message: `This is not the same "${printable(filename)}": its part ${partNumber} differs from ${what}.`,
  });
}

/**
 * The parts the storage holds that are this file's, by number. A held part
 * whose hash is known (hashed in this page) counts when the storage's
 * SHA-256 matches; otherwise it is sent again. One whose hash is not known
 * is hashed from the file now, all of them in parallel in the pool: if one
 * differs from the storage's (or from the one expected of it), this is not
 * the file those parts came from, and nothing is sent. (A part that is the
 * one expected but not the one stored is sent again.)
 */
async function checkHeld(input: SendPartsInput, count: number, slice: (n: number) => Blob, stop: AbortController): Promise<Set<number>> {
  const { partSize, hashes } = input;
  const total = input.blob.size;
  const done = new Set<number>();
  const toCheck: StoredPart[] = [];
  for (const p of input.held) {
    const { start, end } = partRange(p.partNumber, partSize, total);
    if (p.partNumber < 1 || p.partNumber > count || p.size !== end - start) continue;
    const known = hashes.get(p.partNumber);
    if (known === undefined) toCheck.push(p);
    else if (known === p.sha256.toLowerCase()) done.add(p.partNumber);
  }
  if (toCheck.length === 0) return done;
  const bytes = toCheck.reduce((n, p) => n + p.size, 0);
  let loaded = 0;
  input.onVerify?.(0, bytes);
  let failure: UploadError | undefined;
  await Promise.all(
    toCheck.map(async (p) => {
      try {
        const h = await input.hasher.hash(slice(p.partNumber), stop.signal);
        loaded += p.size;
        input.onVerify?.(loaded, bytes);
        if (!matchesExpected(input, p.partNumber, h)) throw notThisFile(input.filename, p.partNumber, "that of the file picked first");
        if (h !== p.sha256.toLowerCase() && !input.expected?.has(p.partNumber)) {
          throw notThisFile(input.filename, p.partNumber, "the one stored from the file picked first");
        }
        hashes.set(p.partNumber, h);
        if (h === p.sha256.toLowerCase()) done.add(p.partNumber);
      } catch (e) {
        if (failure === undefined && !input.signal?.aborted) {
          failure = toUploadError(e, "file");
          stop.abort(failure);
        }
      }
    }),
  );
  if (input.signal?.aborted) throw abortError(input.signal);
  if (failure !== undefined) throw failure;
  return done;
}
