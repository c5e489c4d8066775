// npm run build (and npm pack's prepack): type-checks src/ and writes dist/lib
//   dist/lib/index.js    the plugin, one ES module; @uppy/core (a peer) and
//                        @onceupload/web (a dependency) are left to the
//                        application's bundler, so the page has one of each
//   dist/lib/*.d.ts      its type declarations
// npm pack ships dist/lib only (package.json's "files"). The client's
// declarations come from ../web/dist/lib (the lockfile links ../web), so
// web/ is built first (make uppy does it).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const lib = join(root, "dist", "lib");
const require = createRequire(import.meta.url);

if (!existsSync(join(root, "node_modules", "@onceupload", "web", "dist", "lib", "index.d.ts"))) {
  throw new Error("@onceupload/web is not built: run `make web-build` (or cd ../web && npm run build) first");
}
rmSync(join(root, "dist"), { recursive: true, force: true });
mkdirSync(lib, { recursive: true });

const tsc = require.resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json"), "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--outDir", lib], { stdio: "inherit" });

// Not minified: the application's bundler minifies it with the rest.
await esbuild.build({
  entryPoints: [join(root, "src", "index.ts")],
  outfile: join(lib, "index.js"),
  bundle: true,
  format: "esm",
  target: ["chrome100", "firefox100", "safari15.4"],
  external: ["@uppy/core", "@onceupload/web"],
  sourcemap: "linked",
  logLevel: "warning",
});
console.log("built", lib);
