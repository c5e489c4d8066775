// The package's public entry: what an application imports, and what every
// later release has to keep. Adding a name here is a decision (say why in
// the commit); internals are imported from their modules, as these tests do.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as entry from "../src/index.js";

const WANT = [
  "ACTIVE_PHASES",
  "IndexedDBStore",
  "MemoryStore",
  "PROBABLY_CORS",
  "STORAGE_UNANSWERED",
  "TOO_MANY_UPLOADS",
  "UploadClient",
  "UploadError",
  "describeError",
  "normalizeBaseUrl",
  "printable",
  "toUploadError",
];

describe("the package's entry", () => {
  it("exports exactly the names an application uses", () => {
    assert.deepEqual(Object.keys(entry).sort(), WANT);
  });

  it("stays small", () => {
    assert.ok(WANT.length <= 15, `${WANT.length} runtime names; the surface is meant to stay at 15 or fewer`);
  });
});
