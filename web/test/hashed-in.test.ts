// Where the client hashes: in a worker started from hashWorkerUrl (an
// application's bundle cannot rely on the default URL, beside the module),
// and the "hashed-in" event that says which, since the client falls back
// to the page's thread without failing.
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import type { UploadEvent } from "../src/client.js";
import { type HashJob, type HashMessage, hashFile } from "../src/hash.js";
import { makeFile, sha256hex } from "./fakes.js";
import { world } from "./world.js";

/** A stand-in for the browser's Worker running hash-worker.js; `broken` ones fail before answering, as a script that is not there does. */
class FakeWorker {
  static urls: string[] = [];
  static broken = false;
  onmessage: ((e: { data: HashMessage }) => void) | null = null;
  onerror: ((e: { message: string; preventDefault(): void }) => void) | null = null;
  constructor(url: string | URL) {
    FakeWorker.urls.push(String(url));
  }
  postMessage(job: HashJob): void {
    if (FakeWorker.broken) {
      setImmediate(() => this.onerror?.({ message: "404", preventDefault: () => undefined }));
      return;
    }
    void hashFile(job.blob, { chunkBytes: job.chunkBytes, partBytes: job.partBytes }).then((hashes) => this.onmessage?.({ data: { type: "done", id: job.id, hashes } }));
  }
  terminate(): void {}
}

const g = globalThis as { Worker?: unknown };
/** Gives this process workers (the client looks for them when it is made, and starts them later) until the test ends. */
function withWorkers<T>(broken: boolean, fn: () => T): T {
  FakeWorker.urls = [];
  FakeWorker.broken = broken;
  g.Worker = FakeWorker;
  return fn();
}

const where = (events: UploadEvent[]) => events.flatMap((e) => (e.type === "hashed-in" ? [e.where] : []));

describe("UploadClient: where files are hashed", () => {
  afterEach(() => {
    delete g.Worker;
  });

  it("starts the worker from hashWorkerUrl and says the file was hashed in it", async () => {
    const w = world();
    const { client, events, onEvent } = withWorkers(false, () => w.page({ hashWorkerUrl: "https://cdn.test/assets/hash-worker.js" }));
    const file = makeFile("a.bin", 5_000);
    const rec = await client.add(file, { onEvent });
    assert.deepEqual(FakeWorker.urls, ["https://cdn.test/assets/hash-worker.js"]);
    assert.equal(rec.sha256, sha256hex(new Uint8Array(await file.arrayBuffer())));
    assert.deepEqual(where(events), ["worker"]);
  });

  it("looks for hash-worker.js beside the module without hashWorkerUrl", async () => {
    const w = world();
    const { client } = withWorkers(false, () => w.page());
    await client.add(makeFile("a.bin", 10));
    assert.equal(FakeWorker.urls.length, 1);
    assert.match(FakeWorker.urls[0], /^file:\/\/.*\/hash-worker\.js$/);
  });

  it("hashes the parts of a multipart upload in workers from hashWorkerUrl, and says so once", async () => {
    const w = world();
    const { client, events, onEvent } = withWorkers(false, () => w.page({ multipartBytes: 2_500, partBytes: 1_000, hashWorkers: 2, hashWorkerUrl: "/w.js" }));
    const rec = await client.add(makeFile("big.bin", 5_000), { onEvent });
    const done = await client.upload(rec.key, { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(FakeWorker.urls, ["/w.js", "/w.js"]);
    assert.deepEqual(where(events), ["worker"]);
  });

  it("says the page's thread hashed when the worker does not start, and still uploads", async () => {
    const warn = console.warn;
    console.warn = () => undefined;
    try {
      const w = world();
      const single = withWorkers(true, () => w.page({ hashWorkerUrl: "/missing.js" }));
      const rec = await single.client.add(makeFile("a.bin", 5_000), { onEvent: single.onEvent });
      assert.equal((await single.client.upload(rec.key, { onEvent: single.onEvent })).status, "completed");
      assert.deepEqual(where(single.events), ["page"]);

      const parts = withWorkers(true, () => w.page({ multipartBytes: 2_500, partBytes: 1_000, hashWorkerUrl: "/missing.js" }));
      const big = await parts.client.add(makeFile("big.bin", 5_000), { onEvent: parts.onEvent });
      assert.equal((await parts.client.upload(big.key, { onEvent: parts.onEvent })).status, "completed");
      assert.deepEqual(where(parts.events), ["page"]);
    } finally {
      console.warn = warn;
    }
  });

  it("says the page's thread hashed where there are no workers", async () => {
    const w = world();
    const { client, events, onEvent } = w.page({ multipartBytes: 2_500, partBytes: 1_000 });
    await client.add(makeFile("a.bin", 100), { onEvent });
    const rec = await client.add(makeFile("big.bin", 5_000), { onEvent });
    await client.upload(rec.key, { onEvent });
    assert.deepEqual(where(events), ["page", "page"]);
  });
});
