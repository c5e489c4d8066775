// The demo's build, as an application's would be: esbuild bundles demo.ts,
// which imports @onceupload/web like any application, and the page's
// assets are copied beside it: index.html, and the package's hashing
// worker, which no bundler copies for it (demo.ts gives its URL to the
// client as hashWorkerUrl).
//
//   node demo/build.mjs [--app DIR] [--out DIR]
//
// --app: the application's folder (demo.ts, index.html), where
// @onceupload/web is resolved: by default this folder, inside the package,
// where the name is the package itself as npm run build leaves it
// (dist/lib); the package test gives a scratch application with the packed
// package installed. --out: where the page goes (default ../dist, which
// make dev and the browser tests serve):
//   index.html, demo.js            the page
//   assets/hash-worker.js          @onceupload/web/hash-worker.js
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { app: { type: "string" }, out: { type: "string" } } });
const app = resolve(values.app ?? here);
const out = resolve(values.out ?? join(here, "..", "dist"));

mkdirSync(join(out, "assets"), { recursive: true });
await esbuild.build({
  entryPoints: [join(app, "demo.ts")],
  outfile: join(out, "demo.js"),
  bundle: true,
  format: "esm",
  // Browsers with crypto.randomUUID, IndexedDB blobs and Web Locks (optional).
  target: ["chrome100", "firefox100", "safari15.4"],
  minify: true,
  sourcemap: "linked",
  legalComments: "linked",
  logLevel: "warning",
  absWorkingDir: app,
});
const worker = createRequire(join(app, "package.json")).resolve("@onceupload/web/hash-worker.js");
copyFileSync(worker, join(out, "assets", "hash-worker.js"));
copyFileSync(join(app, "index.html"), join(out, "index.html"));
console.log("built the demo", out, "from", dirname(worker));
