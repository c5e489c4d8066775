import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { IDBFactory } from "fake-indexeddb";
import { IndexedDBStore, MemoryStore, type UploadRecord, type UploadStore, foldRecords } from "../src/store.js";

function record(key: string, createdAt: number, extra: Partial<UploadRecord> = {}): UploadRecord {
  return {
    key,
    api: "http://127.0.0.1:3000",
    filename: `${key}.bin`,
    contentType: "application/octet-stream",
    size: 3,
    lastModified: 1,
    phase: "ready",
    createdAt,
    updatedAt: createdAt,
    ...extra,
  };
}

function contract(name: string, make: () => { store: UploadStore }) {
  describe(name, () => {
    it("puts, gets, lists oldest first, deletes", async () => {
      const { store } = make();
      assert.equal(await store.get("nope"), undefined);
      await store.put(record("b", 20));
      await store.put(record("a", 10));
      await store.put(record("c", 30, { phase: "uploading", uploadId: "u-c" }));
      assert.deepEqual(
        (await store.list()).map((r) => r.key),
        ["a", "b", "c"],
      );
      assert.equal((await store.get("c"))?.uploadId, "u-c");
      await store.put({ ...record("c", 30), phase: "completing", uploadId: "u-c" });
      assert.equal((await store.get("c"))?.phase, "completing");
      await store.delete("b");
      assert.deepEqual(
        (await store.list()).map((r) => r.key),
        ["a", "c"],
      );
    });

    it("returns copies, not the stored objects", async () => {
      const { store } = make();
      await store.put(record("a", 1));
      const got = (await store.get("a"))!;
      got.phase = "failed";
      assert.equal((await store.get("a"))?.phase, "ready");
    });
  });
}

contract("MemoryStore", () => {
  return { store: new MemoryStore() };
});

contract("IndexedDBStore (fake-indexeddb)", () => {
  return { store: new IndexedDBStore({ indexedDB: new IDBFactory() }) };
});

describe("IndexedDBStore across a reload", () => {
  it("keeps the key, the phase, the hash and the file for a new connection", async () => {
    const factory = new IDBFactory();
    const first = new IndexedDBStore({ indexedDB: factory });
    const file = new File([new Uint8Array([1, 2, 3])], "abc.bin", { type: "application/octet-stream", lastModified: 5 });
    await first.put(record("key-0001-0001-0001", 1, { phase: "uploading", sha256: "f".repeat(64), uploadId: "u1", file }));
    first.close();

    const second = new IndexedDBStore({ indexedDB: factory });
    const [got] = await second.list();
    assert.equal(got.key, "key-0001-0001-0001");
    assert.equal(got.phase, "uploading");
    assert.equal(got.sha256, "f".repeat(64));
    assert.equal(got.uploadId, "u1");
    assert.ok(got.file instanceof Blob);
    assert.deepEqual([...new Uint8Array(await got.file.arrayBuffer())], [1, 2, 3]);
  });

  it("keeps databases of different names apart", async () => {
    const factory = new IDBFactory();
    await new IndexedDBStore({ indexedDB: factory, name: "one" }).put(record("a", 1));
    assert.deepEqual(await new IndexedDBStore({ indexedDB: factory, name: "two" }).list(), []);
  });

  it("says so when there is no IndexedDB", async () => {
    const store = new IndexedDBStore({ indexedDB: undefined });
    const had = (globalThis as { indexedDB?: IDBFactory }).indexedDB;
    assert.equal(had, undefined, "this test expects node without a global indexedDB");
    await assert.rejects(store.list(), (e: unknown) => e instanceof Error && /IndexedDB is not available/.test(e.message));
  });
});

describe("foldRecords: one API, however an earlier version spelled it", () => {
  const API = "http://127.0.0.1:3000";
  // Records as earlier versions wrote them: the base URL as typed
  // (`?api=http://127.0.0.1:3000//` kept "http://127.0.0.1:3000/").
  const old = (key: string, api: string, extra: Partial<UploadRecord> = {}): UploadRecord => ({
    key,
    api,
    filename: "slash.txt",
    contentType: "text/plain",
    size: 6,
    lastModified: 1_700_000_000_000,
    sha256: "5".repeat(64),
    phase: "ready",
    createdAt: 100,
    updatedAt: 100,
    ...extra,
  });

  it("finds records under other spellings of the API, respelled, and leaves other APIs' alone", () => {
    const all = [
      old("k-plain", API, { filename: "a.txt" }),
      old("k-slash", "http://127.0.0.1:3000/", { filename: "b.txt" }),
      old("k-upper", "HTTP://127.0.0.1:3000//", { filename: "c.txt" }),
      old("k-localhost", "http://localhost:3000", { filename: "e.txt" }),
      old("k-other", "https://api.example.com", { filename: "f.txt" }),
      old("k-junk", "not a url", { filename: "g.txt" }),
    ];
    const got = foldRecords(all, API);
    assert.deepEqual(
      got.records.map((r) => [r.key, r.api]),
      [
        ["k-plain", API],
        ["k-slash", API],
        ["k-upper", API],
      ],
    );
    assert.deepEqual(
      got.put.map((r) => [r.key, r.api]),
      [
        ["k-slash", API],
        ["k-upper", API],
      ],
      "only the records not spelled so are written",
    );
    assert.deepEqual(got.drop, []);
    assert.deepEqual(
      foldRecords(all, "http://localhost:3000").records.map((r) => r.key),
      ["k-localhost"],
      "localhost is another API than 127.0.0.1",
    );
  });

  for (const c of [
    {
      name: "a completed record wins over one with an upload id and a bare key",
      records: [old("bare", API), old("with-id", "http://127.0.0.1:3000/", { phase: "uploading", uploadId: "u-1", sent: true }), old("done", "HTTP://127.0.0.1:3000//", { phase: "completed", uploadId: "u-2" })],
      winner: "done",
    },
    {
      name: "one with an upload id wins over a bare key, older or newer",
      records: [old("bare", API, { createdAt: 1 }), old("with-id", "http://127.0.0.1:3000/", { phase: "failed", uploadId: "u-1", sent: true, createdAt: 2 }), old("bare-2", "http://127.0.0.1:3000//", { createdAt: 3 })],
      winner: "with-id",
    },
    {
      name: "one whose create was sent (its answer lost) wins over one never sent",
      records: [old("never-sent", API, { createdAt: 1 }), old("sent", "http://127.0.0.1:3000/", { phase: "creating", sent: true, createdAt: 2 })],
      winner: "sent",
    },
    {
      name: "of equals, the most recently created (as the Go CLI decides)",
      records: [old("first", "http://127.0.0.1:3000/", { uploadId: "u-1", createdAt: 1 }), old("second", API, { uploadId: "u-2", createdAt: 2 })],
      winner: "second",
    },
  ]) {
    it(`folds several records of one file into one: ${c.name}`, () => {
      const got = foldRecords(c.records, API);
      assert.deepEqual(
        got.records.map((r) => [r.key, r.api]),
        [[c.winner, API]],
      );
      assert.deepEqual(got.drop.sort(), c.records.map((r) => r.key).filter((k) => k !== c.winner).sort());
      const winner = c.records.find((r) => r.key === c.winner)!;
      assert.deepEqual(got.put.map((r) => r.key), winner.api === API ? [] : [c.winner], "the winner is written (respelled) only if it has to be");
    });
  }

  it("takes over a folded record's kept file, and keeps the winner's upload", () => {
    const file = new Blob(["slash\n"]);
    const got = foldRecords([old("with-id", "http://127.0.0.1:3000/", { uploadId: "u-1", sent: true }), old("bare", API, { file })], API);
    assert.equal(got.records.length, 1);
    const [r] = got.records;
    assert.deepEqual([r.key, r.uploadId, r.api, r.file], ["with-id", "u-1", API, file]);
    assert.deepEqual(got.put, [r]);
    assert.deepEqual(got.drop, ["bare"]);
  });

  it("leaves alone one file picked twice under one spelling, other files, other contents, and what is running", () => {
    const twice = [old("a", API), old("b", API)];
    assert.deepEqual(foldRecords(twice, API).records.map((r) => r.key), ["a", "b"], "picked twice on purpose: two uploads");
    const twiceAndOld = [old("a", API, { createdAt: 1 }), old("b", API, { createdAt: 2 }), old("c", "http://127.0.0.1:3000/", { createdAt: 3 })];
    const kept = foldRecords(twiceAndOld, API);
    assert.deepEqual(
      [kept.records.map((r) => [r.key, r.api]), kept.drop],
      [[["a", API], ["b", API], ["c", API]], []],
      "picked twice on purpose, plus an old spelling: none is known to be a duplicate, so all stay (the old one respelled)",
    );
    const files = [old("a", API), old("b", "http://127.0.0.1:3000/", { size: 7 }), old("c", "http://127.0.0.1:3000/", { lastModified: 5 }), old("d", "http://127.0.0.1:3000/", { filename: "other.txt" })];
    assert.deepEqual(foldRecords(files, API).drop, [], "another size, time or name is another file");
    const contents = [old("a", API, { uploadId: "u-1" }), old("b", "http://127.0.0.1:3000/", { sha256: "6".repeat(64) })];
    const got = foldRecords(contents, API);
    assert.deepEqual([got.records.map((r) => r.key), got.drop], [["a", "b"], []], "another SHA-256 is another file");
    const busy = [old("a", API), old("b", "http://127.0.0.1:3000/", { uploadId: "u-1" })];
    const held = foldRecords(busy, API, (key) => key === "a");
    assert.deepEqual([held.records.map((r) => [r.key, r.api]), held.put, held.drop], [[["a", API], ["b", "http://127.0.0.1:3000/"]], [], []], "running: folded later");
  });
});
