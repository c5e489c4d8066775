import assert from "node:assert/strict";
import { createHash, randomBytes, webcrypto } from "node:crypto";
import { describe, it } from "node:test";
import { hashFile } from "../src/hash.js";

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
