// npm test: type-checks the sources and the tests, compiles test/*.test.ts
// (with the sources they import) into .test-build/, and runs them with
// node's own test runner against the real @uppy/core and a fake client
// (test/fakes.ts).
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, ".test-build");
const require = createRequire(import.meta.url);

execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", join(root, "tsconfig.test.json")], { stdio: "inherit" });

const tests = readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.ts")).sort();
if (tests.length === 0) throw new Error("no test/*.test.ts");
rmSync(out, { recursive: true, force: true });
await esbuild.build({
  entryPoints: tests.map((f) => join(root, "test", f)),
  outdir: out,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  // npm packages (@uppy/core, @onceupload/web: ../web/dist/lib) are loaded from node_modules as they are.
  packages: "external",
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "inline",
  logLevel: "warning",
});

const files = tests.map((f) => join(out, f.replace(/\.ts$/, ".mjs")));
const run = spawnSync(process.execPath, ["--enable-source-maps", "--test", "--test-reporter=spec", ...files], {
  stdio: "inherit",
  env: { ...process.env, NODE_NO_WARNINGS: "1" },
});
process.exit(run.status ?? 1);
