/**
 * SHA-256 of a Blob, read in chunks so that memory stays bounded whatever the
 * file's size, with hash-wasm's incremental hasher (crypto.subtle has no
 * streaming digest). With `partBytes`, the same pass also gives the SHA-256
 * of every part of that size, for a multipart upload: the file is read once.
 *
 * {@link workerHasher} runs this in a Web Worker, so that hashing a large
 * file never blocks the page.
 */
import { createSHA256 } from "hash-wasm";
import { UploadError, abortError } from "./errors.js";

export interface HashOptions {
  /** Bytes read at a time. Default 4 MiB. */
  chunkBytes?: number;
  /** Also hash each part of this size (the last one may be shorter). */
  partBytes?: number;
  signal?: AbortSignal;
  onProgress?: (loaded: number, total: number) => void;
}

export interface FileHashes {
  /** The whole file's SHA-256, 64 lower-case hex characters. */
  sha256: string;
  /** Each part's SHA-256 (hex), in order; present when partBytes was given. */
  parts?: string[];
}

/** Hashes a file: on this thread ({@link hashFile}) or in a worker ({@link workerHasher}). */
export type Hasher = (blob: Blob, opts: HashOptions) => Promise<FileHashes>;

export const DEFAULT_HASH_CHUNK = 4 << 20;

/** Hashes on the calling thread (in a worker, or where there are no workers). */
export async function hashFile(blob: Blob, opts: HashOptions = {}): Promise<FileHashes> {
  const chunk = Math.max(1, opts.chunkBytes ?? DEFAULT_HASH_CHUNK);
  const partBytes = opts.partBytes;
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

/** What the page sends the worker. */
export interface HashJob {
  blob: Blob;
  chunkBytes?: number;
  partBytes?: number;
}

/** What the worker sends back. */
export type HashMessage =
  | { type: "progress"; loaded: number; total: number }
  | { type: "done"; hashes: FileHashes }
  | { type: "error"; message: string };

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
        return resolve(hashFile(blob, opts));
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
          resolve(m.hashes);
        } else {
          finish();
          reject(new UploadError({ kind: "file", message: m.message }));
        }
      };
      worker.onerror = (e) => {
        e.preventDefault();
        finish();
        if (started) return reject(new UploadError({ kind: "file", message: `Hashing failed: ${e.message}` }));
        console.warn("onceupload: the hashing worker did not start, hashing on the page's thread", e.message);
        resolve(hashFile(blob, opts));
      };
      const job: HashJob = { blob, chunkBytes: opts.chunkBytes, partBytes: opts.partBytes };
      worker.postMessage(job);
    });
}
