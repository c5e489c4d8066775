// @ts-check
// Benchmark only (never shipped): the demo page (web/dist, served by the
// local stack) uploads one file from disk in Debian's headless Chromium,
// driven as web/test/e2e.mjs drives it (playwright-core from
// web/node_modules, the same flags, a fresh profile). It prints JSON lines
// on stdout, times in ms since the epoch:
//   {"event":"picked","epochMs":T}      the page's change event on the file input
//   {"event":"completed","epochMs":T}   the row shows completed (MODE=complete)
// With MODE=first-part it only picks the file and then waits for a line on
// stdin (or its end) before it closes the browser: the benchmark watches S3
// for the first stored part and says when to stop. In either mode it exits
// non-zero if the row shows failed.
//
//   APP_URL=http://127.0.0.1:PORT FILE_PATH=/tmp/x.bin MODE=complete node upload.mjs
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const require = createRequire(new URL("../../web/package.json", import.meta.url));
/** @type {typeof import("playwright-core")} */
const { chromium } = require("playwright-core");

const APP_URL = required("APP_URL");
const FILE_PATH = required("FILE_PATH");
const MODE = process.env.MODE ?? "complete";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
// web/test/e2e.mjs's flags.
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** @param {string} name */
function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

/** @param {object} o */
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const profile = mkdtempSync(join(tmpdir(), "onceupload-bench-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: FLAGS,
  viewport: { width: 900, height: 720 },
});
let code = 0;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  await context.addInitScript(() => {
    document.addEventListener(
      "change",
      () => {
        /** @type {any} */ (window).__pickedAt ??= performance.timeOrigin + performance.now();
      },
      { capture: true },
    );
  });
  await page.goto(new URL("/", APP_URL).toString());
  await page.locator("html[data-ready=true]").waitFor({ timeout: 30_000 });
  await page.getByLabel("Choose files to upload").setInputFiles(FILE_PATH);
  const picked = await page.evaluate(() => /** @type {any} */ (window).__pickedAt ?? 0);
  emit({ event: "picked", epochMs: picked });
  if (MODE === "first-part") {
    const lines = createInterface({ input: process.stdin });
    const stop = new Promise((resolve) => {
      lines.once("line", resolve);
      lines.once("close", resolve);
    });
    // A failed upload ends the driver (non-zero), as in complete mode, so
    // that the benchmark stops watching S3 for a part that never comes.
    const failed = page
      .waitForFunction(
        () => {
          const phase = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"))?.dataset.phase;
          return phase === "failed" && (document.querySelector("li.upload .status")?.textContent || "failed");
        },
        undefined,
        { timeout: 0, polling: 50 },
      )
      .then(async (status) => {
        throw new Error(String(await status.jsonValue()));
      });
    failed.catch(() => {}); // after a stop, closing the browser rejects it
    await Promise.race([stop, failed]);
    lines.close();
  } else {
    await page.waitForFunction(
      () => {
        const phase = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"))?.dataset.phase;
        if (phase === "failed") throw new Error(document.querySelector("li.upload .status")?.textContent ?? "failed");
        return phase === "completed";
      },
      undefined,
      { timeout: 1_800_000, polling: 50 },
    );
    emit({ event: "completed", epochMs: Date.now() });
  }
} catch (e) {
  console.error("bench browser upload failed:", e);
  code = 1;
} finally {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
