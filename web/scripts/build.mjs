// npm run build (and npm pack's prepack): type-checks src/ and writes dist/
//   dist/lib/onceupload.js          the package's entry, one ES module (hash-wasm left to the application's bundler)
//   dist/lib/hash-worker.js         its hashing worker, a classic script with hash-wasm in it
//   dist/lib/*.d.ts                 its type declarations
//   dist/index.html, dist/demo.js, dist/assets/hash-worker.js
//                                   the demo page, built from the package as an application (demo/build.mjs)
// npm pack ships dist/lib only (package.json's "files").
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const lib = join(dist, "lib");
const require = createRequire(import.meta.url);

rmSync(dist, { recursive: true, force: true });
mkdirSync(lib, { recursive: true });

// Type check, and the declarations of the library.
const tsc = require.resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json"), "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--outDir", lib], { stdio: "inherit" });
rmSync(join(lib, "hash-worker.d.ts"), { force: true });

const common = {
  bundle: true,
  // Browsers with crypto.randomUUID, IndexedDB blobs and Web Locks (optional).
  target: ["chrome100", "firefox100", "safari15.4"],
  sourcemap: /** @type {const} */ ("linked"),
  legalComments: /** @type {const} */ ("linked"),
  logLevel: /** @type {const} */ ("warning"),
};
// Not minified: an application's bundler minifies it with the rest, and reads it in a stack trace.
await esbuild.build({ ...common, format: "esm", entryPoints: [join(root, "src", "index.ts")], outfile: join(lib, "onceupload.js"), external: ["hash-wasm"] });
// A classic worker script (an IIFE), which every browser above can start, and no bundler needs to touch.
await esbuild.build({ ...common, format: "iife", entryPoints: [join(root, "src", "hash-worker.ts")], outfile: join(lib, "hash-worker.js"), minify: true });
console.log("built", lib);

execFileSync(process.execPath, [join(root, "demo", "build.mjs")], { stdio: "inherit" });
