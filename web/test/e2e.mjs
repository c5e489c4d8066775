// @ts-check
// Drives the demo page in Debian's Chromium (playwright-core, never a
// downloaded browser) through one scenario, and prints what a user saw and
// what the browser sent as one JSON line on stdout. It asserts only what it
// must wait for; web/browser_test.go starts the local stack and the proxies,
// runs this once per scenario and checks the observations and the bucket.
//
//   node test/e2e.mjs <scenario>
//   APP_URL   the page's origin (the stack's front door, which serves dist/)
//   API_URL   optional: the API the page is pointed at with ?api=
//   OUT_DIR   where screenshots go (default test-results)
//   CHROMIUM  the browser (default /usr/bin/chromium)
//   PROXY_URL optional: the browser's HTTP proxy (every request, loopback
//             included); GET PROXY_URL/__mark marks a moment in its log
//   FILE_PATH, FILE_SHA256, FILE_TYPE  a large file on disk (large-file
//             scenarios), and the type the browser gives it
//   SHOTS     the screenshots' name prefix (default: the scenario)
//   FREE_UPLOAD_IDS  too-many: the uploads to abort (comma-separated) to
//             free places, as the user would finish or discard others
//
//   MATRIX    matrix: the cells, JSON [{name, size, reload}], each armed at
//             the proxy with GET PROXY_URL/__arm?cell=NAME
//   PAGE_QUERY  matrix: the demo's query (its tunings: retryBaseMs, …)
//
// Scenarios: upload, lost-response, lost-put, reload, restart, cors,
// cors-refused, several, ux, and for large files: big, resume, discard, offline, drop,
// upload-1g, too-many, worker-sends; the outage matrix (matrix); and bench (a measurement: see TestBrowserBench).
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { chromium } from "playwright-core";

const scenario = process.argv[2] ?? "";
const APP_URL = required("APP_URL");
const API_URL = process.env.API_URL ?? "";
const OUT_DIR = process.env.OUT_DIR ?? "test-results";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const PROXY_URL = process.env.PROXY_URL ?? "";
const SHOTS = process.env.SHOTS || (process.argv[2] ?? "");
// Flags that work for Debian's headless Chromium here; a fresh profile per run (launchPersistentContext's dir).
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const WAIT = 30_000;

/** @param {string} name */
function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const t0 = Date.now();
function log(/** @type {unknown[]} */ ...args) {
  console.error(`[e2e +${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...args);
}

/** @param {string} name @param {string} mimeType @param {number} size */
function makeFile(name, mimeType, size) {
  const buffer = randomBytes(size);
  return { name, mimeType, buffer, sha256: createHash("sha256").update(buffer).digest("hex"), size };
}

/** @typedef {{ name: string, mimeType: string, buffer: Buffer, sha256: string, size: number }} TestFile */
/** @typedef {{ url: string, method: string, requestHeaders: Record<string,string>, status?: number, responseHeaders?: Record<string,string> }} Preflight */
/** @typedef {{ context: import("playwright-core").BrowserContext, page: import("playwright-core").Page }} Browser */
/** A text a row's status line showed. @typedef {{ key: string, text: string }} StatusEntry */
/** @typedef {{ start: number, duration: number }} LongTask */
/** The page's window, with what the scenarios keep in it. @typedef {Window & { __statusLog?: StatusEntry[], __longTasks?: LongTask[] }} TestWindow */
/** A trace event of Chromium's, the fields read here. @typedef {{ ph: string, name: string, pid: number, tid: number, dur?: number, args?: { name?: string } }} TraceEvent */

/** Opens the demo and waits until it has listed its stored uploads. @param {import("playwright-core").Page} page */
async function open(page) {
  await page.goto(pageURL());
  await page.locator("html[data-ready=true]").waitFor();
}

/** The page's URL, pointed at API_URL when given. */
function pageURL() {
  const u = new URL("/", APP_URL);
  if (API_URL) u.searchParams.set("api", API_URL);
  return u.toString();
}

/** Starts Chromium on the given profile folder. @param {string} profile */
async function launch(profile) {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 900, height: 720 },
    deviceScaleFactor: 1,
    // Playwright also sends loopback through it (<-loopback>).
    ...(PROXY_URL ? { proxy: { server: PROXY_URL } } : {}),
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on("console", (m) => log(`console ${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => log(`page error: ${e.message}`));
  page.setDefaultTimeout(WAIT);
  return { context, page };
}

const newProfile = () => mkdtempSync(join(tmpdir(), "onceupload-chromium-"));

/** Logs what the page showed, when a scenario fails. @param {import("playwright-core").Page} page */
async function diagnose(page) {
  if (page.isClosed()) return;
  log("rows when it failed:", JSON.stringify(await rows(page).catch((/** @type {unknown} */ err) => String(err))));
  log("status log:", JSON.stringify(await statusLog(page).catch((/** @type {unknown} */ err) => String(err))));
}

/**
 * Runs fn with a fresh browser on a fresh profile; on failure, logs what the
 * page showed. fn may restart() the browser: it is killed, as a crash would
 * (see kill), and started again on the same profile; from then on the
 * diagnosis and the close are the new browser's. Resolves with what fn
 * reports. (Not generic: in a .mjs file TypeScript infers any for a type
 * parameter from a callback whose parameters are typed by the context.)
 * @param {(b: Browser & { restart: () => Promise<Browser> }) => Promise<object>} fn
 * @returns {Promise<object>}
 */
async function withBrowser(fn) {
  const profile = newProfile();
  let b = await launch(profile);
  const restart = async () => {
    await kill(b.context, profile);
    log("browser killed");
    b = await launch(profile);
    log("browser started again");
    return b;
  };
  try {
    return await fn({ ...b, restart });
  } catch (e) {
    await diagnose(b.page);
    throw e;
  } finally {
    await b.context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

function newObservations() {
  return {
    /** @type {{url: string, key: string | undefined, body: string | null, authorization?: string}[]} */ posts: [],
    /** @type {{url: string, headers: Record<string,string>, status?: number}[]} */ puts: [],
    /** @type {{method: string, url: string, error: string}[]} */ failed: [],
    /** @type {Preflight[]} */ preflights: [],
    /** @type {string[]} */ console: [],
    /** @type {string[]} */ workers: [],
    /** The client's no-cors probes of a storage (a GET of another origin's "/"), and their answers. @type {{url: string, status?: number}[]} */ probes: [],
  };
}

/**
 * Records what the browser sends: every create (its Idempotency-Key), every
 * PUT, failed requests, CORS preflights (through the DevTools protocol, the
 * only place a page's preflights are visible), and each row's status texts.
 * @param {import("playwright-core").BrowserContext} context
 * @param {import("playwright-core").Page} page
 * @param {ReturnType<typeof newObservations>} [obs] where to add them (a second browser on the same profile)
 */
async function observe(context, page, obs = newObservations()) {
  page.on("console", (m) => obs.console.push(`${m.type()}: ${m.text()}`));
  page.on("worker", (w) => obs.workers.push(w.url()));

  page.on("pageerror", (e) => obs.console.push(`pageerror: ${e.message}`));
  // Recorded at once with the headers known then, completed with the full
  // set when the browser still can (it may be closing: see "restart").
  page.on("request", (req) => {
    const u = new URL(req.url());
    if (req.method() === "POST" && u.pathname.endsWith("/uploads")) {
      /** @type {{url: string, key: string | undefined, body: string | null, authorization?: string}} */
      const entry = { url: req.url(), key: req.headers()["idempotency-key"], body: req.postData(), authorization: req.headers()["authorization"] };
      obs.posts.push(entry);
      req.allHeaders().then((h) => void ((entry.key = h["idempotency-key"]), (entry.authorization = h["authorization"])), () => {});
    }
    if (req.method() === "GET" && u.pathname === "/" && u.origin !== new URL(APP_URL).origin && req.resourceType() === "fetch") {
      /** @type {{url: string, status?: number}} */
      const entry = { url: req.url() };
      obs.probes.push(entry);
      req.response().then((r) => void (entry.status = r?.status()), () => {});
    }
    if (req.method() === "PUT") {
      const entry = { url: req.url(), headers: req.headers(), status: /** @type {number|undefined} */ (undefined) };
      obs.puts.push(entry);
      req.allHeaders().then((h) => void (entry.headers = h), () => {});
      req.response().then((r) => void (entry.status = r?.status()), () => {});
    }
  });
  page.on("requestfailed", (req) => obs.failed.push({ method: req.method(), url: req.url(), error: req.failure()?.errorText ?? "" }));

  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  /** @type {Map<string, Preflight>} */
  const byId = new Map();
  cdp.on("Network.requestWillBeSent", (e) => {
    if (e.request.method !== "OPTIONS") return;
    const p = { url: e.request.url, method: e.request.method, requestHeaders: lowerKeys(e.request.headers) };
    byId.set(e.requestId, p);
    obs.preflights.push(p);
  });
  cdp.on("Network.responseReceived", (e) => {
    const p = byId.get(e.requestId);
    if (p) {
      p.status = e.response.status;
      p.responseHeaders = lowerKeys(e.response.headers);
    }
  });

  // Every text a row's status line showed, in order (rows by their key).
  await context.addInitScript(() => {
    /** @type {StatusEntry[]} */
    const logged = [];
    /** @type {TestWindow} */ (window).__statusLog = logged;
    /** @type {WeakMap<Element, string>} */
    const last = new WeakMap();
    const scan = () => {
      for (const li of document.querySelectorAll("li.upload")) {
        const text = li.querySelector(".status")?.textContent ?? "";
        if (last.get(li) !== text) {
          last.set(li, text);
          logged.push({ key: /** @type {HTMLElement} */ (li).dataset.key ?? "", text });
        }
      }
    };
    new MutationObserver(scan).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  return { obs, cdp };
}

/** @param {Record<string, string>} h */
function lowerKeys(h) {
  /** @type {Record<string,string>} */
  const out = {};
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = v;
  return out;
}

/** What each row shows. @param {import("playwright-core").Page} page */
function rows(page) {
  return page.$$eval("li.upload", (lis) =>
    lis.map((li) => {
      const el = /** @type {HTMLElement} */ (li);
      return {
        name: el.querySelector(".name")?.textContent ?? "",
        key: el.dataset.key ?? "",
        uploadId: el.dataset.uploadId ?? "",
        storageKey: el.dataset.storageKey ?? "",
        phase: el.dataset.phase ?? "",
        replay: el.dataset.replay ?? "",
        hashedIn: el.dataset.hashedIn ?? "",
        status: el.querySelector(".status")?.textContent ?? "",
        progress: /** @type {HTMLProgressElement} */ (el.querySelector("progress")).value,
        buttons: [...el.querySelectorAll("button")].map((b) => b.getAttribute("aria-label") ?? b.textContent ?? ""),
      };
    }),
  );
}

/** @param {import("playwright-core").Page} page */
function statusLog(page) {
  return page.evaluate(() => /** @type {TestWindow} */ (window).__statusLog ?? []);
}

/** Records left in the page's IndexedDB. @param {import("playwright-core").Page} page */
function storedRecords(page) {
  return page.evaluate(
    () =>
      /** @type {Promise<{key: string, phase: string, uploadId: string, hasFile: boolean}[]>} */ (
        new Promise((resolve, reject) => {
          const open = indexedDB.open("onceupload", 1);
          open.onerror = () => reject(open.error ?? new Error("indexedDB.open failed"));
          open.onsuccess = () => {
            const db = open.result;
            const req = db.transaction("uploads").objectStore("uploads").getAll();
            req.onsuccess = () => {
              const records = /** @type {import("../src/store.js").UploadRecord[]} */ (req.result);
              resolve(records.map((r) => ({ key: r.key, phase: r.phase, uploadId: r.uploadId ?? "", hasFile: !!r.file })));
              db.close();
            };
            req.onerror = () => reject(req.error ?? new Error("getAll failed"));
          };
        })
      ),
  );
}

/** Waits until every row is completed or failed. @param {import("playwright-core").Page} page @param {number} n */
async function waitSettled(page, n) {
  await page.waitForFunction(
    (n) => {
      const lis = [...document.querySelectorAll("li.upload")];
      return lis.length >= n && lis.every((li) => ["completed", "failed"].includes(/** @type {HTMLElement} */ (li).dataset.phase ?? ""));
    },
    n,
    { timeout: WAIT },
  );
}

/** Picks files with the labelled file input, as a user (or a keyboard user) does. @param {import("playwright-core").Page} page @param {TestFile[]} files */
async function pick(page, files) {
  await page.getByLabel("Choose files to upload").setInputFiles(files.map(({ name, mimeType, buffer }) => ({ name, mimeType, buffer })));
}

/** @param {TestFile} f */
const fileInfo = (f) => ({ name: f.name, size: f.size, sha256: f.sha256, contentType: f.mimeType });

/**
 * Kills the browser running on profile with SIGKILL, as a crash or a power
 * cut would: no shutdown, no last requests. (A graceful close lets an upload
 * in flight finish unthrottled, as DevTools detaches.) Playwright starts
 * Chromium in its own process group; the whole group goes.
 * @param {import("playwright-core").BrowserContext} context
 * @param {string} profile
 */
async function kill(context, profile) {
  let pid = 0;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let args;
    try {
      args = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (args.includes(`--user-data-dir=${profile}`) && !args.some((a) => a.startsWith("--type="))) pid = Number(d);
  }
  if (!pid) throw new Error(`no browser process runs on ${profile}`);
  const closed = new Promise((resolve) => context.once("close", resolve));
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    process.kill(pid, "SIGKILL");
  }
  await closed;
}

const throttle = (/** @type {import("playwright-core").CDPSession} */ cdp, /** @type {number} */ bytesPerSecond) =>
  cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: bytesPerSecond });

/** The status the API gives an upload (GET /uploads/{id}). @param {string} uploadId */
async function uploadStatus(uploadId) {
  const res = await fetch(new URL(`/uploads/${uploadId}`, APP_URL));
  /** @type {unknown} */
  const body = await res.json();
  if (typeof body !== "object" || body === null || !("status" in body) || typeof body.status !== "string") {
    throw new Error(`GET /uploads/${uploadId}: HTTP ${res.status}, no status in ${JSON.stringify(body)}`);
  }
  return body.status;
}

/**
 * Starts a 1 MiB upload on a throttled network, interrupts it in the middle
 * of the PUT (reloads the page, or kills the browser and starts it again), then
 * resumes it from the row listed after the interruption.
 * @param {"reload" | "restart"} how
 */
async function interruptAndResume(how) {
  return withBrowser(async ({ context, page, restart }) => {
    let { obs, cdp } = await observe(context, page);
    log("browser started");
    await open(page);
    log("page ready");
    await throttle(cdp, 128 * 1024);
    const file = makeFile("big.bin", "application/octet-stream", 1024 * 1024);
    await pick(page, [file]);
    log("file picked");
    await page.locator("li.upload[data-phase=uploading]").waitFor();
    log("PUT started");
    await page.waitForFunction(() => {
      const li = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"));
      const p = /** @type {HTMLProgressElement | null} */ (li?.querySelector("progress") ?? null);
      return li?.dataset.phase === "uploading" && p !== null && p.value >= 5;
    });
    const before = (await rows(page))[0];
    const storedBefore = await storedRecords(page);
    log(`${how} at ${before.progress}% of the PUT, key ${before.key}`);
    if (how === "reload") {
      await page.reload();
      await page.locator("html[data-ready=true]").waitFor();
    } else {
      ({ context, page } = await restart());
      ({ cdp } = await observe(context, page, obs));
      await open(page);
    }
    const listed = (await rows(page))[0];
    log("listed after the", how, JSON.stringify(listed.status));
    mkdirSync(OUT_DIR, { recursive: true });
    await page.screenshot({ path: join(OUT_DIR, `${how}-interrupted.png`), fullPage: true });
    const storedAfterReload = await storedRecords(page);
    // The server has no object for it yet (GET /uploads/{id} would complete it if S3 had one).
    const serverAfterReload = await uploadStatus(before.uploadId);

    await throttle(cdp, -1);
    const resume = page.locator("li.upload").getByRole("button", { name: /^Resume upload of big\.bin$/ });
    await resume.focus();
    await page.keyboard.press("Enter");
    await waitSettled(page, 1);
    return {
      files: [fileInfo(file)],
      before,
      storedBefore,
      listed,
      storedAfterReload,
      serverAfterReload,
      rows: await rows(page),
      statusLog: await statusLog(page),
      stored: await storedRecords(page),
      ...obs,
    };
  });
}

/** The large file the Go test wrote, as the scenario reports it. */
function bigFile() {
  const path = required("FILE_PATH");
  const st = statSync(path);
  return { path, name: basename(path), size: st.size, sha256: required("FILE_SHA256"), contentType: process.env.FILE_TYPE || "application/octet-stream" };
}

/** Picks a file from disk (Chromium reads it from there: nothing is copied). @param {import("playwright-core").Page} page @param {string} path */
async function pickPath(page, path) {
  await page.getByLabel("Choose files to upload").setInputFiles(path);
}

/** Marks this moment in the proxy's log. */
async function mark() {
  const res = await fetch(new URL("/__mark", required("PROXY_URL")));
  if (res.status !== 204) throw new Error(`mark: HTTP ${res.status}`);
}

/** Waits until the (only) row satisfies a condition on its phase, progress and parts. @param {import("playwright-core").Page} page @param {{phase?: string, minProgress?: number, minParts?: number, status?: string}} want */
async function waitRow(page, want) {
  await page.waitForFunction(
    (want) => {
      const li = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"));
      if (!li) return false;
      const p = /** @type {HTMLProgressElement} */ (li.querySelector("progress")).value;
      const status = li.querySelector(".status")?.textContent ?? "";
      return (
        (!want.phase || li.dataset.phase === want.phase) &&
        p >= (want.minProgress ?? 0) &&
        Number(li.dataset.partsDone ?? 0) >= (want.minParts ?? 0) &&
        (!want.status || status.startsWith(want.status))
      );
    },
    want,
    { timeout: 120_000 },
  );
}

/** @param {import("playwright-core").Page} page @param {string} state */
async function shot(page, state) {
  mkdirSync(OUT_DIR, { recursive: true });
  const path = join(OUT_DIR, `${SHOTS}-${state}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The longest main-thread tasks of the page's renderer between start() and
 * stop(), from Chromium's own trace (RunTask events of CrRendererMain), and
 * the long tasks the page's PerformanceObserver saw meanwhile.
 * @param {import("playwright-core").CDPSession} cdp
 */
async function traceMainThread(cdp) {
  /** @type {TraceEvent[]} */
  const events = [];
  cdp.on("Tracing.dataCollected", (e) => events.push(.../** @type {TraceEvent[]} */ (/** @type {unknown} */ (e.value))));
  await cdp.send("Tracing.start", { traceConfig: { includedCategories: ["disabled-by-default-devtools.timeline", "devtools.timeline", "toplevel"] }, transferMode: "ReportEvents" });
  return {
    async stop() {
      const done = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
      await cdp.send("Tracing.end");
      await done;
      const main = new Set(events.filter((e) => e.ph === "M" && e.name === "thread_name" && e.args?.name === "CrRendererMain").map((e) => `${e.pid}:${e.tid}`));
      const tasks = events.filter((e) => e.ph === "X" && (e.name === "RunTask" || e.name === "ThreadControllerImpl::RunTask") && main.has(`${e.pid}:${e.tid}`));
      const durs = tasks.map((e) => (e.dur ?? 0) / 1000).sort((a, b) => b - a);
      return { tasks: tasks.length, longestMs: durs[0] ?? 0, over50: durs.filter((d) => d > 50).length, top: durs.slice(0, 5) };
    },
  };
}

const scenarios = {
  /** A file uploads and shows completed. */
  async upload() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const file = makeFile("hello.txt", "text/plain", 64 * 1024 + 17);
      await pick(page, [file]);
      await waitSettled(page, 1);
      return { files: [fileInfo(file)], rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page), ...obs };
    });
  },

  /** The first create's answer is lost on the way back (the proxy drops it); the page retries with the same key. */
  async "lost-response"() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const file = makeFile("lost-answer.json", "application/json", 20_000);
      await pick(page, [file]);
      await waitSettled(page, 1);
      return { files: [fileInfo(file)], rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page), ...obs };
    });
  },

  /**
   * The answer to the first PUT is lost on the way back (the browser's proxy,
   * PROXY_URL, drops it after S3 stored the object); the page retries the
   * PUT, S3 answers 412 to its If-None-Match, and the page takes that as
   * stored and confirms with the status route.
   */
  async "lost-put"() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const file = makeFile("lost-put.bin", "application/octet-stream", 300_000);
      await pick(page, [file]);
      await waitSettled(page, 1);
      return { files: [fileInfo(file)], rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page), ...obs };
    });
  },

  /**
   * The page is reloaded in the middle of the PUT (uploads are throttled
   * through DevTools so that the PUT takes seconds; the reload comes once
   * the progress bar shows some bytes sent). The upload is listed again and
   * the Resume button, pressed from the keyboard, finishes it with the same key.
   */
  reload: () => interruptAndResume("reload"),

  /** The same, but the browser is killed mid-PUT and started again on its profile. */
  restart: () => interruptAndResume("restart"),

  /** The page calls the API cross-origin (API_URL) and S3: the browser's own preflights, with the real headers. */
  async cors() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const file = makeFile("cors.csv", "text/csv", 3_000);
      await pick(page, [file]);
      await waitSettled(page, 1);
      return { files: [fileInfo(file)], rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page), ...obs };
    });
  },

  /**
   * The page is served from an origin the bucket's CORS rules leave out
   * (APP_URL, a proxy of the stack's front door on another port: its API
   * calls are same-origin and answered), so every PUT fails at once with no
   * status; the page says why and stops. A second file, whose name holds a
   * RIGHT-TO-LEFT OVERRIDE, is refused by the API, and its row shows the
   * name escaped.
   */
  async "cors-refused"() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const files = [makeFile("cors.bin", "application/octet-stream", 4_000), makeFile("invoice\u202Efdp.exe", "application/octet-stream", 3_000)];
      await pick(page, files);
      await waitSettled(page, 2);
      return { files: files.map(fileInfo), rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page), ...obs };
    });
  },

  /** Several files, one dropped onto the drop zone and two picked; then a screenshot. */
  async several() {
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      const dropped = makeFile("dropped-notes.md", "text/markdown", 5_000);
      const picked = [makeFile("photo.png", "image/png", 180_000), makeFile("report.pdf", "application/pdf", 90_000)];
      const dt = await page.evaluateHandle(
        ({ name, type, b64 }) => {
          const dt = new DataTransfer();
          dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name, { type }));
          return dt;
        },
        { name: dropped.name, type: dropped.mimeType, b64: dropped.buffer.toString("base64") },
      );
      await page.dispatchEvent("#dropzone", "drop", { dataTransfer: dt });
      await pick(page, picked);
      await waitSettled(page, 3);
      mkdirSync(OUT_DIR, { recursive: true });
      const screenshot = join(OUT_DIR, "demo.png");
      await page.screenshot({ path: screenshot, fullPage: true });
      return {
        files: [dropped, ...picked].map(fileInfo),
        rows: await rows(page),
        statusLog: await statusLog(page),
        stored: await storedRecords(page),
        screenshot,
        ...obs,
      };
    });
  },

  /**
   * The page's states for a new user, each checked and photographed: idle,
   * the token field (kept in sessionStorage across a reload, never in the URL
   * or localStorage, sent as Authorization: Bearer), uploading with bytes
   * sent, speed and time left, paused (the button says Pause), completed and
   * listed again after a reload (then the history cleared), and an error.
   */
  async ux() {
    return withBrowser(async ({ context, page }) => {
      const { obs, cdp } = await observe(context, page);
      /** @type {Record<string, boolean>} */
      const checks = {};
      /** @type {Record<string, unknown>} */
      const seen = {};
      const screenshots = [];
      await open(page);
      checks.idleEmpty = (await page.locator("#empty").isVisible()) && !(await page.locator("#clear-history").isVisible());
      screenshots.push(await shot(page, "idle"));

      // An error first: a token the API's authorizer refuses (the local stack
      // reads a JWT's claims as API Gateway's authorizer would, and answers 401).
      const field = page.getByLabel("JWT, for deployments that require one");
      checks.tokenIsPassword = (await field.getAttribute("type")) === "password";
      await field.fill("not-a-jwt");
      const refused = makeFile("notes.txt", "text/plain", 2_000);
      await pick(page, [refused]);
      await waitRow(page, { phase: "failed" });
      seen.failed = (await rows(page))[0];
      checks.errorShown = /^Failed: .*401.*Check the access token below\.$/.test(/** @type {{status: string}} */ (seen.failed).status);
      checks.refusedSentToken = obs.posts.length > 0 && obs.posts.every((p) => p.authorization === "Bearer not-a-jwt");
      screenshots.push(await shot(page, "error"));
      await page.locator("li.upload").getByRole("button", { name: `Remove ${refused.name}` }).click();
      await page.locator("li.upload").waitFor({ state: "detached" });

      // A token the authorizer takes (claims read, signature not checked locally).
      const b64 = (/** @type {string} */ s) => Buffer.from(s).toString("base64url");
      const token = `${b64('{"alg":"none"}')}.${b64('{"sub":"e2e-user"}')}.sig`;
      await field.fill(token);
      await page.reload();
      await page.locator("html[data-ready=true]").waitFor();
      checks.tokenKeptInTab = (await field.inputValue()) === token;
      const storage = await page.evaluate(() => ({ session: sessionStorage.getItem("onceupload.token"), local: JSON.stringify(localStorage), url: location.href }));
      seen.storage = storage;
      checks.tokenInSessionStorageOnly = storage.session === token && !storage.local.includes(token) && !storage.url.includes(token);
      screenshots.push(await shot(page, "token"));

      // Uploading, slowly enough to see the speed and the time left.
      const postsBefore = obs.posts.length;
      await throttle(cdp, 256 * 1024);
      const file = makeFile("holiday-video.mp4", "video/mp4", 3 * 1024 * 1024);
      await pick(page, [file]);
      const row = page.locator("li.upload").first();
      await page.waitForFunction(() => {
        const li = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"));
        return li?.dataset.phase === "uploading" && /\/s · .* left/.test(li.querySelector(".percent")?.textContent ?? "");
      });
      const progressText = (await row.locator(".percent").textContent()) ?? "";
      seen.progressText = progressText;
      checks.progressShowsBytesSpeedAndTimeLeft = /^[\d.]+ (B|KiB|MiB) of 3\.0 MiB · [\d.]+ (B|KiB|MiB)\/s · \d+ (s|min \d+ s) left · \d+ %$/.test(progressText);
      checks.sizeInMiB = (await row.locator(".size").textContent()) === "3.0 MiB";
      screenshots.push(await shot(page, "uploading"));
      const pause = row.getByRole("button", { name: `Pause upload of ${file.name}` });
      checks.pauseButtonSaysPause = (await pause.textContent()) === "Pause";
      await pause.click();
      await waitRow(page, { phase: "paused" });
      seen.paused = (await rows(page))[0];
      // A single PUT cut short keeps nothing: the bar says so (multipart uploads keep their parts: see "discard").
      checks.pausedBarShowsNothingKept = (await row.locator("progress").evaluate((p) => /** @type {HTMLProgressElement} */ (p).value)) === 0;
      checks.pausedOffersResume = (await row.getByRole("button", { name: `Resume upload of ${file.name}` }).count()) === 1;
      screenshots.push(await shot(page, "paused"));
      await throttle(cdp, -1);
      await row.getByRole("button", { name: `Resume upload of ${file.name}` }).click();
      await waitRow(page, { phase: "completed" });
      const sent = obs.posts.slice(postsBefore);
      checks.tokenSent = sent.length > 0 && sent.every((p) => p.authorization === `Bearer ${token}`);

      // Completed uploads are listed again after a reload.
      await page.reload();
      await page.locator("html[data-ready=true]").waitFor();
      const listed = await rows(page);
      seen.historyRows = listed;
      checks.historyAfterReload =
        listed.length === 1 && listed[0].name === file.name && listed[0].phase === "completed" && listed[0].status.startsWith("Completed") && listed[0].progress === 100;
      checks.clearHistoryShown = await page.getByRole("button", { name: "Clear history" }).isVisible();
      screenshots.push(await shot(page, "history"));

      // Clear history: the completed row goes, now and after a reload.
      await page.getByRole("button", { name: "Clear history" }).click();
      const afterClear = await rows(page);
      await page.reload();
      await page.locator("html[data-ready=true]").waitFor();
      const afterClearReload = await rows(page);
      seen.afterClear = afterClear;
      checks.historyCleared =
        afterClear.length === 0 && afterClearReload.length === 0 && (await page.locator("#empty").isVisible()) && !(await page.locator("#clear-history").isVisible());
      return { files: [fileInfo(file)], checks, seen, screenshots, ...obs };
    });
  },
};

/** Everything a large-file scenario reports about the page at the end. @param {import("playwright-core").Page} page */
async function finalState(page) {
  return { rows: await rows(page), statusLog: await statusLog(page), stored: await storedRecords(page) };
}

Object.assign(scenarios, {
  /**
   * A file over 64 MiB picked for the first time uploads in parts, at
   * once (no whole-file pass: the parts are hashed as they are sent; the
   * proxy may lose a part's answer: the test decides). Screenshots of the
   * uploading and completed states.
   */
  async big() {
    const file = bigFile();
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      // The demo's measurement hook (web/README.md): its marks, in order.
      await context.addInitScript(() => {
        /** @type {{ mark: string, key?: string, at: number }[]} */
        const marks = [];
        /** @type {Window & { __timings?: typeof marks }} */ (window).__timings = marks;
        addEventListener("onceupload:timing", (e) => {
          const d = /** @type {CustomEvent<{ mark: string, key?: string, at: number }>} */ (e).detail;
          marks.push({ mark: d.mark, key: d.key, at: d.at });
        });
      });
      await open(page);
      await pickPath(page, file.path);
      await waitRow(page, { phase: "uploading", minProgress: 10 });
      const uploading = await shot(page, "uploading");
      await waitSettled(page, 1);
      const completed = await shot(page, "completed");
      const timingMarks = await page.evaluate(() => /** @type {Window & { __timings?: { mark: string, key?: string, at: number }[] }} */ (window).__timings ?? []);
      return { files: [file], ...(await finalState(page)), screenshots: [uploading, completed], timingMarks, ...obs };
    });
  },

  /**
   * A 200 MiB file: the page is reloaded after about half its parts are
   * stored (uploads throttled through DevTools so that this is a moment,
   * not a race), then Resume with the same file picked again finishes it.
   * The proxy's log is marked at the reload.
   */
  async resume() {
    const file = bigFile();
    const bytesPerSecond = Number(process.env.THROTTLE ?? 0);
    return withBrowser(async ({ context, page }) => {
      const { obs, cdp } = await observe(context, page);
      await open(page);
      if (bytesPerSecond > 0) await throttle(cdp, bytesPerSecond);
      await pickPath(page, file.path);
      await waitRow(page, { phase: "uploading", minParts: 1 });
      const partCount = Number(await page.locator("li.upload").getAttribute("data-part-count"));
      await waitRow(page, { phase: "uploading", minParts: Math.floor(partCount / 2) });
      const before = (await rows(page))[0];
      const partsBefore = Number(await page.locator("li.upload").getAttribute("data-parts-done"));
      const storedBefore = await storedRecords(page);
      log(`reload with ${partsBefore} of ${partCount} parts stored`);
      await mark();
      await page.reload();
      await page.locator("html[data-ready=true]").waitFor();
      const listed = (await rows(page))[0];
      const interrupted = await shot(page, "interrupted");
      await throttle(cdp, -1);
      /** @type {Awaited<ReturnType<typeof rows>>[number] | undefined} */
      let wrong;
      const other = process.env.WRONG_FILE_PATH;
      if (other) {
        // Another file of the same size first: refused before anything is sent; the proxy's log is marked around it.
        await mark();
        const chooser = page.waitForEvent("filechooser");
        await page.locator("li.upload").getByRole("button", { name: `Resume upload of ${file.name} (pick the same file)` }).click();
        await (await chooser).setFiles(other);
        await waitRow(page, { phase: "failed" });
        wrong = (await rows(page))[0];
        log("the other file:", JSON.stringify(wrong.status));
        await mark();
      }
      const chooser = page.waitForEvent("filechooser");
      await page.locator("li.upload").getByRole("button", { name: `Resume upload of ${file.name} (pick the same file)` }).click();
      await (await chooser).setFiles(file.path);
      await waitRow(page, { phase: "completed" });
      const completed = await shot(page, "completed");
      return { files: [file], before, partsBefore, partCount, storedBefore, listed, wrong, ...(await finalState(page)), screenshots: [interrupted, completed], ...obs };
    });
  },

  /** Cancel after a few parts (the parts stay in storage), then Discard (they go). */
  async discard() {
    const file = bigFile();
    return withBrowser(async ({ context, page }) => {
      const { obs, cdp } = await observe(context, page);
      await open(page);
      await throttle(cdp, 8 << 20);
      await pickPath(page, file.path);
      await waitRow(page, { phase: "uploading", minParts: 2 });
      await page.locator("li.upload").getByRole("button", { name: `Pause upload of ${file.name}` }).click();
      await waitRow(page, { phase: "paused" });
      const paused = (await rows(page))[0];
      const screenshot = await shot(page, "paused");
      await throttle(cdp, -1);
      await page.locator("li.upload").getByRole("button", { name: `Discard upload of ${file.name}` }).click();
      await page.locator("li.upload").waitFor({ state: "detached" });
      return { files: [file], paused, screenshots: [screenshot], ...(await finalState(page)), ...obs };
    });
  },

  /** The browser goes offline during the parts, and online again: the row waits, then completes. */
  async offline() {
    const file = bigFile();
    return withBrowser(async ({ context, page }) => {
      const { obs, cdp } = await observe(context, page);
      await open(page);
      await throttle(cdp, 16 << 20);
      await pickPath(page, file.path);
      await waitRow(page, { phase: "uploading", minParts: 1 });
      await cdp.send("Network.emulateNetworkConditions", { offline: true, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      await waitRow(page, { status: "Waiting for the network…" });
      const screenshot = await shot(page, "offline");
      // Offline for longer than a few retries would have lasted.
      await new Promise((r) => setTimeout(r, 3_000));
      const during = (await rows(page))[0];
      await throttle(cdp, -1);
      await waitSettled(page, 1);
      return { files: [file], during, screenshots: [screenshot], ...(await finalState(page)), ...obs };
    });
  },

  /** A 40 MiB single PUT while the proxy cuts the network at 30 % for 4 s. */
  async drop() {
    const file = bigFile();
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      await pickPath(page, file.path);
      await waitSettled(page, 1);
      return { files: [file], ...(await finalState(page)), ...obs };
    });
  },

  /**
   * 1 GiB uploaded in parts, hashed in the page's pool of workers as they
   * are sent, while the main thread is traced (its longest tasks are
   * reported, not judged: timings depend on the machine's load). The test
   * reads the order of the requests from the proxy's log.
   */
  async "upload-1g"() {
    const file = bigFile();
    return withBrowser(async ({ context, page }) => {
      const { obs, cdp } = await observe(context, page);
      await open(page);
      await page.evaluate(() => {
        /** @type {LongTask[]} */
        const seen = [];
        /** @type {TestWindow} */ (window).__longTasks = seen;
        new PerformanceObserver((l) => {
          for (const e of l.getEntries()) seen.push({ start: e.startTime, duration: e.duration });
        }).observe({ type: "longtask" });
      });
      const trace = await traceMainThread(cdp);
      const from = await page.evaluate(() => performance.now());
      await pickPath(page, file.path);
      await page.waitForFunction(() => /** @type {HTMLElement | null} */ (document.querySelector("li.upload"))?.dataset.phase === "completed", undefined, {
        timeout: 600_000,
        polling: 250,
      });
      const to = await page.evaluate(() => performance.now());
      // Ending the trace makes the renderer flush it, in long tasks of its
      // own: those after the upload are not the page's and are left out.
      const mainThread = await trace.stop();
      const all = await page.evaluate(() => /** @type {TestWindow} */ (window).__longTasks ?? []);
      const longTasks = all.filter((t) => t.start >= from && t.start <= to);
      log(`uploaded in ${Math.round(to - from)} ms; main thread: ${JSON.stringify(mainThread)}; long tasks meanwhile: ${JSON.stringify(longTasks)}`);
      return { files: [file], mainThread, longTasks, ...(await finalState(page)), ...obs };
    });
  },
});

Object.assign(scenarios, {
  /**
   * The tenant holds as many unfinished multipart uploads as the server
   * allows: the create of a large file is refused (429 too_many_uploads).
   * The row says what to do and offers Try again, and does not retry on its
   * own (watched for a few seconds). Then places are freed (the uploads of
   * FREE_UPLOAD_IDS aborted, as the user would finish or discard others)
   * and Try again completes it.
   */
  async "too-many"() {
    const file = bigFile();
    const free = required("FREE_UPLOAD_IDS").split(",");
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await open(page);
      await pickPath(page, file.path);
      await waitRow(page, { phase: "failed" });
      // Long enough for a retry loop to show itself.
      await new Promise((r) => setTimeout(r, 3_000));
      const refused = (await rows(page))[0];
      const storedRefused = await storedRecords(page);
      const createsWhenRefused = obs.posts.length;
      const screenshot = await shot(page, "refused");
      for (const id of free) {
        const res = await fetch(new URL(`/uploads/${id}`, APP_URL), { method: "DELETE" });
        if (res.status !== 200) throw new Error(`DELETE /uploads/${id}: HTTP ${res.status}`);
      }
      // The server counts unfinished uploads from an index that may lag a moment; a person is slower anyway.
      await new Promise((r) => setTimeout(r, 1_000));
      log(`${free.length} uploads aborted; Try again`);
      await page.locator("li.upload").getByRole("button", { name: `Try uploading ${file.name} again` }).click();
      await waitRow(page, { phase: "completed" });
      return { files: [file], refused, storedRefused, createsWhenRefused, screenshots: [screenshot], ...(await finalState(page)), ...obs };
    });
  },
});

Object.assign(scenarios, {
  /**
   * A measurement, not a test: one large file (FILE_PATH) picked and
   * uploaded, with the page's own clock (performance.now()) read at the
   * pick (the input's change event), at each phase of the row, when the
   * storage first holds a part (data-parts-done ≥ 1) and when the row is
   * completed. BENCH_STOP=first-part pauses and discards the upload once a
   * part is stored (nothing stays in the bucket). Reports `timings` (ms
   * since the pick). It reads only the row's attributes, so it measures any
   * version of the page alike.
   */
  async bench() {
    const file = bigFile();
    const stopAtFirstPart = process.env.BENCH_STOP === "first-part";
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await context.addInitScript(() => {
        /** @type {{ t: number, what: string }[]} */
        const marks = [];
        /** @type {Window & { __benchMarks?: typeof marks }} */ (window).__benchMarks = marks;
        document.addEventListener("change", () => marks.push({ t: performance.now(), what: "picked" }), { capture: true });
        let phase = "";
        let parts = 0;
        new MutationObserver(() => {
          const li = /** @type {HTMLElement | null} */ (document.querySelector("li.upload"));
          if (!li) return;
          const t = performance.now();
          if (li.dataset.phase && li.dataset.phase !== phase) {
            phase = li.dataset.phase;
            marks.push({ t, what: `phase:${phase}` });
          }
          const done = Number(li.dataset.partsDone ?? 0);
          if (done > parts) {
            if (parts === 0) marks.push({ t, what: "first-part-stored" });
            parts = done;
          }
        }).observe(document, { subtree: true, childList: true, attributes: true });
      });
      await open(page);
      await pickPath(page, file.path);
      if (stopAtFirstPart) {
        await waitRow(page, { minParts: 1 });
        await page.locator("li.upload").getByRole("button", { name: `Pause upload of ${file.name}` }).click();
        await waitRow(page, { phase: "paused" });
        await page.locator("li.upload").getByRole("button", { name: `Discard upload of ${file.name}` }).click();
        await page.locator("li.upload").waitFor({ state: "detached" });
      } else {
        await page.waitForFunction(() => /** @type {HTMLElement | null} */ (document.querySelector("li.upload"))?.dataset.phase === "completed", undefined, {
          timeout: 1_800_000,
          polling: 100,
        });
      }
      const marks = await page.evaluate(() => /** @type {Window & { __benchMarks?: { t: number, what: string }[] }} */ (window).__benchMarks ?? []);
      const t0 = marks.find((m) => m.what === "picked")?.t ?? 0;
      /** @type {Record<string, number>} */
      const timings = {};
      for (const m of marks) if (!(m.what in timings)) timings[m.what] = Math.round(m.t - t0);
      log(`timings (ms since the pick): ${JSON.stringify(timings)}`);
      return { files: [file], timings, ...(await finalState(page)), ...obs };
    });
  },
});

/** A request to the proxy itself (/__arm, /__state). @param {string} path */
async function control(path) {
  const res = await fetch(new URL(path, required("PROXY_URL")));
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
  /** @type {unknown} */
  const body = res.status === 204 ? undefined : await res.json();
  return body;
}

/** Waits until the proxy holds the request its armed fault holds. */
async function untilHeld() {
  for (const deadline = Date.now() + WAIT; Date.now() < deadline; await new Promise((r) => setTimeout(r, 25))) {
    const st = /** @type {{ held?: boolean }} */ (await control("/__state"));
    if (st.held) return;
  }
  throw new Error("the proxy never held the request");
}

Object.assign(scenarios, {
  /**
   * The outage matrix (TestBrowserOutage): one browser, behind the test's
   * proxy, and for each cell of MATRIX a fresh context (its own IndexedDB)
   * on the demo with PAGE_QUERY's tunings: the cell's fault armed at the
   * proxy, a file of the cell's size picked, and the row waited for until
   * it is completed or failed. A cell with `reload` has its fault hold a
   * request (the one after the create, or after the last part): once the
   * proxy holds it, the page is reloaded, and the upload it lists resumed
   * with Resume. A cell that throws is reported with its error; the others
   * still run.
   */
  async matrix() {
    /** @type {unknown} */
    const parsed = JSON.parse(required("MATRIX"));
    const cells = /** @type {{ name: string, size: number, reload?: boolean }[]} */ (parsed);
    const query = process.env.PAGE_QUERY ?? "";
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS, proxy: { server: required("PROXY_URL") } });
    const dir = mkdtempSync(join(tmpdir(), "onceupload-matrix-"));
    const out = [];
    try {
      for (const cell of cells) {
        const started = Date.now();
        const context = await browser.newContext({ viewport: { width: 900, height: 720 } });
        const page = await context.newPage();
        page.setDefaultTimeout(WAIT);
        page.on("pageerror", (e) => log(`${cell.name}: page error: ${e.message}`));
        /** @type {Record<string, unknown>} */
        const res = { name: cell.name };
        try {
          const { obs } = await observe(context, page);
          Object.assign(res, obs);
          const ready = async () => {
            await page.goto(new URL(`/?${query}`, APP_URL).toString());
            await page.locator("html[data-ready=true]").waitFor();
          };
          await ready();
          log(`${cell.name}: page ready after ${Date.now() - started} ms`);
          const file = makeFile(`${cell.name}.bin`, "application/octet-stream", cell.size);
          res.files = [fileInfo(file)];
          // Picked from disk: a buffer would cross the DevTools protocol, seconds for a few MiB.
          const path = join(dir, file.name);
          writeFileSync(path, file.buffer);
          await control(`/__arm?cell=${encodeURIComponent(cell.name)}`);
          await pickPath(page, path);
          /** @type {StatusEntry[]} */
          let before = [];
          if (cell.reload) {
            await untilHeld();
            res.before = (await rows(page))[0];
            res.storedBefore = await storedRecords(page);
            before = await statusLog(page);
            await page.reload();
            await page.locator("html[data-ready=true]").waitFor();
            const listed = (await rows(page))[0];
            res.listed = listed;
            await page.locator("li.upload").getByRole("button", { name: `Resume upload of ${file.name}` }).click();
          }
          await waitSettled(page, 1);
          log(`${cell.name}: settled after ${Date.now() - started} ms`);
          Object.assign(res, await finalState(page));
          res.statusLog = [...before, .../** @type {StatusEntry[]} */ (res.statusLog)];
        } catch (e) {
          res.error = e instanceof Error ? e.message : String(e);
          log(`${cell.name} failed:`, e);
          await diagnose(page);
        } finally {
          await control("/__arm").catch(() => undefined);
          await context.close();
        }
        log(`${cell.name}: ${Date.now() - started} ms`);
        out.push(res);
      }
    } finally {
      await browser.close();
      rmSync(dir, { recursive: true, force: true });
    }
    return { cells: out };
  },
});

Object.assign(scenarios, {
  /**
   * A file in parts, each read once and sent by the worker that read it:
   * what the page's thread receives from its workers (messages, and the
   * bytes in them), the parts held at once (holds answered less those
   * sent or released), and the part PUTs the page makes itself (its resource
   * timeline: a worker's requests are on the worker's). With OLD_WORKER=1 the
   * page gets an older copy of hash-worker.js (test/testdata), as an
   * application serving one beside a newer package: the page sends. With
   * AS_USER=1 the page does not say navigator.webdriver, as a user's
   * browser does not, and its workers send the bytes they read as they
   * are (they send Blobs of them under automation): asBlob counts the
   * hold jobs that asked for Blobs.
   */
  async "worker-sends"() {
    const file = bigFile();
    const old = process.env.OLD_WORKER === "1" ? readFileSync(new URL("testdata/hash-worker-v1.js.txt", import.meta.url), "utf8") : "";
    const asUser = process.env.AS_USER === "1";
    return withBrowser(async ({ context, page }) => {
      const { obs } = await observe(context, page);
      await context.addInitScript(({ old, asUser }) => {
        if (asUser) Object.defineProperty(Navigator.prototype, "webdriver", { get: () => false, configurable: true });
        const traffic = { messages: 0, withBytes: 0, bytes: 0, holds: 0, held: 0, maxHeld: 0, asBlob: 0 };
        /** @type {Window & { __workerTraffic?: typeof traffic }} */ (window).__workerTraffic = traffic;
        /** @param {unknown} v @param {number} depth @returns {number} */
        const bytesIn = (v, depth) => {
          if (v instanceof ArrayBuffer) return v.byteLength;
          if (ArrayBuffer.isView(v)) return v.byteLength;
          if (v instanceof Blob) return v.size;
          let n = 0;
          if (v && typeof v === "object" && depth < 5) for (const x of /** @type {unknown[]} */ (Object.values(v))) n += bytesIn(x, depth + 1);
          return n;
        };
        const Native = window.Worker;
        const oldUrl = old ? URL.createObjectURL(new Blob([old], { type: "text/javascript" })) : undefined;
        window.Worker = class extends Native {
          /** @param {string | URL} url @param {WorkerOptions} [opts] */
          constructor(url, opts) {
            super(oldUrl ?? url, opts);
            this.addEventListener("message", (/** @type {MessageEvent<unknown>} */ e) => {
              traffic.messages++;
              const b = bytesIn(e.data, 0);
              if (b > 0) {
                traffic.withBytes++;
                traffic.bytes += b;
              }
              const d = /** @type {{ type?: string, held?: boolean } | null} */ (e.data);
              if (d?.type === "done" && d.held) {
                traffic.holds++;
                traffic.held++;
                traffic.maxHeld = Math.max(traffic.maxHeld, traffic.held);
              }
            });
          }
          /** @override @param {unknown} m @param {Transferable[] | StructuredSerializeOptions} [t] */
          postMessage(m, t) {
            // A held part's bytes go with its PUT, or are dropped by a release.
            const job = /** @type {{ type?: string, hold?: boolean, asBlob?: boolean } | null} */ (m);
            if (job?.type === "put" || job?.type === "release") traffic.held--;
            if (job?.hold && job.asBlob) traffic.asBlob++;
            super.postMessage(m, Array.isArray(t) ? { transfer: t } : t);
          }
        };
      }, { old, asUser });
      await open(page);
      await pickPath(page, file.path);
      await waitSettled(page, 1);
      const workerTraffic = await page.evaluate(() => ({
        .../** @type {Window & { __workerTraffic?: object }} */ (window).__workerTraffic,
        // The page's own XHRs of parts (a worker's are on the worker's timeline, not the page's).
        pagePuts: performance.getEntriesByType("resource").filter((e) => /** @type {PerformanceResourceTiming} */ (e).initiatorType === "xmlhttprequest" && e.name.includes("partNumber=")).length,
      }));
      log(`worker traffic: ${JSON.stringify(workerTraffic)}`);
      return { files: [file], ...(await finalState(page)), workerTraffic, ...obs };
    });
  },
});

const run = /** @type {Record<string, () => Promise<object>>} */ (scenarios)[scenario];
if (!run) {
  console.error(`usage: node test/e2e.mjs <${Object.keys(scenarios).join("|")}>`);
  process.exit(2);
}
const started = Date.now();
try {
  const result = await run();
  log(scenario, "done in", Date.now() - started, "ms");
  process.stdout.write(JSON.stringify({ scenario, ...result }) + "\n");
} catch (e) {
  console.error(`[e2e] ${scenario} failed:`, e);
  process.exit(1);
}
