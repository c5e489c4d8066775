/**
 * The hashing worker (dist/hash-worker.js): reads the Blob it is given (a
 * file for a single PUT, or one part of a file) in chunks, or whole when it
 * is small enough (the job's wholeBytes: the native digest), and answers with
 * its SHA-256, reporting progress on the way unless asked not to. It takes
 * one job after another (a pool keeps it for every part); the page
 * terminates it to cancel.
 */
import { type HashJob, type HashMessage, hashFile } from "./hash.js";

// Typed as a worker scope without pulling the WebWorker lib into the page's build.
const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<HashJob>) => void) | null;
  postMessage(m: HashMessage): void;
};

scope.onmessage = (e) => {
  const { id, blob, chunkBytes, partBytes, wholeBytes, progress } = e.data;
  const onProgress = progress === false ? undefined : (loaded: number, total: number) => scope.postMessage({ type: "progress", id, loaded, total });
  hashFile(blob, { chunkBytes, partBytes, wholeBytes, onProgress }).then(
    (hashes) => scope.postMessage({ type: "done", id, hashes }),
    (err: unknown) =>
      scope.postMessage({ type: "error", id, message: `The file cannot be read (${err instanceof Error ? err.message : String(err)}). Pick it again.` }),
  );
};
