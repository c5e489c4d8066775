import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { normalizeBaseUrl } from "../src/baseurl.js";

/** The table the Go client's test reads too. */
interface SharedCases {
  cases: { in: string; want?: string; refused?: boolean }[];
}
const shared = JSON.parse(readFileSync(new URL("../../pkg/api/testdata/base-urls.json", import.meta.url), "utf8")) as SharedCases;

describe("normalizeBaseUrl (pkg/api/testdata/base-urls.json)", () => {
  it("has cases of both kinds", () => {
    assert.ok(shared.cases.some((c) => c.refused) && shared.cases.some((c) => c.want !== undefined));
  });
  for (const c of shared.cases) {
    if (c.refused) {
      it(`refuses ${JSON.stringify(c.in)}`, () => {
        assert.throws(() => normalizeBaseUrl(c.in), (e: unknown) => e instanceof TypeError && e.message.includes(JSON.stringify(c.in)) && /absolute http\(s\) URL/.test(e.message));
      });
    } else {
      it(`spells ${JSON.stringify(c.in)} as ${c.want}`, () => {
        assert.equal(normalizeBaseUrl(c.in), c.want);
        assert.equal(normalizeBaseUrl(c.want!), c.want, "the normal form is its own");
      });
    }
  }
});
