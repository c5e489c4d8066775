import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type UploadEvent } from "../src/client.js";
import { PROBABLY_CORS, STORAGE_UNANSWERED } from "../src/codes.js";
import { describeError } from "../src/errors.js";
import { IndexedDBStore, type UploadRecord, type UploadStore } from "../src/store.js";
import type { PutTransport } from "../src/transport.js";
import { FakeServer, json, makeFile, sha256hex } from "./fakes.js";
import { API, failure, until, world } from "./world.js";

function keysOf(server: FakeServer): string[] {
  return server.creates.map((c) => c.key ?? "");
}

const retries = (events: UploadEvent[], step: string) => events.filter((e) => e.type === "retry" && e.step === step);

describe("UploadClient: one key per logical upload", () => {
  it("mints the key when the file is picked and stores it before hashing; uploads once", async () => {
    const w = world();
    const puts: UploadRecord[] = [];
    const inner = new IndexedDBStore({ indexedDB: w.factory });
    const store: UploadStore = { get: (k) => inner.get(k), delete: (k) => inner.delete(k), list: () => inner.list(), put: async (r) => (puts.push({ ...r }), inner.put(r)) };
    const { client, events, onEvent } = w.page({ store });
    const file = makeFile("photo.jpg", 100_000, "image/jpeg");

    const rec = await client.add(file, { onEvent });
    assert.equal(w.minted(), 1);
    assert.equal(puts[0].key, rec.key);
    assert.equal(puts[0].phase, "hashing");
    assert.equal(puts[0].sha256, undefined, "the key is stored before the hash is known");
    assert.equal(rec.sha256, sha256hex(new Uint8Array(await file.arrayBuffer())));
    assert.equal(rec.contentType, "image/jpeg");

    const done = await client.upload(rec.key, { onEvent });
    assert.equal(done.status, "completed");
    assert.equal(done.sha256, rec.sha256);
    assert.deepEqual(keysOf(w.server), [rec.key]);
    assert.equal(w.server.objects.size, 1);
    assert.equal(w.minted(), 1);
    assert.deepEqual(await client.pending(), [], "a completed upload is forgotten");
    const phases = events.filter((e) => e.type === "phase").map((e) => (e as { phase: string }).phase);
    assert.deepEqual(phases, ["hashing", "ready", "creating", "uploading", "completing", "completed"]);
    const progress = events.filter((e) => e.type === "upload-progress");
    assert.deepEqual(progress.at(-1), { type: "upload-progress", loaded: 100_000, total: 100_000 });
  });

  it("hashes in bounded chunks and reports progress", async () => {
    const w = world();
    const { client, events, onEvent } = w.page({ hashChunkBytes: 1000 });
    await client.add(makeFile("a.bin", 4_500), { onEvent });
    const hp = events.filter((e) => e.type === "hash-progress").map((e) => (e as { loaded: number }).loaded);
    assert.deepEqual(hp, [0, 1000, 2000, 3000, 4000, 4500]);
  });

  it("mints keys with crypto.randomUUID() by default, one per file", async () => {
    const w = world();
    const { client } = w.page({ newKey: undefined });
    const a = await client.add(makeFile("a.bin", 10));
    const b = await client.add(makeFile("a.bin", 10));
    for (const k of [a.key, b.key]) assert.match(k, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(a.key, b.key, "the same content picked twice is two logical uploads");
  });

  it("refuses an empty file without minting a key", async () => {
    const w = world();
    const err = await failure(w.page().client.add(new File([], "empty.txt")));
    assert.equal(err.kind, "file");
    assert.equal(w.minted(), 0);
  });
});

describe("UploadClient: create with retries", () => {
  it("retries a lost create answer with the same key: one claim, one object", async () => {
    const w = world();
    w.server.createFaults.push("lose-response");
    const { client, events, onEvent } = w.page();
    const done = await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(done.status, "completed");
    const keys = keysOf(w.server);
    assert.equal(keys.length, 2);
    assert.equal(new Set(keys).size, 1, "the retry used the same key");
    assert.equal(w.server.claims.size, 1);
    assert.equal(w.server.objects.size, 1);
    assert.equal(retries(events, "create").length, 1);
    assert.ok(events.some((e) => e.type === "created" && e.replay), "the retry was answered from the record");
  });

  it("retries network errors, 503 and 409 in progress, honouring Retry-After", async () => {
    const w = world();
    w.server.createFaults.push(
      "network",
      { status: 503, body: JSON.stringify({ error: "service_unavailable", message: "throttled" }), headers: { "Retry-After": "3" } },
      { status: 409, body: JSON.stringify({ error: "idempotency_in_progress", message: "busy" }), headers: { "Retry-After": "1" } },
      // API Gateway's own answer: the integration timed out.
      { status: 504, body: JSON.stringify({ message: "Endpoint request timed out" }) },
    );
    const { client, events, onEvent } = w.page({ createPolicy: { baseDelayMs: 100, maxDelayMs: 1000 } });
    await client.start(makeFile("a.bin", 10), { onEvent });
    const waits = retries(events, "create").map((e) => (e as { delayMs: number }).delayMs);
    // Full jitter with random() = 0.5 (the exponent counts every retry so far), or the server's Retry-After.
    assert.deepEqual(waits, [50, 3_000, 1_000, 400]);
    assert.equal(new Set(keysOf(w.server)).size, 1);
    assert.equal(w.server.objects.size, 1);
  });

  it("never retries another 4xx, and keeps the failure for the UI", async () => {
    const w = world();
    w.server.createFaults.push({ status: 422, body: JSON.stringify({ error: "idempotency_key_reuse", message: "reused" }) });
    const { client } = w.page();
    const rec = await client.add(makeFile("a.bin", 10));
    const err = await failure(client.upload(rec.key));
    assert.equal(err.kind, "api");
    assert.equal(err.status, 422);
    assert.equal(err.code, "idempotency_key_reuse");
    assert.equal(err.retryable, false);
    assert.equal(err.attempts, 1);
    assert.equal(w.server.creates.length, 1);
    const [stored] = await client.pending();
    assert.equal(stored.phase, "failed");
    assert.equal(stored.error?.code, "idempotency_key_reuse");
  });

  it("never retries 429 too_many_uploads, whatever its Retry-After; the key holds nothing, so Discard just forgets it", async () => {
    const w = world();
    w.server.createFaults.push({
      status: 429,
      body: JSON.stringify({ error: "too_many_uploads", message: "You have as many multipart uploads in progress as this service allows." }),
      headers: { "Retry-After": "1" },
    });
    const { client, events, onEvent } = w.page({ multipartBytes: 2_500, partBytes: 1_000 });
    const rec = await client.add(makeFile("big.bin", 5_000), { onEvent });
    const err = await failure(client.upload(rec.key, { onEvent }));
    assert.deepEqual([err.kind, err.status, err.code, err.retryable, err.attempts], ["api", 429, "too_many_uploads", false, 1]);
    assert.equal(w.server.creates.length, 1);
    assert.deepEqual(w.clock.sleeps, [], "no wait");
    assert.equal(retries(events, "create").length, 0);
    const stored = await client.get(rec.key);
    assert.equal(stored?.phase, "failed");
    assert.equal(stored?.error?.code, "too_many_uploads");
    assert.equal(stored?.sent, false, "nothing was created under the key");

    // Once a place is free, the same key creates it (nothing was recorded for it).
    const done = await client.upload(rec.key, { file: makeFile("big.bin", 5_000) });
    assert.equal(done.status, "completed");
    assert.deepEqual(new Set(keysOf(w.server)), new Set([rec.key]));
  });

  it("Discard of an upload refused with 429 too_many_uploads deletes nothing and sends nothing", async () => {
    const w = world();
    w.server.createFaults.push({ status: 429, body: JSON.stringify({ error: "too_many_uploads", message: "too many" }) });
    const { client } = w.page({ multipartBytes: 2_500, partBytes: 1_000 });
    const rec = await client.add(makeFile("big.bin", 5_000));
    await failure(client.upload(rec.key));
    const before = w.server.requests.length;
    assert.equal(await client.discard(rec.key), "forgotten");
    assert.equal(w.server.requests.length, before);
    assert.equal(await client.get(rec.key), undefined);
  });

  it("Discard whose replayed create is refused with 429 too_many_uploads forgets the key", async () => {
    const w = world();
    const { client } = w.page({ multipartBytes: 2_500, partBytes: 1_000 });
    const rec = await client.add(makeFile("big.bin", 5_000));
    // A record from a page that sent the create and vanished before its answer.
    await client.store.put({ ...rec, phase: "creating", sent: true });
    w.server.createFaults.push({ status: 429, body: JSON.stringify({ error: "too_many_uploads", message: "too many" }) });
    assert.equal(await client.discard(rec.key), "forgotten");
    assert.equal(w.server.creates.length, 1);
    assert.equal(w.server.requestsTo("DELETE", "").length, 0);
    assert.equal(await client.get(rec.key), undefined);
  });

  it("retries a 429 with another code, or none", async () => {
    const w = world();
    w.server.createFaults.push({ status: 429, body: JSON.stringify({ error: "slow_down", message: "x" }), headers: { "Retry-After": "2" } }, { status: 429, body: JSON.stringify({ message: "Too Many Requests" }) });
    const { client, events, onEvent } = w.page();
    await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(w.server.creates.length, 3);
    assert.deepEqual(
      retries(events, "create").map((e) => e.type === "retry" && e.error.status),
      [429, 429],
    );
  });

  it("gives up at the deadline, and a later resume succeeds with the same key", async () => {
    const w = world();
    for (let i = 0; i < 50; i++) w.server.createFaults.push({ status: 503, body: JSON.stringify({ error: "service_unavailable", message: "down" }) });
    const { client } = w.page({ createPolicy: { baseDelayMs: 1000, maxDelayMs: 4000, retryBudgetMs: 10_000 } });
    const rec = await client.add(makeFile("a.bin", 10));
    const started = w.clock.now();
    const err = await failure(client.upload(rec.key));
    assert.equal(err.kind, "deadline");
    assert.equal(err.retryable, true);
    assert.ok(w.clock.now() - started <= 10_000);
    assert.equal((await client.pending())[0].phase, "failed");

    w.server.createFaults.length = 0;
    await client.upload(rec.key);
    assert.equal(new Set(keysOf(w.server)).size, 1);
    assert.equal(w.server.objects.size, 1);
    assert.equal(w.minted(), 1);
  });
});

describe("UploadClient: PUT", () => {
  it("sends the signed headers and retries a failed PUT to the same URL", async () => {
    const w = world();
    w.server.putFaults.push("network", { status: 503, body: "<Error><Code>SlowDown</Code></Error>" });
    const { client, events, onEvent } = w.page();
    const file = makeFile("a.txt", 1000, "text/plain");
    await client.start(file, { onEvent });
    assert.equal(w.server.puts.length, 3);
    assert.equal(new Set(w.server.puts.map((p) => p.url)).size, 1);
    const sha = sha256hex(new Uint8Array(await file.arrayBuffer()));
    assert.deepEqual(w.server.puts[2].headers, { "Content-Type": "text/plain", "If-None-Match": "*", "x-amz-checksum-sha256": Buffer.from(sha, "hex").toString("base64") });
    assert.equal(retries(events, "put").length, 2);
    assert.equal(w.server.creates.length, 1);
    assert.equal(w.server.objects.size, 1);
  });

  it("retries a PUT whose answer was lost; the retry meets S3's 412 (If-None-Match), which is success: one object, confirmed by the status route", async () => {
    const w = world();
    w.server.putFaults.push("lose-response");
    const { client, events, onEvent } = w.page();
    const done = await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(
      w.server.puts.map((p) => p.status),
      [200, 412],
    );
    assert.equal(w.server.objects.size, 1);
    assert.equal(retries(events, "put").length, 1, "the lost answer is retried, the 412 is not");
    assert.ok(events.some((e) => e.type === "stored" && e.outcome === "already-stored"));
    assert.ok(!events.some((e) => e.type === "failed"));
    assert.equal(w.server.requestsTo("GET", "").length, 1);
    const phases = events.filter((e) => e.type === "phase").map((e) => (e as { phase: string }).phase);
    assert.deepEqual(phases.slice(-3), ["uploading", "completing", "completed"]);
    assert.deepEqual(await client.pending(), []);
  });

  it("retries S3's 409 ConditionalRequestConflict (two PUTs raced) until stored", async () => {
    const w = world();
    const conflict = { status: 409, body: "<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress</Message></Error>" };
    w.server.putFaults.push(conflict, conflict);
    const { client, events, onEvent } = w.page();
    const done = await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(
      w.server.puts.map((p) => p.status),
      [409, 409, 200],
    );
    assert.deepEqual(
      retries(events, "put").map((e) => e.type === "retry" && [e.error.status, e.error.code]),
      [
        [409, "ConditionalRequestConflict"],
        [409, "ConditionalRequestConflict"],
      ],
    );
    assert.ok(events.some((e) => e.type === "stored" && e.outcome === "stored"));
  });

  it("a 409 ConditionalRequestConflict whose racing PUT won: the retry meets 412 and completes", async () => {
    const w = world();
    w.server.putFaults.push("racer-stores");
    const { client, events, onEvent } = w.page();
    const file = makeFile("a.bin", 10);
    const done = await client.start(file, { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(
      w.server.puts.map((p) => p.status),
      [409, 412],
    );
    assert.equal(w.server.objects.get(done.uploadId)?.sha256, sha256hex(new Uint8Array(await file.arrayBuffer())));
    assert.ok(events.some((e) => e.type === "stored" && e.outcome === "already-stored"));
  });

  it("a 412 on the first attempt (another tab's PUT of this upload landed first) is success too; the status route says pending until the server records it", async () => {
    const w = world();
    let otherTab = true;
    const { client, events, onEvent } = w.page({
      transport: async (req) => {
        if (otherTab) {
          otherTab = false;
          await w.server.transport(req); // the same URL and bytes, sent by another tab a moment earlier
        }
        return w.server.transport(req);
      },
    });
    w.server.pendingPolls = 1;
    const done = await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(
      w.server.puts.map((p) => p.status),
      [200, 412],
    );
    assert.ok(events.some((e) => e.type === "stored" && e.outcome === "already-stored"));
    assert.equal(retries(events, "put").length, 0);
    assert.equal(w.server.requestsTo("GET", "").length, 2, "pending, then completed");
  });

  it("a 412 to a PUT that sent no If-None-Match (a URL of an older server) is an error, not retried", async () => {
    const w = world();
    w.server.signIfNoneMatch = false;
    w.server.putFaults.push({ status: 412, body: "<Error><Code>PreconditionFailed</Code></Error>" });
    const err = await failure(w.page().client.start(makeFile("a.bin", 10)));
    assert.deepEqual([err.kind, err.status, err.code, err.retryable, err.attempts], ["storage", 412, "PreconditionFailed", false, 1]);
    assert.equal(w.server.puts.length, 1);
  });

  it("refreshes a URL that expires soon by replaying the create with the same key", async () => {
    const w = world();
    w.server.ttls.push(0);
    const { client, events, onEvent } = w.page();
    await client.start(makeFile("a.bin", 10), { onEvent });
    assert.ok(events.some((e) => e.type === "refresh" && e.reason === "expired"));
    assert.equal(w.server.creates.length, 2);
    assert.equal(new Set(keysOf(w.server)).size, 1);
    assert.equal(w.server.puts.length, 1, "no PUT with the stale URL");
    assert.equal(w.server.objects.size, 1);
  });

  it("on a 403 (URL expired on the way), replays the create for a fresh URL", async () => {
    const w = world();
    const slowStart: PutTransport = async (req) => {
      if (w.server.puts.length === 0) w.clock.t += 16 * 60_000; // the URL's 15 minutes pass
      return w.server.transport(req);
    };
    const { client, events, onEvent } = w.page({ transport: slowStart });
    await client.start(makeFile("a.bin", 10), { onEvent });
    assert.ok(events.some((e) => e.type === "refresh" && e.reason === "forbidden"));
    assert.equal(w.server.puts.length, 2);
    assert.notEqual(w.server.puts[0].url, w.server.puts[1].url, "the second PUT used a freshly signed URL");
    assert.equal(new Set(keysOf(w.server)).size, 1);
    assert.equal(w.server.objects.size, 1);
  });

  it("does not loop when a fresh URL is refused too", async () => {
    const w = world();
    const denied = { status: 403, body: "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>" };
    w.server.putFaults.push(denied, denied, denied);
    const { client } = w.page();
    const err = await failure(client.start(makeFile("a.bin", 10)));
    assert.equal(err.kind, "storage");
    assert.equal(err.status, 403);
    assert.equal(err.code, "AccessDenied");
    assert.equal(w.server.puts.length, 2);
    assert.equal(w.server.creates.length, 2);
  });

  it("reports a changed file (S3 BadDigest) as a file error, not retried", async () => {
    const w = world();
    w.server.putFaults.push({ status: 400, body: "<Error><Code>BadDigest</Code></Error>" });
    const err = await failure(w.page().client.start(makeFile("a.bin", 10)));
    assert.equal(err.kind, "file");
    assert.equal(w.server.puts.length, 1);
  });
});

describe("UploadClient: completion", () => {
  it("polls GET /uploads/{id} with growing waits until completed", async () => {
    const w = world();
    w.server.pendingPolls = 3;
    const { client } = w.page({ completion: { baseMs: 200, capMs: 1000, timeoutMs: 60_000 } });
    const done = await client.start(makeFile("a.bin", 10));
    assert.equal(done.status, "completed");
    assert.equal(w.server.requests.filter((r) => r.method === "GET").length, 4);
    // Half-jittered exponential waits with random() = 0.5: 3/4 of 200, 400, 800.
    assert.deepEqual(w.clock.sleeps, [150, 300, 600]);
  });

  it("retries a failed status poll", async () => {
    const w = world();
    w.server.getFaults.push("network", { status: 502, body: JSON.stringify({ message: "Internal server error" }) });
    const { client, events, onEvent } = w.page();
    await client.start(makeFile("a.bin", 10), { onEvent });
    assert.equal(retries(events, "complete").length, 2);
  });

  it("gives up waiting after the completion timeout, resumable", async () => {
    const w = world();
    w.server.pendingPolls = 1_000;
    const { client } = w.page({ completion: { baseMs: 1000, capMs: 5000, timeoutMs: 30_000 } });
    const err = await failure(client.start(makeFile("a.bin", 10)));
    assert.equal(err.kind, "deadline");
    assert.equal(err.retryable, true);
  });
});

describe("UploadClient: reloads and resuming", () => {
  it("a reload mid-PUT lists the upload, and resuming uses the same key: one object", async () => {
    const w = world();
    w.server.putFaults.push("hang");
    const first = w.page();
    const rec = await first.client.add(makeFile("big.bin", 5_000));
    void first.client.upload(rec.key).catch(() => undefined); // the page goes away mid-PUT
    await until(async () => (await first.client.get(rec.key))?.phase === "uploading" && w.server.puts.length === 1, "the PUT started");

    const second = w.page(); // the reloaded page
    const [listed] = await second.client.pending();
    assert.equal(listed.key, rec.key);
    assert.equal(listed.phase, "uploading");
    assert.ok(listed.file, "the file was kept");
    const done = await second.client.upload(listed.key);
    assert.equal(done.status, "completed");
    assert.deepEqual(keysOf(w.server), [rec.key, rec.key]);
    assert.equal(w.server.claims.size, 1);
    assert.equal(w.server.objects.size, 1);
    assert.equal(w.minted(), 1);
  });

  it("after a reload between PUT and completion, the replayed create completes it without another PUT", async () => {
    const w = world();
    const first = w.page({
      transport: async (req) => {
        await w.server.transport(req);
        return new Promise(() => {}); // stored, but the page is gone before the answer
      },
    });
    const rec = await first.client.add(makeFile("a.bin", 10));
    void first.client.upload(rec.key);
    await until(() => w.server.objects.size === 1, "the object is stored");
    const done = await w.page().client.upload(rec.key);
    assert.equal(done.status, "completed");
    assert.equal(w.server.puts.length, 1);
    assert.deepEqual(keysOf(w.server), [rec.key, rec.key]);
  });

  it("a file too large to keep is picked again: the same content resumes, other content is refused", async () => {
    const w = world();
    const original = makeFile("huge.iso", 3_000, "application/octet-stream", 7);
    const rec = await w.page({ keepFileBytes: 1_000 }).client.add(original);
    assert.equal((await w.page().client.get(rec.key))?.file, undefined);

    const { client } = w.page({ keepFileBytes: 1_000 });
    const needed = await failure(client.upload(rec.key));
    assert.equal(needed.kind, "file");
    assert.equal(needed.code, "file_needed");
    assert.equal(needed.retryable, true);

    const other = makeFile("huge.iso", 3_000, "application/octet-stream", 8);
    const mismatch = await failure(client.upload(rec.key, { file: other }));
    assert.equal(mismatch.code, "file_mismatch");
    const shorter = await failure(client.upload(rec.key, { file: makeFile("huge.iso", 2_999) }));
    assert.equal(shorter.code, "file_mismatch");
    assert.equal(w.server.creates.length, 0, "nothing was sent for the wrong files");

    const again = new File([await original.arrayBuffer()], "huge.iso", { type: original.type });
    const done = await client.upload(rec.key, { file: again });
    assert.equal(done.status, "completed");
    assert.deepEqual(keysOf(w.server), [rec.key]);
    assert.equal(w.minted(), 1);
  });

  it("uploads a file too large to keep right after add(), without asking for it again or hashing it twice", async () => {
    const w = world();
    const { client, events, onEvent } = w.page({ keepFileBytes: 1_000, hashChunkBytes: 1_000 });
    const rec = await client.add(makeFile("big.mov", 3_000, "video/quicktime"), { onEvent });
    assert.equal(rec.file, undefined, "not kept in IndexedDB");
    assert.equal(client.hasFile(rec), true);
    const hashed = events.filter((e) => e.type === "hash-progress").length;

    const done = await client.upload(rec.key, { onEvent });
    assert.equal(done.status, "completed");
    assert.equal(w.server.objects.size, 1);
    assert.equal(events.filter((e) => e.type === "hash-progress").length, hashed, "hashed once, by add()");
    // Another page (after a reload) has no copy: the person picks the file again.
    const later = await w.page({ keepFileBytes: 1_000 }).client.add(makeFile("other.mov", 3_000));
    assert.equal(w.page({ keepFileBytes: 1_000 }).client.hasFile(later), false);
  });

  it("Cancel (AbortSignal) pauses; Resume continues with the same key", async () => {
    const w = world();
    w.server.putFaults.push("hang");
    const { client } = w.page();
    const rec = await client.add(makeFile("a.bin", 10));
    const ctrl = new AbortController();
    const run = failure(
      client.upload(rec.key, {
        signal: ctrl.signal,
        onEvent: (e) => {
          if (e.type === "phase" && e.phase === "uploading") setTimeout(() => ctrl.abort(), 0);
        },
      }),
    );
    const err = await run;
    assert.equal(err.kind, "aborted");
    assert.equal((await client.get(rec.key))?.phase, "paused");
    await client.upload(rec.key);
    assert.equal(new Set(keysOf(w.server)).size, 1);
    assert.equal(w.server.objects.size, 1);
  });

  it("refuses to run one upload twice at once (page or other tab)", async () => {
    const w = world();
    w.server.putFaults.push("hang");
    const { client } = w.page();
    const rec = await client.add(makeFile("a.bin", 10));
    const ctrl = new AbortController();
    const first = client.upload(rec.key, { signal: ctrl.signal }).catch(() => undefined);
    const err = await failure(client.upload(rec.key));
    assert.equal(err.kind, "busy");
    ctrl.abort();
    await first;

    const otherTab = w.page({ locks: { request: async (_n: string, _o: unknown, cb: (l: Lock | null) => unknown) => cb(null) } as unknown as LockManager });
    assert.equal((await failure(otherTab.client.upload(rec.key))).kind, "busy");
  });

  it("keeps an upload under its API however the base URL is spelled, and sends to that spelling", async () => {
    const w = world();
    const { client } = w.page({ apiBase: "HTTPS://API.test:443//" });
    assert.equal(client.apiBase, "https://api.test");
    const rec = await client.add(makeFile("a.bin", 10));
    assert.equal(rec.api, "https://api.test");
    assert.equal((await w.page({ apiBase: "https://api.test/" }).client.pending()).length, 1);
    await client.upload(rec.key);
    assert.deepEqual(
      w.server.requests.map((r) => r.path),
      ["/uploads", "/uploads/" + w.server.claims.get(rec.key)!.uploadId],
      "no doubled slash reaches the server",
    );
    assert.throws(() => w.page({ apiBase: "127.0.0.1:3000" }), TypeError);
  });

  it("resumes an upload that an earlier version kept under another spelling, folding the second record of the file into it", async () => {
    const w = world();
    const file = makeFile("slash.txt", 100, "text/plain");
    // The earlier version: its create answered, its PUT cut short.
    w.server.putFaults.push("hang");
    const first = w.page();
    const rec = await first.client.add(file);
    const ctrl = new AbortController();
    const cut = first.client.upload(rec.key, { signal: ctrl.signal }).catch((e: unknown) => e);
    await until(() => w.server.puts.length === 1, "the PUT started");
    ctrl.abort();
    await cut;
    const store = new IndexedDBStore({ indexedDB: w.factory });
    const stored = (await store.get(rec.key))!;
    assert.ok(stored.uploadId);
    // As it wrote them: the base URL as typed, and the same file picked
    // again under another spelling (its record was not listed there).
    await store.put({ ...stored, api: "https://api.test/" });
    await store.put({
      key: "legacy-bare-key-0000000000",
      api: "HTTPS://api.test//",
      filename: "slash.txt",
      contentType: "text/plain",
      size: 100,
      lastModified: file.lastModified,
      sha256: stored.sha256,
      phase: "ready",
      createdAt: stored.createdAt + 1,
      updatedAt: stored.createdAt + 1,
    });

    const reloaded = w.page();
    const listed = await reloaded.client.pending();
    assert.deepEqual(
      listed.map((r) => [r.key, r.api, r.uploadId]),
      [[rec.key, API, stored.uploadId]],
      "one record, the one with an upload id",
    );
    assert.deepEqual(
      (await store.list()).map((r) => [r.key, r.api]),
      [[rec.key, API]],
      "respelled in IndexedDB, the other record folded",
    );
    const done = await reloaded.client.upload(rec.key, { file });
    assert.equal(done.uploadId, stored.uploadId);
    assert.deepEqual(keysOf(w.server), [rec.key, rec.key], "the resume replayed the same key");
    assert.equal(w.server.objects.size, 1);
  });

  it("keeps uploads of another API apart", async () => {
    const w = world();
    await w.page().client.add(makeFile("a.bin", 10));
    assert.equal((await w.page({ apiBase: "https://other.test" }).client.pending()).length, 0);
    assert.equal((await w.page().client.pending()).length, 1);
  });
});

describe("UploadClient: answers that break the contract", () => {
  it("refuses an answer for another file", async () => {
    const w = world();
    const { client } = w.page({
      fetch: async () =>
        json(201, {
          uploadId: "u",
          status: "pending",
          storageKey: "uploads/u",
          filename: "x",
          contentType: "x/y",
          bytes: 999,
          sha256: "0".repeat(64),
          upload: { method: "PUT", url: "https://s3/u", headers: {}, expiresAt: "2099-01-01T00:00:00Z" },
        }),
    });
    const err = await failure(client.start(makeFile("a.bin", 10)));
    assert.equal(err.kind, "protocol");
  });
});

describe("UploadClient: a token that expires while the upload runs", () => {
  it("asks for a fresh token on a 401 and repeats that request once, at once; the upload completes", async () => {
    const w = world();
    // The API takes only the token of the moment; it expires while part 2 is sent.
    let valid = 1;
    const asked: unknown[] = [];
    const sent: string[] = [];
    const fetch: typeof globalThis.fetch = async (input, init) => {
      const auth = new Headers(init?.headers).get("Authorization") ?? "";
      sent.push(auth);
      if (auth !== `Bearer t${valid}`) return json(401, { message: "Unauthorized" });
      return w.server.fetch(input, init);
    };
    w.server.onPartPut = (n) => {
      if (n === 2) valid = 2;
    };
    let cached = "Bearer t1";
    const { client, events, onEvent } = w.page({
      fetch,
      multipartBytes: 2_500,
      partBytes: 1_000,
      partConcurrency: 1,
      authorization: (req) => {
        asked.push(req?.fresh);
        if (req?.fresh) cached = `Bearer t${valid}`;
        return cached;
      },
    });
    const done = await client.start(makeFile("big.bin", 5_000), { onEvent });
    assert.equal(done.status, "completed");
    assert.deepEqual(asked.filter((a) => a === true), [true], "one fresh token");
    assert.equal(sent.filter((a) => a === "Bearer t1").length >= 2, true);
    assert.equal(sent.at(-1), "Bearer t2");
    assert.deepEqual(w.clock.sleeps, [], "no wait");
    assert.equal(events.filter((e) => e.type === "retry").length, 0);
  });

  it("fails for good on a second 401, saying so; a resume with a valid token completes with the same key", async () => {
    const w = world();
    let accepted = "Bearer good";
    const fetch: typeof globalThis.fetch = async (input, init) =>
      new Headers(init?.headers).get("Authorization") === accepted ? w.server.fetch(input, init) : json(401, { error: "unauthenticated", message: "The token has expired." });
    let k = 0;
    const { client } = w.page({
      fetch,
      authorization: (req) => {
        if (req?.fresh) k++;
        return `Bearer t${k}`;
      },
    });
    const rec = await client.add(makeFile("a.bin", 10));
    const err = await failure(client.upload(rec.key));
    assert.deepEqual([err.kind, err.status, err.code, err.retryable, err.attempts], ["api", 401, "unauthenticated", false, 2]);
    assert.equal(w.server.creates.length, 0);
    // The user signs in again: the token of the moment passes.
    accepted = "Bearer t1";
    await client.upload(rec.key);
    assert.equal(w.server.objects.size, 1);
    assert.deepEqual(new Set(keysOf(w.server)), new Set([rec.key]));
  });
});

describe("UploadClient: the base URL", () => {
  it("says when it is not a onceupload API, with the URL, the status and the first bytes, never retried", async () => {
    const w = world();
    let calls = 0;
    const fetch: typeof globalThis.fetch = async () => {
      calls++;
      return new Response("<!doctype html><title>Welcome to nginx!</title>", { status: 404, statusText: "Not Found", headers: { "Content-Type": "text/html" } });
    };
    const { client, events, onEvent } = w.page({ fetch });
    const rec = await client.add(makeFile("a.bin", 10));
    const err = await failure(client.upload(rec.key, { onEvent }));
    assert.equal(calls, 1);
    assert.equal(events.filter((e) => e.type === "retry").length, 0);
    assert.deepEqual([err.kind, err.status, err.retryable, err.url], ["foreign", 404, false, "https://api.test/uploads"]);
    assert.ok(err.answer?.includes("Welcome to nginx!"), err.answer);
    const stored = (await client.get(rec.key))?.error;
    assert.deepEqual([stored?.kind, stored?.url, stored?.answer], ["foreign", err.url, err.answer], "the record keeps what answered");
  });

  it("retries no answer as before, and names the URL that fails in the retry events and in the final error", async () => {
    const w = world();
    for (let i = 0; i < 100; i++) w.server.createFaults.push("network");
    const { client, events, onEvent } = w.page({ createPolicy: { baseDelayMs: 1000, maxDelayMs: 4000, retryBudgetMs: 10_000 } });
    const err = await failure(client.start(makeFile("a.bin", 10), { onEvent }));
    const r = retries(events, "create");
    assert.ok(r.length >= 2, "retried");
    for (const e of r) {
      assert.ok(e.type === "retry");
      assert.equal(e.error.url, "https://api.test/uploads");
      assert.ok(e.error.message.startsWith("no answer from https://api.test/uploads: Failed to fetch"), e.error.message);
    }
    assert.deepEqual([err.kind, err.retryable, err.url, err.attempts], ["deadline", true, "https://api.test/uploads", w.server.creates.length]);
    assert.ok(err.message.includes("no answer from https://api.test/uploads: Failed to fetch"), err.message);
    assert.ok(describeError(err).includes("https://api.test/uploads"), describeError(err));
  });
});

describe("UploadClient: a storage that never answers this page (CORS, with evidence)", () => {
  const CORS_TEXT = "probably refused by the storage's CORS rules for this origin";
  const HINT = "no answer from the storage; if this persists, check its CORS rules for this origin";

  it("ends the run at the third PUT with no answer when the storage answers a no-cors probe, and says why; Resume completes once it answers", async () => {
    const w = world();
    // The browser's view of a bucket whose CORS rules leave this origin out: every PUT fails at once, no status; a no-cors request gets an answer.
    w.storage.reachable = true;
    w.server.putFaults.push("network", "network", "network", "network");
    const { client, events, onEvent } = w.page();
    const rec = await client.add(makeFile("a.bin", 1000), { onEvent });
    const err = await failure(client.upload(rec.key, { onEvent }));
    assert.deepEqual([err.kind, err.code, err.retryable, err.attempts], ["network", PROBABLY_CORS, true, 3]);
    assert.equal(w.server.puts.length, 3, "three tries, then no more");
    assert.equal(w.storage.probes, 2, "probed after the second and the third: reachable before and after the third try");
    assert.equal(retries(events, "put").length, 2);
    assert.ok(describeError(err).includes(CORS_TEXT), describeError(err));
    assert.ok(!describeError(err).includes("HTTP"), describeError(err));
    assert.equal((await client.get(rec.key))?.error?.code, PROBABLY_CORS, "kept for the row after a reload");

    w.server.putFaults.length = 0;
    const done = await client.upload(rec.key);
    assert.equal(done.status, "completed");
    assert.deepEqual(new Set(keysOf(w.server)), new Set([rec.key]));
  });

  it("keeps retrying no answer when the probe fails too (a network that is down), with the CORS hint on the retries from the third", async () => {
    const w = world();
    w.storage.reachable = false;
    const faults = Array.from({ length: 8 }, () => "network" as const);
    w.server.putFaults.push(...faults);
    const { client, events, onEvent } = w.page();
    const done = await client.start(makeFile("a.bin", 1000), { onEvent });
    assert.equal(done.status, "completed");
    assert.equal(w.server.puts.length, faults.length + 1, "every failure retried, none taken for a verdict");
    assert.equal(w.storage.probes, faults.length - 1, "probed from the second failure on");
    const r = retries(events, "put");
    assert.equal(r.length, faults.length);
    const hinted = r.map((e) => e.type === "retry" && e.error.code === STORAGE_UNANSWERED);
    assert.deepEqual(hinted, faults.map((_, i) => i >= 2), "the hint from the third failure on");
    for (const e of r.slice(2)) assert.ok(e.type === "retry" && e.error.message.startsWith(HINT), e.type === "retry" ? e.error.message : "");
    assert.equal(new Set(keysOf(w.server)).size, 1, "one key");
    assert.equal(w.server.objects.size, 1);
  });

  it("retries, for the whole budget, no answer that is never shown to be CORS, and then says it gave up with the hint", async () => {
    const w = world();
    for (let i = 0; i < 200; i++) w.server.putFaults.push("network");
    const { client } = w.page({ putPolicy: { baseDelayMs: 1000, maxDelayMs: 4000, retryBudgetMs: 20_000 } });
    const err = await failure(client.start(makeFile("a.bin", 1000)));
    assert.equal(err.kind, "deadline");
    assert.equal(err.code, STORAGE_UNANSWERED);
    assert.ok(err.attempts > 3, `${err.attempts} attempts`);
    assert.ok(describeError(err).includes(HINT), describeError(err));
  });

  // The bug of issue 40: the network drops right after the create's answer
  // (every connection reset, new ones refused), while navigator.onLine
  // stays true. The old heuristic ended the run at the third try; here the
  // network comes back while the third try's probe is made, which proves
  // only that the storage is reachable now, not that it refused a request
  // while reachable: no verdict, and the fourth try stores the file.
  it("does not end the run when the storage becomes reachable only after the tries failed (an outage right after the create)", async () => {
    const w = world();
    w.server.putFaults.push("network", "network", "network");
    let probes = 0;
    const { client, events, onEvent } = w.page({
      probeStorage: async () => {
        // Down at the second failure, back by the third.
        if (++probes < 2) throw new TypeError("Failed to fetch");
      },
    });
    const done = await client.start(makeFile("a.bin", 1000), { onEvent });
    assert.equal(done.status, "completed");
    assert.equal(probes, 2);
    assert.equal(w.server.puts.length, 4);
    assert.equal(events.filter((e) => e.type === "failed").length, 0);
  });

  for (const c of [
    { name: "once bytes of the PUT were sent (a network drop mid-upload)", faults: ["drop", "network", "network", "network", "network"] as const },
    { name: "once the storage answered (a 503), even with no byte sent", faults: [{ status: 503, body: "<Error><Code>SlowDown</Code></Error>" }, "network", "network", "network", "network"] as const },
  ]) {
    it(`retries no answer, without probing, ${c.name}, even with the storage reachable`, async () => {
      const w = world();
      w.storage.reachable = true;
      w.server.putFaults.push(...c.faults);
      const done = await w.page().client.start(makeFile("a.bin", 1000));
      assert.equal(done.status, "completed");
      assert.equal(w.server.puts.length, c.faults.length + 1);
      assert.equal(w.storage.probes, 0);
    });
  }

  it("does not count tries while the device is offline", async () => {
    const w = world();
    w.storage.reachable = true;
    w.server.putFaults.push("network", "network", "network", "network");
    const transport: PutTransport = async (req) => {
      // Each failure happens as the device goes offline; it is back at once.
      w.network.set(false);
      try {
        return await w.server.transport(req);
      } finally {
        queueMicrotask(() => w.network.set(true));
      }
    };
    const done = await w.page({ transport }).client.start(makeFile("a.bin", 1000));
    assert.equal(done.status, "completed");
    assert.equal(w.server.puts.length, 5);
  });

  it("ends a multipart run when a part's three tries all fail so, with no part ever answered and the storage reachable", async () => {
    const w = world();
    w.storage.reachable = true;
    for (let n = 1; n <= 3; n++) w.server.partFaults.set(n, ["network", "network", "network", "network"]);
    const { client } = w.page({ multipartBytes: 1000, partBytes: 1000, partConcurrency: 3 });
    const rec = await client.add(makeFile("big.bin", 3000));
    const err = await failure(client.upload(rec.key));
    assert.deepEqual([err.kind, err.code, err.retryable, err.attempts], ["network", PROBABLY_CORS, true, 3]);
    assert.ok(w.server.puts.length <= 9, `${w.server.puts.length} part PUTs: at most three per part`);
    assert.ok(describeError(err).includes(CORS_TEXT));
  });

  it("keeps retrying a multipart run's parts with no answer while the probe fails, and completes", async () => {
    const w = world();
    for (let n = 1; n <= 3; n++) w.server.partFaults.set(n, ["network", "network", "network", "network", "network"]);
    const { client } = w.page({ multipartBytes: 1000, partBytes: 1000, partConcurrency: 3 });
    const done = await client.start(makeFile("big.bin", 3000));
    assert.equal(done.status, "completed");
    assert.equal(w.server.puts.length, 18, "six tries of each part");
    assert.equal(w.server.objects.size, 1);
  });
});
