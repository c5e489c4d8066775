/**
 * Sending the parts of a multipart upload: the parts the storage does not
 * hold yet, up to `concurrency` PUTs at a time, each retried on its own by
 * the shared policy, with byte progress summed across parts. Part URLs are
 * asked for in batches, just before they are needed, so that none expires
 * while earlier parts are still being sent.
 */
import type { Api, PartInstructions, StoredPart } from "./api.js";
import { UploadError, abortError, toUploadError } from "./errors.js";
import { type RetryOptions, retry } from "./retry.js";
import { type PutTransport, storageError, urlNoLongerWorks } from "./transport.js";

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
  blob: Blob;
  partSize: number;
  /** Every part's SHA-256 (hex), in order. */
  partSha256: string[];
  /** What the storage holds; a part is sent again unless its size and SHA-256 match. */
  held: StoredPart[];
  concurrency: number;
  stallTimeoutMs: number;
  signal?: AbortSignal;
  /** Retry options (policy, clock, …) for the URL requests ("parts") and for each part's PUT ("put"). */
  retryOptions(step: "parts" | "put", partNumber?: number): Omit<RetryOptions, "signal">;
  now(): number;
  onProgress(loaded: number, total: number): void;
  /** After the listing and after each part: how many parts the storage holds. */
  onParts(done: number, total: number): void;
  /** A part URL was refused (expired on the way) and is asked for again. */
  onRefresh(partNumber: number): void;
}

/** A failure of the URL request, which has had its own retries: a part's retry loop must not repeat them. */
class Unretried extends Error {
  constructor(readonly error: UploadError) {
    super(error.message);
  }
}

/** The byte range of part n (1-based). */
export function partRange(n: number, partSize: number, size: number): { start: number; end: number } {
  const start = (n - 1) * partSize;
  return { start, end: Math.min(size, start + partSize) };
}

/** Sends every part the storage lacks. Rejects with the first part's final failure, having stopped the others. */
export async function sendParts(input: SendPartsInput): Promise<void> {
  const { api, uploadId, blob, partSize, partSha256 } = input;
  const total = blob.size;
  const count = partSha256.length;
  const done = new Set<number>();
  for (const p of input.held) {
    const { start, end } = partRange(p.partNumber, partSize, total);
    if (p.partNumber >= 1 && p.partNumber <= count && p.size === end - start && p.sha256.toLowerCase() === partSha256[p.partNumber - 1]) done.add(p.partNumber);
  }
  const queue: number[] = [];
  for (let n = 1; n <= count; n++) if (!done.has(n)) queue.push(n);

  let doneBytes = 0;
  for (const n of done) {
    const { start, end } = partRange(n, partSize, total);
    doneBytes += end - start;
  }
  const inFlight = new Map<number, number>();
  const progress = () => {
    let loaded = doneBytes;
    for (const b of inFlight.values()) loaded += b;
    input.onProgress(loaded, total);
  };
  input.onParts(done.size, count);
  progress();
  if (queue.length === 0) return;

  // One failing part stops the others; Cancel stops them all.
  const stop = new AbortController();
  const onAbort = () => stop.abort(input.signal?.reason);
  if (input.signal?.aborted) throw abortError(input.signal);
  input.signal?.addEventListener("abort", onAbort, { once: true });

  const urls = new Map<number, { url: PartInstructions; at: number }>();
  let asking: Promise<void> | undefined;
  const fresh = (u: { url: PartInstructions; at: number } | undefined) => {
    if (!u) return false;
    const expires = Date.parse(u.url.expiresAt);
    if (!Number.isFinite(expires)) return true;
    return expires - input.now() > Math.min(URL_MARGIN_MS, (expires - u.at) / 2);
  };
  // The URL of part n, asking for a batch (n and the next parts in line)
  // when it has none fresh. A URL just asked for is used as it is (a clock
  // that disagrees with the server's must not stop the upload; storage
  // refusing it gets it asked for again).
  const urlFor = async (n: number): Promise<PartInstructions> => {
    for (;;) {
      const u = urls.get(n);
      if (fresh(u)) return u!.url;
      if (asking) {
        await asking;
        continue;
      }
      const batch = [n, ...queue.filter((m) => !fresh(urls.get(m)))].slice(0, Math.min(MAX_BATCH, Math.max(input.concurrency * 4, 1)));
      asking = retry((ctx) => api.partUrls(uploadId, batch.map((m) => ({ partNumber: m, sha256: partSha256[m - 1] })), ctx), {
        ...input.retryOptions("parts"),
        signal: stop.signal,
      })
        .then((got) => {
          const at = input.now();
          for (const p of got) urls.set(p.partNumber, { url: p, at });
        })
        .finally(() => {
          asking = undefined;
        });
      await asking;
      const got = urls.get(n);
      if (!got) throw new UploadError({ kind: "protocol", message: `The API gave no URL for part ${n}.` });
      return got.url;
    }
  };

  const sendOne = async (n: number) => {
    const { start, end } = partRange(n, partSize, total);
    const body = blob.slice(start, end);
    let refreshes = 0;
    await retry(
      async (ctx) => {
        const u = await urlFor(n).catch((e: unknown) => {
          throw new Unretried(toUploadError(e));
        });
        inFlight.set(n, 0);
        let res;
        try {
          res = await input.transport({
            url: u.url,
            method: u.method ?? "PUT",
            headers: u.headers ?? {},
            body,
            signal: ctx.signal,
            stallTimeoutMs: input.stallTimeoutMs,
            onProgress: (loaded) => {
              inFlight.set(n, Math.min(loaded, end - start));
              progress();
            },
          });
        } finally {
          inFlight.delete(n);
        }
        if (res.status >= 200 && res.status <= 299) {
          // Counted as done in the same turn as it leaves the in-flight bytes: the bar never steps back for a part that arrived.
          done.add(n);
          doneBytes += end - start;
          return;
        }
        const err = storageError(res);
        if (urlNoLongerWorks(err) && refreshes < MAX_PART_REFRESHES) {
          // Most often a URL that expired on the way (a long stall, a laptop
          // asleep): ask for a fresh one and try again at once.
          refreshes++;
          urls.delete(n);
          input.onRefresh(n);
          throw new UploadError({ kind: "storage", status: err.status, code: err.code, message: err.message, retryable: true, retryAfterMs: 0 });
        }
        throw err;
      },
      { ...input.retryOptions("put", n), signal: stop.signal },
    ).catch((e: unknown) => {
      throw e instanceof Unretried ? e.error : e;
    });
    input.onParts(done.size, count);
    progress();
  };

  let failure: UploadError | undefined;
  const worker = async () => {
    for (let n = queue.shift(); n !== undefined && !stop.signal.aborted; n = queue.shift()) {
      try {
        await sendOne(n);
      } catch (e) {
        if (!failure && !input.signal?.aborted) {
          failure = toUploadError(e);
          stop.abort(failure);
        }
        return;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(input.concurrency, queue.length) }, worker));
  } finally {
    input.signal?.removeEventListener("abort", onAbort);
  }
  if (input.signal?.aborted) throw abortError(input.signal);
  if (failure) throw failure;
}
