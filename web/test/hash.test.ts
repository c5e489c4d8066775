import assert from "node:assert/strict";
import { createHash, randomBytes, webcrypto } from "node:crypto";
import { describe, it } from "node:test";
import { type HashJob, type HashMessage, type PartCommand, type WorkerLike, hashFile, workerPool } from "../src/hash.js";
import type { PutRequest } from "../src/transport.js";
import { countNativeDigests } from "./fakes.js";

const hex = (b: ArrayBuffer) => Buffer.from(b).toString("hex");

describe("hashFile: the whole file and its parts in one pass", () => {
  it("agrees with crypto.subtle on random inputs, at and around part and chunk boundaries", async () => {
    const cases = [
      { size: 1, part: 7, chunk: 3 },
      { size: 7, part: 7, chunk: 3 },
      { size: 8, part: 7, chunk: 3 },
      { size: 1000, part: 100, chunk: 100 },
      { size: 1001, part: 100, chunk: 64 },
      { size: 4096, part: 1000, chunk: 333 },
      { size: 65_537, part: 8192, chunk: 4096 },
    ];
    for (let i = 0; i < 20; i++) cases.push({ size: 1 + Math.floor(Math.random() * 50_000), part: 1 + Math.floor(Math.random() * 9_000), chunk: 1 + Math.floor(Math.random() * 5_000) });
    for (const { size, part, chunk } of cases) {
      const bytes = randomBytes(size);
      const got = await hashFile(new Blob([bytes]), { partBytes: part, chunkBytes: chunk });
      const what = `size ${size}, part ${part}, chunk ${chunk}`;
      assert.equal(got.sha256, hex(await webcrypto.subtle.digest("SHA-256", bytes)), what);
      const want: string[] = [];
      for (let o = 0; o < size; o += part) want.push(createHash("sha256").update(bytes.subarray(o, o + part)).digest("hex"));
      assert.deepEqual(got.parts, want, what);
    }
  });

  it("gives no parts without a part size, and reports progress per chunk", async () => {
    const seen: number[] = [];
    const got = await hashFile(new Blob([randomBytes(2500)]), { chunkBytes: 1000, onProgress: (loaded) => seen.push(loaded) });
    assert.equal(got.parts, undefined);
    assert.deepEqual(seen, [0, 1000, 2000, 2500]);
  });

  it("reads a blob of up to wholeBytes whole for the native digest, a larger one in chunks, with the same SHA-256 either side of the bound", async () => {
    const native = countNativeDigests();
    try {
      const bound = 1000;
      for (const { size, whole } of [
        { size: bound - 1, whole: true },
        { size: bound, whole: true },
        { size: bound + 1, whole: false },
      ]) {
        const bytes = randomBytes(size);
        native.reset();
        const seen: number[] = [];
        const got = await hashFile(new Blob([bytes]), { chunkBytes: 300, wholeBytes: bound, onProgress: (loaded) => seen.push(loaded) });
        const what = `size ${size}, bound ${bound}`;
        assert.equal(got.sha256, createHash("sha256").update(bytes).digest("hex"), what);
        assert.equal(native.calls(), whole ? 1 : 0, `${what}: native digests`);
        assert.deepEqual(seen, whole ? [0, size] : [0, 300, 600, 900, size], `${what}: progress`);
      }
      native.reset();
      const parted = await hashFile(new Blob([randomBytes(500)]), { chunkBytes: 300, wholeBytes: bound, partBytes: 250 });
      assert.equal(native.calls(), 0, "a pass that also hashes parts reads in chunks");
      assert.equal(parted.parts?.length, 2);
      await hashFile(new Blob([randomBytes(500)]), { chunkBytes: 300 });
      assert.equal(native.calls(), 0, "no wholeBytes: in chunks");
    } finally {
      native.restore();
    }
  });

  it("reads in chunks where there is no crypto.subtle (an insecure context)", async () => {
    const crypto = Object.getOwnPropertyDescriptor(globalThis, "crypto");
    Object.defineProperty(globalThis, "crypto", { value: {}, configurable: true });
    try {
      const bytes = randomBytes(700);
      const seen: number[] = [];
      const got = await hashFile(new Blob([bytes]), { chunkBytes: 300, wholeBytes: 1000, onProgress: (loaded) => seen.push(loaded) });
      assert.equal(got.sha256, createHash("sha256").update(bytes).digest("hex"));
      assert.deepEqual(seen, [0, 300, 600, 700]);
    } finally {
      Object.defineProperty(globalThis, "crypto", crypto!);
    }
  });

  it("stops reading when aborted", async () => {
    const ctrl = new AbortController();
    let reads = 0;
    const err = await hashFile(new Blob([randomBytes(10_000)]), {
      chunkBytes: 1000,
      signal: ctrl.signal,
      onProgress: () => {
        if (++reads === 3) ctrl.abort();
      },
    }).catch((e: unknown) => e);
    assert.equal((err as { kind?: string }).kind, "aborted");
    assert.equal(reads, 3);
  });
});

/**
 * A stand-in for a Worker running hash-worker.ts: it hashes on this thread,
 * answers asynchronously, and counts what it is given. `broken` workers fail
 * before answering, as a missing script does.
 */
class FakeWorker implements WorkerLike {
  static running = 0;
  static maxRunning = 0;
  static started = 0;
  static terminated = 0;
  static jobs: HashJob[] = [];
  onmessage: ((e: { data: HashMessage }) => void) | null = null;
  onerror: ((e: { message: string; preventDefault(): void }) => void) | null = null;
  private dead = false;
  constructor(private readonly broken = false) {
    FakeWorker.started++;
  }
  postMessage(job: HashJob): void {
    if (this.broken) {
      setTimeout(() => this.onerror?.({ message: "script not found", preventDefault: () => undefined }), 1);
      return;
    }
    FakeWorker.running++;
    FakeWorker.maxRunning = Math.max(FakeWorker.maxRunning, FakeWorker.running);
    FakeWorker.jobs.push(job);
    void hashFile(job.blob, { chunkBytes: job.chunkBytes, wholeBytes: job.wholeBytes }).then(async (hashes) => {
      await new Promise((r) => setTimeout(r, 2));
      FakeWorker.running--;
      if (!this.dead) this.onmessage?.({ data: { type: "done", id: job.id, hashes } });
    });
  }
  terminate(): void {
    this.dead = true;
    FakeWorker.terminated++;
  }
  static reset() {
    FakeWorker.running = FakeWorker.maxRunning = FakeWorker.started = FakeWorker.terminated = 0;
    FakeWorker.jobs = [];
  }
}

describe("workerPool: parts hashed in a few workers", () => {
  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

  it("starts its workers at once, runs at most `size` jobs at a time, and gives each part its own SHA-256", async () => {
    FakeWorker.reset();
    const pool = workerPool({ url: "hash-worker.js", size: 3, chunkBytes: 100, newWorker: () => new FakeWorker() });
    assert.equal(FakeWorker.started, 3, "started before any job, to load while the upload is created");
    const file = new Blob([randomBytes(10_000)]);
    const bytes = new Uint8Array(await file.arrayBuffer());
    const got = await Promise.all(Array.from({ length: 10 }, (_, i) => pool.hash(file.slice(i * 1000, (i + 1) * 1000))));
    assert.deepEqual(
      got,
      Array.from({ length: 10 }, (_, i) => sha(bytes.subarray(i * 1000, (i + 1) * 1000))),
    );
    assert.equal(FakeWorker.maxRunning, 3);
    assert.equal(FakeWorker.started, 3, "workers are kept for the next parts");
    pool.close();
    assert.equal(FakeWorker.terminated, 3);
  });

  it("shares wholeBytes among its workers: each reads whole a part of at most its share", async () => {
    for (const { size, wholeBytes, share } of [
      { size: 2, wholeBytes: 64 << 20, share: 32 << 20 },
      { size: 3, wholeBytes: 1000, share: 333 },
      { size: 1, wholeBytes: undefined, share: 0 },
    ]) {
      FakeWorker.reset();
      const pool = workerPool({ url: "hash-worker.js", size, wholeBytes, newWorker: () => new FakeWorker() });
      const part = new Blob([randomBytes(100)]);
      assert.equal(await pool.hash(part), sha(new Uint8Array(await part.arrayBuffer())));
      assert.deepEqual(
        FakeWorker.jobs.map((j) => j.wholeBytes),
        [share],
        `${size} workers, wholeBytes ${wholeBytes}`,
      );
      pool.close();
    }
  });

  it("an aborted job stops its worker (another takes the next job); a job waiting its turn just leaves", async () => {
    FakeWorker.reset();
    const pool = workerPool({ url: "hash-worker.js", size: 1, newWorker: () => new FakeWorker() });
    const part = new Blob([randomBytes(1000)]);
    const first = new AbortController();
    const second = new AbortController();
    const p1 = pool.hash(part, first.signal);
    const p2 = pool.hash(part, second.signal);
    const p3 = pool.hash(part);
    second.abort();
    first.abort();
    assert.equal(((await p1.catch((e: unknown) => e)) as { kind?: string }).kind, "aborted");
    assert.equal(((await p2.catch((e: unknown) => e)) as { kind?: string }).kind, "aborted");
    assert.equal(await p3, sha(new Uint8Array(await part.arrayBuffer())));
    assert.equal(FakeWorker.terminated, 1, "the running job's worker");
    assert.equal(FakeWorker.started, 2, "a fresh worker for the next job");
    pool.close();
  });

  it("hashes on this thread when workers cannot start", async () => {
    FakeWorker.reset();
    const warn = console.warn;
    console.warn = () => undefined;
    try {
      const pool = workerPool({ url: "missing.js", size: 2, newWorker: () => new FakeWorker(true) });
      const part = new Blob([randomBytes(5000)]);
      const want = sha(new Uint8Array(await part.arrayBuffer()));
      assert.deepEqual(await Promise.all([pool.hash(part), pool.hash(part), pool.hash(part)]), [want, want, want]);
      const thrower = workerPool({
        url: "forbidden.js",
        size: 2,
        newWorker: () => {
          throw new Error("workers are not allowed");
        },
      });
      assert.equal(await thrower.hash(part), want);
    } finally {
      console.warn = warn;
    }
  });

  it("once a worker answered, a replacement that fails before answering fails its job only: the pool keeps its workers", async () => {
    FakeWorker.reset();
    const warn = console.warn;
    const warned: unknown[] = [];
    console.warn = (...args: unknown[]) => warned.push(args);
    try {
      // The second worker (the one replacing the worker of an aborted job) cannot start.
      const pool = workerPool({ url: "hash-worker.js", size: 1, newWorker: () => new FakeWorker(FakeWorker.started === 1) });
      const part = new Blob([randomBytes(1000)]);
      const want = sha(new Uint8Array(await part.arrayBuffer()));
      assert.equal(await pool.hash(part), want, "the first worker answers");
      const ctrl = new AbortController();
      const aborted = pool.hash(part, ctrl.signal);
      const onBroken = pool.hash(part);
      ctrl.abort();
      assert.equal(((await aborted.catch((e: unknown) => e)) as { kind?: string }).kind, "aborted");
      const err = (await onBroken.catch((e: unknown) => e)) as { kind?: string; message?: string };
      assert.equal(err.kind, "file");
      assert.match(err.message ?? "", /^Hashing failed: script not found/);
      assert.equal(await pool.hash(part), want, "a fresh worker takes the next job");
      assert.equal(FakeWorker.started, 3);
      assert.deepEqual(warned, [], "not sent to this thread");
      pool.close();
    } finally {
      console.warn = warn;
    }
  });

  it("close() rejects the jobs under way and waiting", async () => {
    FakeWorker.reset();
    const pool = workerPool({ url: "hash-worker.js", size: 1, newWorker: () => new FakeWorker() });
    const part = new Blob([randomBytes(1000)]);
    const jobs = [pool.hash(part), pool.hash(part)];
    pool.close();
    for (const j of jobs) assert.equal(((await j.catch((e: unknown) => e)) as { kind?: string }).kind, "aborted");
    assert.equal(((await pool.hash(part).catch((e: unknown) => e)) as { kind?: string }).kind, "aborted");
  });
});

/** Whether a message carries bytes (an ArrayBuffer, a view of one, or a Blob), anywhere in it. */
function carriesBytes(v: unknown): boolean {
  if (v instanceof ArrayBuffer || ArrayBuffer.isView(v) || v instanceof Blob) return true;
  if (v && typeof v === "object") return Object.values(v).some(carriesBytes);
  return false;
}

/**
 * A stand-in for a worker of protocol 2: it holds the parts it is asked
 * to hold, and PUTs them (to `received`) when told, dropping them as it
 * does; every message it sends the page is kept.
 */
class SendingWorker implements WorkerLike {
  static toPage: HashMessage[] = [];
  static received: { url: string; bytes: Uint8Array }[] = [];
  static held = new Map<number, Uint8Array>();
  onmessage: ((e: { data: HashMessage }) => void) | null = null;
  onerror: ((e: { message: string; preventDefault(): void }) => void) | null = null;
  private send(m: HashMessage) {
    SendingWorker.toPage.push(m);
    setImmediate(() => this.onmessage?.({ data: m }));
  }
  postMessage(m: HashJob | PartCommand): void {
    if ("type" in m) {
      if (m.type === "release") SendingWorker.held.delete(m.id);
      if (m.type === "put") {
        const bytes = SendingWorker.held.get(m.id)!;
        SendingWorker.held.delete(m.id);
        SendingWorker.received.push({ url: m.url, bytes });
        this.send({ type: "put-progress", v: 2, id: m.id, put: m.put, loaded: bytes.length, total: bytes.length });
        this.send({ type: "put-done", v: 2, id: m.id, put: m.put, res: { status: 200, text: "", etag: '"e"' } });
      }
      return;
    }
    void m.blob.arrayBuffer().then((b) => {
      const bytes = new Uint8Array(b);
      if (!m.hold) return this.send({ type: "done", id: m.id, hashes: { sha256: createHash("sha256").update(bytes).digest("hex") } });
      SendingWorker.held.set(m.id!, bytes);
      this.send({ type: "done", id: m.id, hashes: { sha256: createHash("sha256").update(bytes).digest("hex") }, held: true, v: 2 });
    });
  }
  terminate(): void {}
}

describe("workerPool: workers that send the parts they read", () => {
  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

  it("hold(): the worker keeps the part and PUTs it when given its URL, once; no message to the page carries its bytes", async () => {
    SendingWorker.toPage = [];
    SendingWorker.received = [];
    SendingWorker.held.clear();
    const fromPage: PutRequest[] = [];
    const pool = workerPool({
      url: "hash-worker.js",
      size: 2,
      holds: true,
      newWorker: () => new SendingWorker(),
      transport: async (req) => {
        fromPage.push(req);
        return { status: 200, text: "", etag: '"e"' };
      },
    });
    const part = new Blob([randomBytes(1000)]);
    const bytes = new Uint8Array(await part.arrayBuffer());
    const got = await pool.hold(part);
    assert.equal(got.sha256, sha(bytes));
    assert.ok(got.held, "held by its worker");
    const progress: number[] = [];
    const res = await got.held.put({ url: "https://s3.test/p?partNumber=1", method: "PUT", headers: {}, body: part, onProgress: (l) => progress.push(l) });
    assert.equal(res.status, 200);
    assert.deepEqual(progress, [1000]);
    assert.equal(SendingWorker.received.length, 1);
    assert.deepEqual(SendingWorker.received[0].bytes, bytes, "the worker sent the bytes it read");
    assert.equal(SendingWorker.held.size, 0, "the bytes went with the PUT");
    assert.equal(fromPage.length, 0);
    // A retry: the worker holds nothing now, the page sends the part (its slice).
    await got.held.put({ url: "https://s3.test/p?partNumber=1", method: "PUT", headers: {}, body: part });
    assert.equal(SendingWorker.received.length, 1, "the worker sent the part once");
    assert.equal(fromPage.length, 1);
    assert.equal(fromPage[0].body, part);
    got.held.release();
    assert.ok(SendingWorker.toPage.length > 0);
    assert.deepEqual(SendingWorker.toPage.filter(carriesBytes), [], "no message to the page carries bytes");
    pool.close();
  });

  it("an older worker (protocol 1) answers a hold with the hash alone: the page sends the part", async () => {
    FakeWorker.reset();
    const pool = workerPool({ url: "old/hash-worker.js", size: 1, holds: true, newWorker: () => new FakeWorker() });
    const part = new Blob([randomBytes(1000)]);
    const got = await pool.hold(part);
    assert.equal(got.sha256, sha(new Uint8Array(await part.arrayBuffer())));
    assert.equal(got.held, undefined);
    assert.equal(FakeWorker.jobs[0].hold, true, "it was asked to hold");
    pool.close();
  });

  it("a held part whose worker is gone is sent from the page (with the part as the body)", async () => {
    SendingWorker.held.clear();
    const sentFromPage: number[] = [];
    const pool = workerPool({
      url: "hash-worker.js",
      size: 1,
      holds: true,
      newWorker: () => new SendingWorker(),
      transport: async (req) => {
        sentFromPage.push(req.body.size);
        return { status: 200, text: "", etag: null };
      },
    });
    const part = new Blob([randomBytes(700)]);
    const got = await pool.hold(part);
    pool.close();
    assert.equal((await got.held!.put({ url: "https://s3.test/p", method: "PUT", headers: {}, body: part })).status, 200);
    assert.deepEqual(sentFromPage, [700]);
  });
});
