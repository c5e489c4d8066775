import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { IDBFactory } from "fake-indexeddb";
import { IndexedDBStore, MemoryStore, type UploadRecord, type UploadStore } from "../src/store.js";

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
