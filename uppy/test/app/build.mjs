// The application's build: esbuild bundles app.ts (and the CSS it imports)
// into dist/, from the packages installed here, and copies the client's
// hashing worker among the assets (the client is told its URL).
//   node build.mjs
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const app = dirname(fileURLToPath(import.meta.url));
const dist = join(app, "dist");
mkdirSync(join(dist, "assets"), { recursive: true });
await esbuild.build({
  entryPoints: [join(app, "app.ts")],
  outdir: dist,
  bundle: true,
  format: "esm",
  target: ["chrome100", "firefox100", "safari15.4"],
  logLevel: "warning",
});
copyFileSync(join(app, "index.html"), join(dist, "index.html"));
copyFileSync(createRequire(import.meta.url).resolve("@onceupload/web/hash-worker.js"), join(dist, "assets", "hash-worker.js"));
console.log("built", dist);
