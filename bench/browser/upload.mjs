// @ts-check
// Benchmark only (never shipped): the demo page (web/dist, served by the
// local stack) uploads one file from disk in Debian's headless Chromium,
// driven as web/test/e2e.mjs drives it (playwright-core from
// web/node_modules, the same flags, a fresh profile). It prints JSON lines
// on stdout, times in ms since the epoch:
//   {"event":"picked","epochMs":T}      the page's change event on the file input
//   {"event":"completed","epochMs":T,"longestTaskMs":L,"longTasks":N}
//                                       the row shows completed (MODE=complete), with the
//                                       main thread's longest task since the pick and how
//                                       many took over 50 ms (PerformanceObserver "longtask")
//   {"event":"probing","epochMs":T}     MODE=probe: the file is picked, the PUTs start
//   {"event":"probed","startMs":T,"putsDoneMs":T,"epochMs":T,"longestTaskMs":L,"longTasks":N}
//                                       MODE=probe: the raw probe's first PUT sent, its last
//                                       PUT answered, its complete answered
// With MODE=probe the same page (same origin, same profile flags) picks the
// file into an input of its own, not the client's, and only PUTs the parts
// that PROBE_PATH describes (a JSON file the benchmark wrote: each part's
// byte range and presigned PUT, signed with SHA-256 the benchmark computed,
// the parts in flight at once, and the complete to send): XMLHttpRequest
// with upload progress, as the client's transport sends them, hashing
// nothing. With TRACE_PATH, the run is recorded as a Chromium trace (CDP
// Tracing, the DevTools timeline's categories) into that file.
// With MODE=first-part it only picks the file and then waits for a line on
// stdin (or its end) before it closes the browser: the benchmark watches S3
// for the first stored part and says when to stop. In either mode it exits
// non-zero if the row shows failed.
//
//   APP_URL=http://127.0.0.1:PORT FILE_PATH=/tmp/x.bin MODE=complete node upload.mjs
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
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
const TRACE_PATH = process.env.TRACE_PATH;
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
    const w = /** @type {any} */ (window);
    document.addEventListener(
      "change",
      () => {
        w.__pickedAt ??= performance.timeOrigin + performance.now();
      },
      { capture: true },
    );
    // The main thread's long tasks (over 50 ms), as epoch-ms spans.
    w.__longTasks = [];
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) w.__longTasks.push({ at: performance.timeOrigin + e.startTime, ms: e.duration });
      }).observe({ type: "longtask", buffered: true });
    } catch {
      // No longtask entries in this browser: none reported.
    }
  });
  await page.goto(new URL("/", APP_URL).toString());
  await page.locator("html[data-ready=true]").waitFor({ timeout: 30_000 });
  const trace = TRACE_PATH ? await startTrace(page) : undefined;
  // The part PUTs the page sends, and the most in flight at once: what the probe copies.
  const puts = { parts: new Set(), inFlight: 0, maxInFlight: 0 };
  /** @param {import("playwright-core").Request} r */
  const isPartPut = (r) => r.method() === "PUT" && new URL(r.url()).searchParams.has("partNumber");
  page.on("request", (r) => {
    if (!isPartPut(r)) return;
    puts.parts.add(new URL(r.url()).searchParams.get("partNumber"));
    puts.maxInFlight = Math.max(puts.maxInFlight, ++puts.inFlight);
  });
  for (const ended of /** @type {const} */ (["requestfinished", "requestfailed"])) {
    page.on(ended, (r) => {
      if (isPartPut(r)) puts.inFlight--;
    });
  }
  if (MODE === "probe") {
    await probe(page);
  } else {
    await page.getByLabel("Choose files to upload").setInputFiles(FILE_PATH);
  }
  const picked = await page.evaluate(() => /** @type {any} */ (window).__pickedAt ?? 0);
  if (MODE !== "probe") emit({ event: "picked", epochMs: picked });
  if (MODE === "probe") {
    // Done above.
  } else if (MODE === "first-part") {
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
    const completed = Date.now();
    emit({ event: "completed", epochMs: completed, ...(await longTasks(page, picked, completed)), partPuts: puts.parts.size, maxInFlight: puts.maxInFlight });
  }
  if (trace) await trace();
} catch (e) {
  console.error("bench browser upload failed:", e);
  code = 1;
} finally {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);

/**
 * The main thread's longest task between two epoch-ms moments, and how many
 * took over 50 ms (every "longtask" entry does).
 * @param {import("playwright-core").Page} page
 * @param {number} from
 * @param {number} to
 */
async function longTasks(page, from, to) {
  /** @type {{ at: number, ms: number }[]} */
  const all = await page.evaluate(() => /** @type {any} */ (window).__longTasks ?? []);
  const during = all.filter((t) => t.at + t.ms >= from && t.at <= to);
  return { longestTaskMs: Math.max(0, ...during.map((t) => t.ms)), longTasks: during.length };
}

/**
 * The raw probe: picks FILE_PATH into an input of its own and PUTs the
 * parts PROBE_PATH lists, `concurrency` at a time, as the client's
 * transport does (XMLHttpRequest, the signed headers but those the
 * browser sets, upload progress listened to), then sends the complete.
 * @param {import("playwright-core").Page} page
 */
async function probe(page) {
  const plan = JSON.parse(readFileSync(required("PROBE_PATH"), "utf8"));
  await page.evaluate(() => {
    const input = document.createElement("input");
    input.type = "file";
    input.id = "bench-probe-file";
    input.hidden = true;
    document.body.append(input);
  });
  await page.locator("#bench-probe-file").setInputFiles(FILE_PATH);
  emit({ event: "probing", epochMs: Date.now() });
  const got = await page.evaluate(async (plan) => {
    /** @type {{ partNumber: number, start: number, end: number, url: string, method?: string, headers?: Record<string, string> }[]} */
    const parts = plan.parts;
    const file = /** @type {HTMLInputElement} */ (document.getElementById("bench-probe-file")).files?.[0];
    if (!file) throw new Error("the probe's input holds no file");
    // transport.ts's FORBIDDEN: headers the browser sets itself.
    const forbidden = new Set(["content-length", "host", "connection", "expect", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "date", "origin", "referer"]);
    const now = () => performance.timeOrigin + performance.now();
    const loaded = new Map();
    /** @param {typeof parts[number]} p */
    const put = (p) =>
      new Promise((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open(p.method ?? "PUT", p.url, true);
        for (const [k, v] of Object.entries(p.headers ?? {})) if (!forbidden.has(k.toLowerCase())) xhr.setRequestHeader(k, v);
        xhr.responseType = "text";
        xhr.upload.onprogress = (e) => loaded.set(p.partNumber, e.loaded);
        xhr.onload = () =>
          xhr.status >= 200 && xhr.status <= 299 ? resolve(undefined) : reject(new Error(`part ${p.partNumber}: HTTP ${xhr.status}: ${xhr.responseText.slice(0, 300)}`));
        xhr.onerror = () => reject(new Error(`part ${p.partNumber}: no answer`));
        xhr.send(file.slice(p.start, p.end));
      });
    let next = 0;
    const sender = async () => {
      while (next < parts.length) await put(parts[next++]);
    };
    const startMs = now();
    await Promise.all(Array.from({ length: Math.min(plan.concurrency, parts.length) }, sender));
    const putsDoneMs = now();
    const res = await fetch(plan.complete.url, { method: "POST", headers: { "Content-Type": "application/json" }, body: plan.complete.body });
    if (!res.ok) throw new Error(`complete: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    return { startMs, putsDoneMs, doneMs: now() };
  }, plan);
  emit({ event: "probed", startMs: got.startMs, putsDoneMs: got.putsDoneMs, epochMs: got.doneMs, ...(await longTasks(page, got.startMs, got.doneMs)) });
}

/**
 * Starts a Chromium trace of the page (CDP Tracing, the DevTools
 * timeline's categories); the function it returns ends it and writes it
 * to TRACE_PATH.
 * @param {import("playwright-core").Page} page
 */
async function startTrace(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Tracing.start", {
    transferMode: "ReturnAsStream",
    traceConfig: {
      includedCategories: ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing", "loading", "netlog", "toplevel"],
    },
  });
  return async () => {
    const done = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
    await cdp.send("Tracing.end");
    const { stream } = /** @type {{ stream: string }} */ (await done);
    const out = createWriteStream(/** @type {string} */ (TRACE_PATH));
    for (;;) {
      const chunk = await cdp.send("IO.read", { handle: stream });
      out.write(chunk.base64Encoded ? Buffer.from(chunk.data, "base64") : chunk.data);
      if (chunk.eof) break;
    }
    await cdp.send("IO.close", { handle: stream });
    await new Promise((resolve) => out.end(resolve));
  };
}
