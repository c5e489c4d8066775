// The part pipeline with a hasher whose workers hold and send the parts
// they read (hash-worker.js of protocol 2), and with an older worker that
// only hashes: what is read, who sends, how many parts are held at once,
// and that the next parts are read and signed while the PUTs go on.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Api } from "../src/api.js";
import type { HeldPart, PartHolder } from "../src/hash.js";
import { sendParts } from "../src/parts.js";
import { DEFAULT_POLICY } from "../src/retry.js";
import type { PutTransport } from "../src/transport.js";
import { makeFile, sha256hex } from "./fakes.js";
import { API, until, world } from "./world.js";

const PART = 1_000;

/**
 * A pool stand-in: each hold reads the part once; `sends` false is a worker
 * of protocol 1 (the hash alone). A held part's bytes go with its first PUT
 * (XHR's copy), as the worker's do.
 */
function holder(send: PutTransport, sends = true) {
  const stats = { reads: 0, holding: 0, maxHolding: 0, workerPuts: 0, hashed: [] as string[] };
  const h: PartHolder = {
    async hash(part) {
      stats.reads++;
      return sha256hex(new Uint8Array(await part.arrayBuffer()));
    },
    async hold(part) {
      const bytes = new Uint8Array(await part.arrayBuffer());
      stats.reads++;
      const sha256 = sha256hex(bytes);
      stats.hashed.push(sha256);
      if (!sends) return { sha256 };
      stats.holding++;
      stats.maxHolding = Math.max(stats.maxHolding, stats.holding);
      let released = false;
      const held: HeldPart = {
        put: (req) => {
          stats.workerPuts++;
          if (released) throw new Error("a held part was sent twice by its worker");
          stats.holding--;
          released = true;
          // The bytes the worker read, not the page's slice.
          return send({ ...req, body: new Blob([bytes]) });
        },
        release: () => {
          if (!released) stats.holding--;
          released = true;
        },
      };
      return { sha256, held };
    },
    close() {},
  };
  return { h, stats };
}

async function setup(size: number) {
  const w = world();
  const api = new Api({ baseUrl: API, fetch: w.server.fetch, now: () => w.clock.now() });
  const created = await api.create("key-parts-0000000000", { filename: "a.bin", contentType: "application/octet-stream", size, partSize: PART });
  const file = makeFile("a.bin", size);
  let pagePuts = 0;
  const pageTransport: PutTransport = (req) => {
    pagePuts++;
    return w.server.transport(req);
  };
  const signed = () => w.server.requestsTo("POST", "/parts").map((r) => (JSON.parse(r.body ?? "") as { parts: { partNumber: number }[] }).parts.map((p) => p.partNumber));
  const run = (hasher: PartHolder, concurrency: number, hashes = new Map<number, string>()) =>
    sendParts({
      api,
      transport: pageTransport,
      uploadId: created.body.uploadId,
      blob: file,
      filename: "a.bin",
      partSize: PART,
      hashes,
      hasher,
      held: [],
      concurrency,
      stallTimeoutMs: Infinity,
      retryOptions: () => ({ policy: DEFAULT_POLICY, clock: w.clock, network: w.network, random: () => 0.5 }),
      now: () => w.clock.now(),
      onProgress: () => undefined,
      onParts: () => undefined,
      onRefresh: () => undefined,
    });
  const stored = () => [...w.server.multiparts.values()][0].parts;
  return { w, file, run, signed, stored, pagePuts: () => pagePuts };
}

describe("sendParts: parts sent by the worker that read them", () => {
  it("reads each part once, the worker sends it (none from the page), at most `concurrency` parts held and not yet sent", async () => {
    const s = await setup(20 * PART);
    s.w.server.onPartPut = () => new Promise((r) => setTimeout(r, 2));
    const { h, stats } = holder(s.w.server.transport);
    await s.run(h, 3);
    assert.equal(stats.reads, 20, "each part read once");
    assert.equal(stats.workerPuts, 20);
    assert.equal(s.pagePuts(), 0, "no part sent from the page");
    assert.ok(stats.maxHolding <= 3, `${stats.maxHolding} parts held at once`);
    assert.equal(stats.maxHolding, 3);
    assert.equal(stats.holding, 0, "every part released");
    assert.equal(s.stored().size, 20);
  });

  it("with an older worker (the hash alone), the page sends every part, as before", async () => {
    const s = await setup(6 * PART);
    const { h, stats } = holder(s.w.server.transport, false);
    await s.run(h, 2);
    assert.equal(stats.workerPuts, 0);
    assert.equal(s.pagePuts(), 6);
    assert.equal(s.stored().size, 6);
    const bytes = new Uint8Array(await s.file.arrayBuffer());
    for (const [n, p] of s.stored()) assert.equal(p.sha256, sha256hex(bytes.subarray((n - 1) * PART, n * PART)));
  });

  it("reads and signs the next parts while every PUT is under way: reading ahead is bounded by the parts held, not by the PUTs", async () => {
    const s = await setup(6 * PART);
    const gates = new Map<number, () => void>();
    s.w.server.onPartPut = (n) => new Promise<void>((r) => gates.set(n, r));
    const { h, stats } = holder(s.w.server.transport);
    const run = s.run(h, 2);
    await until(() => gates.has(1) && gates.has(2), "parts 1 and 2 are being sent");
    // Neither PUT has ended: parts 3 and 4 are read, held and signed all the same; part 5 waits for a slot.
    await until(() => s.signed().flat().includes(3) && s.signed().flat().includes(4), "parts 3 and 4 are signed while 1 and 2 are sent");
    assert.equal(stats.holding, 2, "parts 3 and 4 held");
    assert.equal(stats.reads, 4, "part 5 is not read before a slot frees");
    assert.equal(s.stored().size, 0, "no PUT has ended");
    gates.get(1)!();
    // Part 3's PUT starts as part 1's ends; its slot goes to part 5.
    await until(() => stats.reads === 5, "part 5 is read as part 3's bytes leave for its PUT");
    for (let n = 2; n <= 6; n++) {
      await until(() => gates.has(n), `part ${n} is being sent`);
      gates.get(n)!();
    }
    await run;
    assert.equal(s.stored().size, 6);
    assert.equal(stats.reads, 6, "each part read once");
  });

  it("sends a part's retry from the page (its slice): the worker's bytes went with the first PUT", async () => {
    const s = await setup(4 * PART);
    s.w.server.partFaults.set(2, [{ status: 500, body: "<Error><Code>InternalError</Code></Error>" }]);
    const { h, stats } = holder(s.w.server.transport);
    await s.run(h, 2);
    assert.equal(stats.reads, 4, "no part read twice by a worker");
    assert.equal(stats.workerPuts, 4);
    assert.equal(s.pagePuts(), 1, "part 2's second PUT, from the page");
    assert.equal(s.stored().size, 4);
    const bytes = new Uint8Array(await s.file.arrayBuffer());
    assert.equal(s.stored().get(2)?.sha256, sha256hex(bytes.subarray(PART, 2 * PART)));
  });

  it("releases every part held when a part fails for good", async () => {
    const s = await setup(10 * PART);
    s.w.server.partFaults.set(2, [{ status: 400, body: "<Error><Code>InvalidRequest</Code></Error>" }]);
    const { h, stats } = holder(s.w.server.transport);
    await assert.rejects(s.run(h, 2));
    assert.equal(stats.holding, 0);
  });

  it("reads a part hashed in an earlier round again, and refuses it if it changed", async () => {
    const s = await setup(3 * PART);
    const { h } = holder(s.w.server.transport);
    const hashes = new Map([[2, "0".repeat(64)]]);
    const err = (await s.run(h, 1, hashes).catch((e: unknown) => e)) as { code?: string };
    assert.equal(err.code, "file_mismatch");
  });
});
