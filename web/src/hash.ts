/**
 * SHA-256 of a Blob, read in chunks so that memory stays bounded whatever
 * the file's size (hash-wasm's incremental hasher; one chunk in memory at a
 * time).
 */
import { createSHA256 } from "hash-wasm";
import { abortError } from "./errors.js";

export interface HashOptions {
  /** Bytes read at a time. Default 4 MiB. */
  chunkBytes?: number;
  signal?: AbortSignal;
  onProgress?: (loaded: number, total: number) => void;
}

export const DEFAULT_HASH_CHUNK = 4 << 20;

/** The SHA-256 of `blob` as 64 lower-case hex characters. */
export async function sha256Hex(blob: Blob, opts: HashOptions = {}): Promise<string> {
  const chunk = Math.max(1, opts.chunkBytes ?? DEFAULT_HASH_CHUNK);
  const hasher = await createSHA256();
  hasher.init();
  const total = blob.size;
  opts.onProgress?.(0, total);
  for (let offset = 0; offset < total; offset += chunk) {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const end = Math.min(total, offset + chunk);
    const bytes = new Uint8Array(await blob.slice(offset, end).arrayBuffer());
    hasher.update(bytes);
    opts.onProgress?.(end, total);
  }
  if (opts.signal?.aborted) throw abortError(opts.signal);
  return hasher.digest("hex");
}
