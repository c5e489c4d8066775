/**
 * The hashing worker (dist/hash-worker.js): reads the Blob it is given (a
 * file for a single PUT, or one part of a file) in chunks, or whole when it
 * is small enough (the job's wholeBytes: the native digest), and answers with
 * its SHA-256, reporting progress on the way unless asked not to. It takes
 * one job after another (a pool keeps it for every part); the page
 * terminates it to cancel.
 *
 * Protocol 2 (WORKER_PROTOCOL): a job with `hold` is read whole, hashed and
 * kept; the worker answers `held: true`, then PUTs the bytes it read when
 * the page gives it the part's URL (by XHR, which workers have, with upload
 * progress), so that a part is read once and its bytes never reach the page.
 * The bytes go with that one PUT: XHR copies them as it sends them, and the
 * worker drops its own at once (a retry is sent from the page, a slice of
 * the file, as every part was before).
 */
import { toUploadError } from "./errors.js";
import { type HashJob, type HashMessage, type PartCommand, WORKER_PROTOCOL, hashFile, sha256Bytes } from "./hash.js";
import { xhrPut } from "./transport.js";

// Typed as a worker scope without pulling the WebWorker lib into the page's build.
const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<HashJob | PartCommand>) => void) | null;
  postMessage(m: HashMessage): void;
};

/**
 * The parts held, by job id, until their PUT is sent or the page releases
 * them: the bytes read, or a Blob of them under automation (HashJob.asBlob).
 * (A Blob costs more: Chromium moves its bytes to the browser's blob store
 * on another thread, then reads them back to send them. The bytes as they
 * are went as fast as a slice of the file, where no automation driver has
 * the browser copy every such body into its events.)
 */
const held = new Map<number, Uint8Array<ArrayBuffer> | Blob>();
/** The PUTs under way, by attempt. */
const puts = new Map<number, AbortController>();

scope.onmessage = (e) => {
  const m = e.data;
  if ("type" in m) return command(m);
  const { id, blob, chunkBytes, partBytes, wholeBytes, progress } = m;
  if (m.hold && m.v === WORKER_PROTOCOL && id !== undefined) {
    void hold(id, blob, m.asBlob === true);
    return;
  }
  const onProgress = progress === false ? undefined : (loaded: number, total: number) => scope.postMessage({ type: "progress", id, loaded, total });
  hashFile(blob, { chunkBytes, partBytes, wholeBytes, onProgress }).then(
    (hashes) => scope.postMessage({ type: "done", id, hashes }),
    (err: unknown) => scope.postMessage({ type: "error", id, message: unreadable(err) }),
  );
};

function unreadable(err: unknown): string {
  return `The file cannot be read (${err instanceof Error ? err.message : String(err)}). Pick it again.`;
}

async function hold(id: number, blob: Blob, asBlob: boolean): Promise<void> {
  try {
    const bytes = new Uint8Array(await blob.arrayBuffer());
    const sha256 = await sha256Bytes(bytes);
    held.set(id, asBlob ? new Blob([bytes]) : bytes);
    scope.postMessage({ type: "done", id, hashes: { sha256 }, held: true, v: WORKER_PROTOCOL });
  } catch (err) {
    scope.postMessage({ type: "error", id, message: unreadable(err) });
  }
}

function command(m: PartCommand): void {
  if (m.type === "release") {
    held.delete(m.id);
    return;
  }
  if (m.type === "put-abort") {
    puts.get(m.put)?.abort();
    puts.delete(m.put);
    return;
  }
  const { id, put } = m;
  const body = held.get(id);
  if (!body) {
    scope.postMessage({ type: "put-error", v: 2, id, put, kind: "network", message: "the part is no longer held", retryable: true });
    return;
  }
  const ctrl = new AbortController();
  puts.set(put, ctrl);
  // XHR has its copy once sent (synchronously, below): one PUT per held part.
  held.delete(id);
  xhrPut({
    url: m.url,
    method: m.method,
    headers: m.headers,
    body,
    signal: ctrl.signal,
    stallTimeoutMs: m.stallTimeoutMs,
    onProgress: (loaded, total) => scope.postMessage({ type: "put-progress", v: 2, id, put, loaded, total }),
  }).then(
    (res) => scope.postMessage({ type: "put-done", v: 2, id, put, res }),
    (err: unknown) => {
      const e = toUploadError(err);
      scope.postMessage({ type: "put-error", v: 2, id, put, kind: e.kind, code: e.code, message: e.message, retryable: e.retryable });
    },
  ).finally(() => puts.delete(put));
}
