import assert from "node:assert/strict";
import { setImmediate as tick } from "node:timers/promises";
import { describe, it } from "node:test";
import { createHash } from "node:crypto";
import { MAX_PARTS, choosePartSize, type UploadEvent } from "../src/client.js";
import { inlinePartHasher } from "../src/hash.js";
import { countNativeDigests, makeFile, sha256hex } from "./fakes.js";
import { failure, until, world } from "./world.js";

// Small numbers stand for the real ones: parts of 1,000 bytes, multipart above 2,500.
const small = { multipartBytes: 2_500, keepFileBytes: 2_500, partBytes: 1_000, hashChunkBytes: 400 };
const FILE = 5_500; // 6 parts, the last one 500 bytes

/** A multipart upload cancelled once part 3 reached the storage, one part at a time. */
async function interruptedAtPart3() {
  const w = world();
  const ctrl = new AbortController();
  w.server.onPartPut = (n) => {
    if (n === 3) ctrl.abort();
  };
  const { client } = w.page({ ...small, partConcurrency: 1 });
  const rec = await client.add(makeFile("a.bin", FILE));
  await client.upload(rec.key, { signal: ctrl.signal }).catch(() => undefined);
  w.server.onPartPut = undefined;
  return { w, client, rec };
}

const progress = (events: UploadEvent[]) => events.flatMap((e) => (e.type === "upload-progress" ? [e.loaded] : []));
const partsOf = (w: ReturnType<typeof world>) => w.server.puts.map((p) => p.partNumber);

async function fetchJSON(f: typeof fetch, url: string, init: RequestInit): Promise<{ uploadId: string }> {
  const res = await f(url, init);
  return (await res.json()) as { uploadId: string };
}

describe("choosePartSize", () => {
  it("is 8 MiB, or larger so that a file has at most 10,000 parts", () => {
    const MiB = 1 << 20;
    assert.equal(choosePartSize(200 * MiB), 8 * MiB);
    assert.equal(choosePartSize(80_000 * MiB), 8 * MiB);
    assert.equal(choosePartSize(80_001 * MiB), 9 * MiB);
    for (const size of [10_000 * 8 * MiB + 1, 5 * 1024 ** 4, 48 * 1024 ** 4]) {
      assert.ok(Math.ceil(size / choosePartSize(size)) <= MAX_PARTS, String(size));
    }
  });
});

describe("UploadClient: multipart", () => {
  it("starts at once: no whole-file pass, a create without sha256, parts hashed as they are sent, at most N at a time, complete declaring every part's SHA-256", async () => {
    const w = world();
    // Each PUT takes a moment (real time), so that the next parts are hashed and sent alongside.
    w.server.onPartPut = () => new Promise((r) => setTimeout(r, 5));
    const { client, events, onEvent } = w.page({ ...small, partConcurrency: 2 });
    const file = makeFile("movie.mp4", FILE, "video/mp4");
    const bytes = new Uint8Array(await file.arrayBuffer());
    const partHashes = [0, 1, 2, 3, 4, 5].map((i) => sha256hex(bytes.subarray(i * 1000, (i + 1) * 1000)));

    const rec = await client.add(file, { onEvent });
    assert.equal(rec.partSize, 1_000);
    assert.equal(rec.phase, "ready", "ready at once");
    assert.equal(rec.file, undefined, "a large file is not kept in IndexedDB");
    assert.equal(rec.sha256, undefined, "no whole-file hash");
    assert.equal(rec.partSha256, undefined);
    assert.equal(events.filter((e) => e.type === "hash-progress").length, 0, "nothing was read yet");

    const done = await client.upload(rec.key, { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(done.multipart, { partSize: 1_000, partCount: 6 });
    assert.equal(done.sha256, undefined, "the completed body has no sha256: none was given");
    const digests = Buffer.concat(partHashes.map((h) => Buffer.from(h, "hex")));
    assert.equal(done.compositeSha256, `${createHash("sha256").update(digests).digest("base64")}-6`);
    const create = JSON.parse(w.server.creates[0].body ?? "") as Record<string, unknown>;
    assert.deepEqual(create, { filename: "movie.mp4", contentType: "video/mp4", size: FILE, partSize: 1_000 }, "no sha256 in the create");
    assert.deepEqual(w.server.completeBodies(), [{ parts: partHashes.map((sha256, i) => ({ partNumber: i + 1, sha256 })) }]);
    assert.deepEqual([...w.server.objects.values()], [{ sha256: sha256hex(bytes), size: FILE, contentType: "video/mp4", multipart: true }]);
    assert.deepEqual(partsOf(w).sort(), [1, 2, 3, 4, 5, 6], "each part once");
    assert.equal(w.server.maxPartsInFlight, 2);
    assert.equal(w.server.requestsTo("GET", "/parts").length, 0, "a first-time create lists nothing");
    assert.equal(w.server.requestsTo("POST", "/complete").length, 1);
    const p = progress(events);
    assert.ok(p.every((v, i) => i === 0 || v >= p[i - 1]), `progress went back: ${p.join(", ")}`);
    assert.equal(p.at(-1), FILE);
    assert.ok(p.some((v) => v > 0 && v < FILE && v % 1000 !== 0), "bytes within parts are counted");
    assert.deepEqual(await client.pending(), []);
  });

  it("hashes parts with the native digest while they fit in wholeHashBytes (64 MiB by default), in chunks when they do not", async () => {
    const native = countNativeDigests();
    try {
      // No Worker here: the parts are hashed on this thread, one at a time, the whole bound theirs.
      for (const { wholeHashBytes, natively } of [
        { wholeHashBytes: undefined, natively: 6 },
        { wholeHashBytes: 1_000, natively: 6 },
        // Only the last part, of 500 bytes, fits.
        { wholeHashBytes: 999, natively: 1 },
        { wholeHashBytes: 499, natively: 0 },
        { wholeHashBytes: 0, natively: 0 },
      ]) {
        const w = world();
        const { client } = w.page({ ...small, wholeHashBytes });
        const file = makeFile("movie.mp4", FILE);
        const bytes = new Uint8Array(await file.arrayBuffer());
        native.reset();
        const done = await client.start(file);
        assert.equal(native.calls(), natively, `wholeHashBytes ${wholeHashBytes}: parts hashed natively`);
        const want = [0, 1, 2, 3, 4, 5].map((i) => ({ partNumber: i + 1, sha256: sha256hex(bytes.subarray(i * 1000, (i + 1) * 1000)) }));
        assert.deepEqual(w.server.completeBodies(), [{ parts: want }], `wholeHashBytes ${wholeHashBytes}`);
        assert.equal(done.status, "completed");
      }
    } finally {
      native.restore();
    }
  });

  it("sends the first part before the last one is hashed, hashing a bounded number of parts ahead", async () => {
    const w = world();
    const log: string[] = [];
    const inner = inlinePartHasher(400);
    const size = 20_000; // 20 parts
    const file = makeFile("a.bin", size);
    const bytes = new Uint8Array(await file.arrayBuffer());
    const partOf = (h: string) => 1 + [...Array(20).keys()].findIndex((i) => sha256hex(bytes.subarray(i * 1000, (i + 1) * 1000)) === h);
    const hasher = {
      hash: async (part: Blob, signal?: AbortSignal) => {
        const h = await inner.hash(part, signal);
        log.push(`hashed ${partOf(h)}`);
        return h;
      },
      close: () => inner.close(),
    };
    w.server.onPartPut = async (n) => {
      log.push(`put ${n}`);
      await new Promise((r) => setTimeout(r, 5));
    };
    const { client } = w.page({ ...small, partConcurrency: 1, partHasher: () => hasher });
    const done = await client.start(file);
    assert.equal(done.status, "completed");
    assert.ok(log.indexOf("put 1") < log.indexOf("hashed 20"), log.join(", "));
    // At most 4 × concurrency parts hashed ahead of the part being sent.
    for (let n = 1; n <= 20; n++) {
      const hashedBefore = log.slice(0, log.indexOf(`put ${n}`)).filter((e) => e.startsWith("hashed")).length;
      assert.ok(hashedBefore <= n + 4, `before part ${n}'s PUT, ${hashedBefore} parts hashed: ${log.join(", ")}`);
    }
  });

  it("where hashing is the slower side, gathers the parts hashed while others are sent into one request for their URLs", async () => {
    const w = world();
    const inner = inlinePartHasher(400);
    // Each hash, and each PUT, ends when the test says.
    const hashGates: (() => void)[] = [];
    const putGates: (() => void)[] = [];
    let open = false;
    const gated = {
      hash: async (part: Blob, signal?: AbortSignal) => {
        const h = await inner.hash(part, signal);
        if (!open) await new Promise<void>((r) => hashGates.push(r));
        return h;
      },
      close: () => inner.close(),
    };
    w.server.onPartPut = () => (open ? undefined : new Promise<void>((r) => putGates.push(r)));
    const { client } = w.page({ ...small, partConcurrency: 4, partHasher: () => gated });
    const signed = () => w.server.requestsTo("POST", "/parts").map((r) => (JSON.parse(r.body ?? "") as { parts: { partNumber: number }[] }).parts.map((p) => p.partNumber));
    const hashNext = async () => {
      await until(() => hashGates.length > 0, "a part is hashed");
      hashGates.shift()!();
    };
    const run = client.start(makeFile("a.bin", 24_000));

    await hashNext(); // part 1: nothing is being sent yet, so it is signed and sent at once
    await until(() => putGates.length === 1, "part 1 is being sent");
    assert.deepEqual(signed(), [[1]]);
    for (let i = 0; i < 3; i++) await hashNext(); // parts 2, 3, 4: their senders wait for more
    for (let i = 0; i < 20; i++) await tick();
    assert.deepEqual(signed(), [[1]], "no request for fewer parts than PUTs in flight, while part 1 is sent and more are hashed");
    await hashNext(); // part 5
    await until(() => signed().length === 2, "a batch is signed");
    assert.deepEqual(signed()[1].sort((a, b) => a - b), [2, 3, 4, 5]);

    open = true;
    for (const g of [...hashGates.splice(0), ...putGates.splice(0)]) g();
    const done = await run;
    assert.equal(done.status, "completed");
    assert.equal(signed().flat().length, 24);
  });

  it("a complete refused with parts_mismatch is final: not retried, nothing stored, the message says the stored parts are not this file's", async () => {
    const w = world();
    w.server.onPartPut = (n) => {
      // Another writer replaces part 2's bytes under this upload before complete.
      if (n === 6) {
        const mp = [...w.server.multiparts.values()][0];
        const p2 = mp.parts.get(2)!;
        mp.parts.set(2, { ...p2, sha256: "0".repeat(64) });
      }
    };
    const { client, events, onEvent } = w.page({ ...small, partConcurrency: 1 });
    const rec = await client.add(makeFile("a.bin", FILE));
    const err = await failure(client.upload(rec.key, { onEvent }));
    assert.deepEqual([err.kind, err.status, err.code, err.retryable], ["api", 409, "parts_mismatch", false]);
    assert.match(err.message, /The parts stored for this upload are not those of "a\.bin".*nothing was stored/);
    assert.equal(w.server.requestsTo("POST", "/complete").length, 1, "not retried");
    assert.equal(events.filter((e) => e.type === "retry").length, 0);
    assert.equal(w.server.objects.size, 0, "nothing stored");
    const stored = await client.get(rec.key);
    assert.equal(stored?.phase, "failed");
    assert.equal(stored?.error?.code, "parts_mismatch");
    assert.equal(stored?.error?.retryable, false);
  });

  it("retries a part whose answer was lost, and only that part", async () => {
    const w = world();
    w.server.partFaults.set(3, ["lose-response"]);
    const { client, events, onEvent } = w.page(small);
    const done = await client.start(makeFile("a.bin", FILE), { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(partsOf(w).filter((n) => n === 3).length, 2);
    assert.equal(partsOf(w).length, 7);
    const r = events.filter((e) => e.type === "retry");
    assert.deepEqual(
      r.map((e) => e.type === "retry" && [e.step, e.partNumber]),
      [["put", 3]],
    );
  });

  it("retries each part on its own by the shared rules, however many attempts it takes", async () => {
    const w = world();
    w.server.partFaults.set(2, [{ status: 503, body: "<Error><Code>SlowDown</Code></Error>" }, "network", { status: 500 }, "network", { status: 503 }, "network", { status: 500 }, "network", { status: 503 }]);
    w.server.partFaults.set(5, [{ status: 429 }]);
    const { client } = w.page(small);
    const done = await client.start(makeFile("a.bin", FILE));
    assert.equal(done.status, "completed");
    assert.equal(partsOf(w).filter((n) => n === 2).length, 10, "more than the old cap of 6 PUT attempts");
    assert.equal(partsOf(w).filter((n) => n === 5).length, 2);
    assert.equal(partsOf(w).filter((n) => n === 1).length, 1);
  });

  it("a part refused for good stops the others and fails the upload, resumable", async () => {
    const w = world();
    w.server.partFaults.set(1, [{ status: 400, body: "<Error><Code>InvalidArgument</Code><Message>no</Message></Error>" }]);
    const { client } = w.page({ ...small, partConcurrency: 1 });
    const rec = await client.add(makeFile("a.bin", FILE));
    const err = await failure(client.upload(rec.key));
    assert.equal(err.kind, "storage");
    assert.equal(err.code, "InvalidArgument");
    assert.deepEqual(partsOf(w), [1], "no part after the failure");
    assert.equal((await client.get(rec.key))?.phase, "failed");
  });

  it("asks for a fresh URL when a part's URL was refused (expired on the way)", async () => {
    const w = world();
    w.server.partFaults.set(4, [{ status: 403, body: "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>" }]);
    const { client, events, onEvent } = w.page(small);
    await client.start(makeFile("a.bin", FILE), { onEvent });
    const urls4 = w.server.puts.filter((p) => p.partNumber === 4).map((p) => p.url);
    assert.equal(urls4.length, 2);
    assert.notEqual(urls4[0], urls4[1]);
    assert.ok(events.some((e) => e.type === "refresh" && e.partNumber === 4));
    assert.equal(w.server.objects.size, 1);
  });

  it("does not use a part URL asked for earlier that is about to expire", async () => {
    const w = world();
    w.server.partUrlTtl = 30_000;
    w.server.onPartPut = async (n) => {
      // Part 1 takes long enough (real time) for the next parts to be hashed meanwhile.
      if (n === 1) await new Promise((r) => setTimeout(r, 50));
      if (n === 2) w.clock.t += 20_000; // part 2 takes 20 s: the URLs asked for with it have 10 s left
    };
    const { client } = w.page({ ...small, partConcurrency: 1 });
    const done = await client.start(makeFile("a.bin", FILE));
    assert.equal(done.status, "completed");
    const batches = w.server.requestsTo("POST", "/parts").map((r) => (JSON.parse(r.body ?? "") as { parts: { partNumber: number }[] }).parts.map((p) => p.partNumber));
    // Part 1 is signed alone, as soon as it is hashed; part 2 with the parts hashed meanwhile.
    assert.deepEqual(batches[0], [1]);
    assert.equal(batches[1][0], 2);
    assert.ok(batches[1].includes(3), `part 3 was hashed ahead and signed with part 2: ${JSON.stringify(batches)}`);
    // Part 3's URL, 10 s from expiring after part 2, is asked for again.
    assert.equal(batches[2][0], 3);
    assert.equal(w.server.puts.length, 6, "no PUT was refused");
  });

  it("Cancel aborts the parts in flight and keeps what the storage has; Resume sends only the rest", async () => {
    const w = world();
    const ctrl = new AbortController();
    w.server.onPartPut = (n) => {
      if (n === 4) ctrl.abort();
    };
    const { client } = w.page({ ...small, partConcurrency: 1 });
    const rec = await client.add(makeFile("a.bin", FILE));
    const err = await failure(client.upload(rec.key, { signal: ctrl.signal }));
    assert.equal(err.kind, "aborted");
    assert.equal((await client.get(rec.key))?.phase, "paused");
    const mp = [...w.server.multiparts.values()][0];
    assert.deepEqual([...mp.parts.keys()].sort(), [1, 2, 3], "the storage keeps the parts sent");
    assert.equal(w.server.requestsTo("DELETE", "").length, 0, "Cancel deletes nothing");

    w.server.onPartPut = undefined;
    const sentBefore = w.server.puts.length;
    const done = await client.upload(rec.key);
    assert.equal(done.status, "completed");
    assert.deepEqual(w.server.puts.slice(sentBefore).map((p) => p.partNumber), [4, 5, 6]);
    assert.equal(w.server.requestsTo("GET", "/parts").length, 1);
  });

  it("after a reload: Resume asks for the file, hashes the parts the storage holds from it, refuses another file before sending anything, and sends only the missing parts", async () => {
    const w = world();
    const file = makeFile("big.iso", FILE, "application/octet-stream", 3);
    const ctrl = new AbortController();
    w.server.onPartPut = (n) => {
      if (n === 4) ctrl.abort(); // the page goes away during part 4
    };
    const first = w.page({ ...small, partConcurrency: 1 });
    const rec = await first.client.add(file);
    await first.client.upload(rec.key, { signal: ctrl.signal }).catch(() => undefined);
    w.server.onPartPut = undefined;

    const { client, events, onEvent } = w.page(small);
    const [stored] = await client.pending();
    assert.equal(stored.key, rec.key);
    assert.equal(stored.partSize, 1_000);
    assert.equal(stored.sha256, undefined);
    assert.equal(client.hasFile(stored), false);
    assert.equal((await failure(client.upload(rec.key))).code, "file_needed");
    // The same size, other bytes: its parts 1–3 are not those stored.
    const putsBefore = w.server.puts.length;
    const signsBefore = w.server.requestsTo("POST", "/parts").length;
    const other = makeFile("big.iso", FILE, "application/octet-stream", 4);
    const mismatch = await failure(client.upload(rec.key, { file: other }));
    assert.deepEqual([mismatch.kind, mismatch.code, mismatch.retryable], ["file", "file_mismatch", true]);
    assert.match(mismatch.message, /^This is not the same "big\.iso"/);
    assert.equal(w.server.puts.length, putsBefore, "nothing sent from the other file");
    assert.equal(w.server.requestsTo("POST", "/parts").length, signsBefore, "nothing signed for it");
    assert.equal((await client.get(rec.key))?.phase, "failed");
    assert.equal(client.hasFile((await client.get(rec.key))!), false, "the other file is not kept for a Resume");

    const sent = w.server.partBytesSent;
    const again = new File([await file.arrayBuffer()], "big.iso");
    const done = await client.upload(rec.key, { file: again, onEvent });
    assert.equal(done.status, "completed");
    assert.equal(w.server.partBytesSent - sent, 2_500, "parts 4, 5 and 6 only");
    const verified = events.flatMap((e) => (e.type === "verify-progress" ? [[e.loaded, e.total]] : []));
    assert.deepEqual(verified.at(-1), [3_000, 3_000], "the three parts held were hashed from the file");
    assert.deepEqual(
      events.filter((e) => e.type === "parts")[0],
      { type: "parts", done: 3, total: 6 },
      "the listing found three parts",
    );
    assert.equal(progress(events).find((v) => v > 0), 3_000, "progress starts from what the storage holds");
    assert.equal(new Set(w.server.creates.map((c) => c.key)).size, 1);
    assert.equal(w.server.objects.size, 1);
    assert.equal(w.server.completeBodies().at(-1)?.parts?.length, 6, "complete declares the held parts' hashes too");
  });

  it("resumes the record of an earlier version (whole-file SHA-256 and every part's kept): the create is replayed with its sha256; the file picked again is hashed and checked, another file of the same size refused before it is sent", async () => {
    const w = world();
    const file = makeFile("old.bin", FILE);
    const bytes = new Uint8Array(await file.arrayBuffer());
    const partSha256 = [0, 1, 2, 3, 4, 5].map((i) => sha256hex(bytes.subarray(i * 1000, (i + 1) * 1000)));
    let hashed = 0;
    const inner = inlinePartHasher();
    const counting = () => ({
      hash: (part: Blob, signal?: AbortSignal) => {
        hashed++;
        return inner.hash(part, signal);
      },
      close: () => undefined,
    });
    const { client, events, onEvent } = w.page({ ...small, partConcurrency: 1, partHasher: counting });
    const key = "key-old-0000000000000000";
    const meta = { filename: "old.bin", contentType: "application/octet-stream", size: FILE, sha256: sha256hex(bytes), partSize: 1_000 };
    // The earlier version's create, and parts 1 and 2 sent.
    await client.store.put({ key, api: "https://api.test", ...meta, lastModified: 0, partSha256, sent: true, phase: "uploading", createdAt: 1, updatedAt: 1 });
    const first = await fetchJSON(w.server.fetch, "https://api.test/uploads", { method: "POST", headers: { "Idempotency-Key": key }, body: JSON.stringify(meta) });
    const held = w.server.multiparts.get(first.uploadId)!.parts;
    for (const n of [1, 2]) held.set(n, { size: 1_000, sha256: partSha256[n - 1], bytes: Buffer.from(bytes.subarray((n - 1) * 1000, n * 1000)) });

    // Another file of the same size: its parts 1 and 2 are hashed, differ, and nothing is signed or sent.
    const other = makeFile("old.bin", FILE, "application/octet-stream", 4);
    const refused = await failure(client.upload(key, { file: other }));
    assert.deepEqual([refused.kind, refused.code], ["file", "file_mismatch"]);
    assert.match(refused.message, /^This is not the same "old\.bin": its part [12] differs/);
    assert.equal(hashed, 2, "the held parts were hashed from the file picked");
    assert.equal(w.server.puts.length, 0, "nothing sent from the other file");
    assert.equal(w.server.requestsTo("POST", "/parts").length, 0, "nothing signed for it");

    // One whose held parts are the same but whose part 4 differs: refused once part 4 is hashed, before it is signed or sent.
    const changed = new Uint8Array(bytes);
    changed[3_500] ^= 1;
    const refused4 = await failure(client.upload(key, { file: new File([changed], "old.bin") }));
    assert.deepEqual([refused4.code, refused4.message], ["file_mismatch", 'This is not the same "old.bin": its part 4 differs from that of the file picked first.']);
    assert.deepEqual(partsOf(w), [3], "only part 3, which is the first file's");
    const signed = w.server.requestsTo("POST", "/parts").map((r) => (JSON.parse(r.body ?? "") as { parts: { partNumber: number }[] }).parts.map((p) => p.partNumber));
    assert.ok(!signed.flat().includes(4), `part 4 not signed (${JSON.stringify(signed)})`);

    // The same file, picked again: its held parts are hashed and found the same, the others sent.
    hashed = 0;
    const done = await client.upload(key, { file: new File([bytes], "old.bin"), onEvent });
    assert.equal(done.status, "completed");
    assert.equal(done.sha256, meta.sha256);
    assert.equal(done.uploadId, first.uploadId);
    assert.equal((JSON.parse(w.server.creates.at(-1)?.body ?? "") as { sha256?: string }).sha256, meta.sha256, "replayed with the same body");
    assert.equal(new Set(w.server.creates.map((c) => c.key)).size, 1);
    assert.deepEqual(partsOf(w), [3, 4, 5, 6]);
    assert.equal(hashed, 6, "parts 1–3 checked, parts 4–6 hashed as sent");
    assert.deepEqual(events.flatMap((e) => (e.type === "verify-progress" ? [[e.loaded, e.total]] : [])).at(-1), [3_000, 3_000]);
    assert.deepEqual(w.server.completeBodies(), [{ parts: partSha256.map((sha256, i) => ({ partNumber: i + 1, sha256 })) }]);
    assert.deepEqual([...w.server.objects.values()].map((o) => o.sha256), [meta.sha256]);
  });

  it("takes a completed upload whose sha256 another client of the same key gave at complete", async () => {
    const w = world();
    const file = makeFile("a.bin", FILE);
    const whole = sha256hex(new Uint8Array(await file.arrayBuffer()));
    // Another client completes the upload first, declaring the whole file's SHA-256 too; ours completes after it.
    const fetch: typeof globalThis.fetch = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (init?.method === "POST" && url.endsWith("/complete") && typeof init.body === "string") {
        const body = JSON.parse(init.body) as { parts: unknown[] };
        await w.server.fetch(url, { method: "POST", body: JSON.stringify({ ...body, sha256: whole }) });
      }
      return w.server.fetch(input, init);
    };
    const { client } = w.page({ ...small, fetch });
    const done = await client.start(file);
    assert.equal(done.status, "completed");
    assert.equal(done.sha256, whole, "the other client's");
    assert.equal((JSON.parse(w.server.creates[0].body ?? "") as { sha256?: string }).sha256, undefined);
    assert.deepEqual(w.server.completeBodies().map((b) => b?.sha256), [whole, undefined]);
  });

  it("sends again a part whose stored SHA-256 differs from the local one", async () => {
    const { w, client, rec } = await interruptedAtPart3();
    const mp = [...w.server.multiparts.values()][0];
    const p2 = mp.parts.get(2)!;
    mp.parts.set(2, { ...p2, sha256: "0".repeat(64) });
    const before = w.server.puts.length;
    await client.upload(rec.key);
    assert.deepEqual(w.server.puts.slice(before).map((p) => p.partNumber).sort(), [2, 3, 4, 5, 6]);
  });

  it("on parts_missing, lists the parts, sends the missing ones and completes again", async () => {
    const w = world();
    w.server.onPartPut = (n) => {
      // The storage loses part 2 once it is stored (as if the answer came from a stale replica).
      if (n === 6) [...w.server.multiparts.values()][0].parts.delete(2);
    };
    const { client } = w.page({ ...small, partConcurrency: 1 });
    const done = await client.start(makeFile("a.bin", FILE));
    assert.equal(done.status, "completed");
    assert.deepEqual(partsOf(w), [1, 2, 3, 4, 5, 6, 2]);
    assert.equal(w.server.requestsTo("POST", "/complete").length, 2);
  });

  it("a lost complete answer is retried; complete is idempotent", async () => {
    const w = world();
    w.server.completeFaults.push("lose-response");
    const { client } = w.page(small);
    const done = await client.start(makeFile("a.bin", FILE));
    assert.equal(done.status, "completed");
    assert.equal(w.server.requestsTo("POST", "/complete").length, 2);
    assert.equal(w.server.objects.size, 1);
  });

  it("an upload completed elsewhere (upload_not_pending) is reported completed", async () => {
    const w = world();
    const { client } = w.page(small);
    const rec = await client.add(makeFile("a.bin", FILE));
    let once = true;
    w.server.onPartPut = async () => {
      if (!once) return;
      once = false;
      // Another tab finishes the same upload meanwhile.
      await w.page(small).client.upload(rec.key, { file: makeFile("a.bin", FILE) });
    };
    const done = await client.upload(rec.key);
    assert.equal(done.status, "completed");
    assert.equal(w.server.objects.size, 1);
  });

  it("waits for the network while offline, and finishes when it is back", async () => {
    const w = world();
    const { client, events, onEvent } = w.page({ ...small, partConcurrency: 1 });
    let dropped = false;
    w.server.onPartPut = async (n) => {
      if (n === 3 && !dropped) {
        dropped = true;
        w.network.set(false);
        await tick();
      }
    };
    const run = client.start(makeFile("a.bin", FILE), { onEvent });
    await until(() => events.some((e) => e.type === "retry" && e.offline), "the client waits for the network");
    const sleeps = w.clock.sleeps.length;
    w.network.set(true);
    const done = await run;
    assert.equal(done.status, "completed");
    assert.equal(w.clock.sleeps.length, sleeps, "no backoff while offline");
    assert.equal(w.server.objects.size, 1);
  });
});

describe("UploadClient: discard", () => {
  it("deletes the multipart upload on the server and forgets the key", async () => {
    const { w, client, rec } = await interruptedAtPart3();
    assert.equal(w.server.multiparts.size, 1);

    assert.equal(await client.discard(rec.key), "aborted");
    assert.equal(w.server.multiparts.size, 0, "the storage holds no parts");
    assert.equal(w.server.requestsTo("DELETE", "").length, 1);
    assert.deepEqual(await client.pending(), []);
    assert.equal(w.server.objects.size, 0);
  });

  it("finds the upload by replaying the create when its answer was lost", async () => {
    const w = world();
    w.server.createFaults.push("lose-response", { status: 400, body: JSON.stringify({ error: "invalid_request", message: "scripted" }) });
    const { client } = w.page(small);
    const rec = await client.add(makeFile("a.bin", FILE));
    await failure(client.upload(rec.key));
    const stored = await client.get(rec.key);
    assert.equal(stored?.uploadId, undefined);
    assert.equal(w.server.multiparts.size, 1, "the server made the upload");

    assert.equal(await client.discard(rec.key), "aborted");
    assert.equal(w.server.multiparts.size, 0);
    assert.equal(new Set(w.server.creates.map((c) => c.key)).size, 1);
  });

  it("forgets an upload that was never sent without asking the server", async () => {
    const w = world();
    const { client } = w.page(small);
    const rec = await client.add(makeFile("a.bin", FILE));
    assert.equal(await client.discard(rec.key), "forgotten");
    assert.equal(w.server.requests.length, 0);
    assert.deepEqual(await client.pending(), []);
  });

  it("says so when the upload completed meanwhile", async () => {
    const w = world();
    const { client } = w.page(small);
    const rec = await client.add(makeFile("a.bin", FILE));
    // Completed by another tab; this page's record is left behind.
    const file = makeFile("a.bin", FILE);
    const stale = await client.get(rec.key);
    await client.upload(rec.key, { file });
    await client.store.put({ ...stale!, uploadId: [...w.server.claims.values()][0].uploadId, sent: true });
    assert.equal(await client.discard(rec.key), "completed");
    assert.equal(w.server.objects.size, 1);
    assert.deepEqual(await client.pending(), []);
  });

  it("refuses while the upload runs", async () => {
    const w = world();
    w.server.partFaults.set(1, ["hang"]);
    const { client } = w.page({ ...small, partConcurrency: 1 });
    const rec = await client.add(makeFile("a.bin", FILE));
    const ctrl = new AbortController();
    const run = client.upload(rec.key, { signal: ctrl.signal }).catch(() => undefined);
    await until(() => w.server.puts.length > 0, "a part is in flight");
    assert.equal((await failure(client.discard(rec.key))).kind, "busy");
    ctrl.abort();
    await run;
  });
});
