// The modules of src/ import each other without a circle: one that
// reappears is a sign that something (as the error codes once did) lives
// in the wrong module. Type-only imports count too: they tie the modules'
// meanings together as much as values do.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

/** The relative imports and re-exports of a module's source ("./x.js" as "x.ts"). */
export function importsOf(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"\.\/([^"]+)\.js"/gms)) out.push(`${m[1]}.ts`);
  for (const m of source.matchAll(/^\s*import\s+"\.\/([^"]+)\.js"/gm)) out.push(`${m[1]}.ts`);
  return [...new Set(out)];
}

/** A circle of imports in the graph, as the modules on it (the first one repeated last), or undefined. */
export function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (m: string): string[] | undefined => {
    if (state.get(m) === "done") return undefined;
    if (state.get(m) === "open") return [...path.slice(path.indexOf(m)), m];
    state.set(m, "open");
    path.push(m);
    for (const next of graph.get(m) ?? []) {
      const c = visit(next);
      if (c) return c;
    }
    path.pop();
    state.set(m, "done");
    return undefined;
  };
  for (const m of [...graph.keys()].sort()) {
    const c = visit(m);
    if (c) return c;
  }
  return undefined;
}

describe("imports", () => {
  it("reads import, import type and export … from", () => {
    const src = [
      'import { a, type B } from "./one.js";',
      'import type {\n  C,\n  D,\n} from "./two.js";',
      'export { e } from "./three.js";',
      'export type { F } from "./one.js";',
      'import { g } from "hash-wasm";',
      'const s = "from \\"./four.js\\"";',
    ].join("\n");
    assert.deepEqual(importsOf(src), ["one.ts", "two.ts", "three.ts"]);
  });

  it("finds a circle, and none in a tree", () => {
    const g = new Map([
      ["a.ts", ["b.ts", "c.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["d.ts"]],
      ["d.ts", ["b.ts"]],
    ]);
    assert.deepEqual(findCycle(g), ["b.ts", "c.ts", "d.ts", "b.ts"]);
    g.set("d.ts", []);
    assert.equal(findCycle(g), undefined);
  });

  it("src/ has no circle", () => {
    const dir = fileURLToPath(new URL("../src/", import.meta.url));
    const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
    const graph = new Map(files.map((f) => [f, importsOf(readFileSync(dir + f, "utf8"))]));
    for (const [f, deps] of graph) for (const d of deps) assert.ok(files.includes(d), `${f} imports ./${d}, which is not in src/`);
    assert.ok(graph.get("client.ts")?.includes("errors.ts"), "the graph was read (client.ts imports errors.ts)");
    const cycle = findCycle(graph);
    assert.equal(cycle, undefined, `src/ imports in a circle: ${cycle?.join(" → ")}`);
  });
});
