// npm ci and npm install in web/ (package.json's "prepare", which npm runs
// there and not where the package is installed as a dependency): writes
// node_modules/go.mod, so that the go tool, walking the repository, skips
// node_modules (a dependency ships Go source). It was a postinstall, which
// npm also runs in an application's node_modules/@onceupload/web, where
// there is no node_modules/ to write into: the install failed.
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const modules = join(dirname(fileURLToPath(import.meta.url)), "..", "node_modules");
if (existsSync(modules)) writeFileSync(join(modules, "go.mod"), "// Keeps the go tool out of node_modules (a dependency ships Go source).\nmodule ignored\n");
