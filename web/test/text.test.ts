import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { printable } from "../src/text.js";
import { failure, world } from "./world.js";
import { makeFile } from "./fakes.js";

describe("printable: a file name as the page prints it", () => {
  for (const [name, want] of [
    ["invoice\u202Efdp.exe", "invoice\\u202Efdp.exe"], // reads as "invoiceexe.pdf" unescaped
    ["\u2067photo\u2069.jpg", "\\u2067photo\\u2069.jpg"], // isolates
    ["a\u200Eb\u200Fc\u061Cd", "a\\u200Eb\\u200Fc\\u061Cd"], // marks
    ["zero\u200Bwidth\uFEFF.txt", "zero\\u200Bwidth\\uFEFF.txt"],
    ["soft\u00ADhyphen", "soft\\u00ADhyphen"],
    ["tab\there\nand\u0000nul\u007F", "tab\\u0009here\\u000Aand\\u0000nul\\u007F"],
    ["line\u2028para\u2029", "line\\u2028para\\u2029"],
    ["tag\u{E0041}", "tag\\u{E0041}"],
    ["lone\uD800", "lone\\uD800"],
    // Kept: ordinary names, scripts written right to left, and the joiners of emoji and Indic or Persian text.
    ["report 2026 (final).pdf", "report 2026 (final).pdf"],
    ["\u05E9\u05DC\u05D5\u05DD.txt", "\u05E9\u05DC\u05D5\u05DD.txt"],
    ["family \u{1F468}\u200D\u{1F469}\u200D\u{1F467}.png", "family \u{1F468}\u200D\u{1F469}\u200D\u{1F467}.png"],
    ["\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645.txt", "\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645.txt"],
    ["caf\u00E9 na\u00EFve.txt", "caf\u00E9 na\u00EFve.txt"],
  ]) {
    it(`shows ${want}`, () => {
      assert.equal(printable(name), want);
    });
  }

  it("is what the client's messages print of a file name", async () => {
    const err = await failure(world().page().client.add(new File([], "invoice\u202Efdp.exe")));
    assert.equal(err.message, '"invoice\\u202Efdp.exe" is empty; there is nothing to upload.');
    const w = world();
    const { client } = w.page();
    const rec = await client.add(makeFile("invoice\u202Efdp.exe", 10));
    const other = await failure(client.upload(rec.key, { file: makeFile("x", 11) }));
    assert.ok(other.message.includes('"invoice\\u202Efdp.exe"'), other.message);
  });
});
