// npm run build: type-checks src/ and writes dist/
//   dist/index.html, dist/demo.js   the demo page (served by `make dev` at /)
//   dist/hash-worker.js             the hashing worker, next to demo.js
//   dist/lib/onceupload.js          the client as one ES module, for web apps
//   dist/lib/hash-worker.js         its hashing worker (loaded from beside onceupload.js)
//   dist/lib/*.d.ts                 its type declarations
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const require = createRequire(import.meta.url);

rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, "lib"), { recursive: true });

// Type check, and the declarations of the library.
const tsc = require.resolve("typescript/bin/tsc");
execFileSync(
  process.execPath,
  [tsc, "-p", join(root, "tsconfig.json"), "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--outDir", join(dist, "lib")],
  { stdio: "inherit" },
);
rmSync(join(dist, "lib", "demo.d.ts"), { force: true });
rmSync(join(dist, "lib", "hash-worker.d.ts"), { force: true });

const common = {
  bundle: true,
  format: /** @type {const} */ ("esm"),
  // Browsers with crypto.randomUUID, IndexedDB blobs and Web Locks (optional).
  target: ["chrome100", "firefox100", "safari15.4"],
  sourcemap: /** @type {const} */ ("linked"),
  legalComments: /** @type {const} */ ("linked"),
  logLevel: /** @type {const} */ ("warning"),
};
await esbuild.build({ ...common, entryPoints: [join(root, "src", "demo.ts")], outfile: join(dist, "demo.js"), minify: true });
await esbuild.build({ ...common, entryPoints: [join(root, "src", "index.ts")], outfile: join(dist, "lib", "onceupload.js") });
// A classic worker script (an IIFE), which every browser above can start.
for (const dir of [dist, join(dist, "lib")]) {
  await esbuild.build({ ...common, format: "iife", entryPoints: [join(root, "src", "hash-worker.ts")], outfile: join(dir, "hash-worker.js"), minify: true });
}
copyFileSync(join(root, "index.html"), join(dist, "index.html"));
console.log("built", dist);
