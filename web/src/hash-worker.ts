/**
 * The hashing worker (dist/hash-worker.js): reads the file it is given in
 * chunks and answers with its SHA-256 and its parts' SHA-256, reporting
 * progress on the way. The page terminates it to cancel.
 */
import { type HashJob, type HashMessage, hashFile } from "./hash.js";

// Typed as a worker scope without pulling the WebWorker lib into the page's build.
const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<HashJob>) => void) | null;
  postMessage(m: HashMessage): void;
};

scope.onmessage = (e) => {
  const { blob, chunkBytes, partBytes } = e.data;
  hashFile(blob, { chunkBytes, partBytes, onProgress: (loaded, total) => scope.postMessage({ type: "progress", loaded, total }) }).then(
    (hashes) => scope.postMessage({ type: "done", hashes }),
    (err: unknown) =>
      scope.postMessage({ type: "error", message: `The file cannot be read (${err instanceof Error ? err.message : String(err)}). Pick it again.` }),
  );
};
