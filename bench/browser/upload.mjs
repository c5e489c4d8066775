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
// non-zero if the row shows failed. In every mode, after its last event it
// keeps the browser open until a line on stdin (or its end): the benchmark
// reads the browser's CPU from /proc first, where a process that exited is
// gone (reading it after the close lost whichever processes had ended).
//
// Chromium is driven through its DevTools protocol on a pipe, not through
// playwright: playwright enables the Network domain on every page, and with
// it Chromium copies every ArrayBuffer request body (base64) into a CDP
// event for the driver (8 MiB a part), a cost no user's browser has. This
// driver enables Page and Runtime only; it counts the part PUTs from the
// resource timing entries of the page and of its workers (which send the
// parts they read), each worker's reported through a binding as it comes.
//
//   APP_URL=http://127.0.0.1:PORT FILE_PATH=/tmp/x.bin MODE=complete node upload.mjs
import { spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const APP_URL = required("APP_URL");
const FILE_PATH = required("FILE_PATH");
const MODE = process.env.MODE ?? "complete";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const TRACE_PATH = process.env.TRACE_PATH;
// web/test/e2e.mjs's flags, and its viewport.
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=900,720"];

/** @param {string} name */
function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

/** @param {object} o */
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

/**
 * The part PUTs the page's workers sent, as their resource timing entries
 * came (epoch ms; see watchWorkers).
 * @type {{ part: string, start: number, end: number }[]}
 */
const workerPuts = [];

const profile = mkdtempSync(join(tmpdir(), "onceupload-bench-chromium-"));
const browser = launch();
let code = 0;
try {
  const page = await browser.page();
  // Page and Runtime only: no Network domain (see above).
  await Promise.all([page.send("Page.enable"), page.send("Runtime.enable")]);
  watchWorkers(browser, page);
  page.on("Runtime.exceptionThrown", (e) => console.error(`page error: ${e.exceptionDetails?.exception?.description ?? e.exceptionDetails?.text}`));
  await page.send("Page.addScriptToEvaluateOnNewDocument", {
    source: `(${(() => {
      const w = /** @type {any} */ (window);
      // A Chromium driven over its DevTools pipe says navigator.webdriver,
      // and the client then has its workers send Blobs (for drivers that
      // copy every request body of bytes: see HashJob.asBlob). This driver
      // copies none, and measures the browser a user has, where it is false.
      Object.defineProperty(Navigator.prototype, "webdriver", { get: () => false, configurable: true });
      document.addEventListener(
        "change",
        () => {
          w.__pickedAt ??= performance.timeOrigin + performance.now();
        },
        { capture: true },
      );
      // Every request's timing, for the part PUTs (a 1 GiB file has 128 parts; the default buffer keeps 250 entries).
      performance.setResourceTimingBufferSize(1_000_000);
      // The main thread's long tasks (over 50 ms), as epoch-ms spans.
      w.__longTasks = [];
      try {
        new PerformanceObserver((list) => {
          for (const e of list.getEntries()) w.__longTasks.push({ at: performance.timeOrigin + e.startTime, ms: e.duration });
        }).observe({ type: "longtask", buffered: true });
      } catch {
        // No longtask entries in this browser: none reported.
      }
    }).toString()})()`,
  });
  await page.send("Page.navigate", { url: new URL("/", APP_URL).toString() });
  await waitFor(page, `document.documentElement?.dataset.ready === "true"`, 30_000);
  const trace = TRACE_PATH ? await startTrace(page) : undefined;
  if (MODE === "probe") {
    await probe(page);
  } else {
    await setInputFiles(page, "#file-input", FILE_PATH);
  }
  const picked = await evaluate(page, `window.__pickedAt ?? 0`);
  if (MODE !== "probe") emit({ event: "picked", epochMs: picked });
  const failedPhase = `(() => {
    const row = document.querySelector("li.upload");
    if (row?.dataset.phase === "failed") throw new Error(document.querySelector("li.upload .status")?.textContent || "failed");
    return row?.dataset.phase;
  })()`;
  if (MODE === "probe") {
    // Done above.
    await told();
  } else if (MODE === "first-part") {
    const stop = told();
    // A failed upload ends the driver (non-zero), as in complete mode, so
    // that the benchmark stops watching S3 for a part that never comes.
    let stopped = false;
    const failed = waitFor(page, `${failedPhase} === "never"`, 0, () => stopped);
    failed.catch(() => {}); // after a stop, closing the browser rejects it
    await Promise.race([stop, failed]);
    stopped = true;
  } else {
    await waitFor(page, `${failedPhase} === "completed"`, 1_800_000);
    const completed = Date.now();
    emit({ event: "completed", epochMs: completed, ...(await longTasks(page, picked, completed)), ...(await partPuts(page)) });
    await told();
  }
  if (trace) await trace();
} catch (e) {
  console.error("bench browser upload failed:", e);
  code = 1;
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);

/**
 * Resolves on a line on stdin, or its end. After its last event the driver
 * keeps the browser open until then: the benchmark reads the browser's
 * CPU from /proc, which a process that exited no longer shows.
 */
function told() {
  const lines = createInterface({ input: process.stdin });
  return new Promise((resolve) => {
    const done = () => {
      lines.close();
      resolve(undefined);
    };
    lines.once("line", done);
    lines.once("close", done);
  });
}

/**
 * Chromium with a fresh profile, its DevTools protocol on fds 3 and 4
 * (--remote-debugging-pipe: messages are JSON ended by a NUL), in a process
 * group of its own (so that close ends every process of it).
 */
function launch() {
  const proc = spawn(CHROMIUM, [...FLAGS, "--remote-debugging-pipe", `--user-data-dir=${profile}`, "about:blank"], {
    stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"],
    detached: true,
  });
  const out = /** @type {import("node:stream").Writable} */ (proc.stdio[3]);
  const inp = /** @type {import("node:stream").Readable} */ (proc.stdio[4]);
  /** @type {Map<number, { resolve: (v: any) => void, reject: (e: Error) => void, method: string }>} */
  const calls = new Map();
  /** @type {Map<string, Map<string, ((params: any) => void)[]>>} */
  const listeners = new Map();
  let seq = 0;
  let buffered = "";
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  exited.then(() => {
    for (const c of calls.values()) c.reject(new Error(`Chromium exited during ${c.method}`));
    calls.clear();
  });
  inp.setEncoding("utf8");
  inp.on("data", (/** @type {string} */ chunk) => {
    buffered += chunk;
    for (let i; (i = buffered.indexOf("\0")) >= 0; ) {
      const m = JSON.parse(buffered.slice(0, i));
      buffered = buffered.slice(i + 1);
      const c = m.id !== undefined ? calls.get(m.id) : undefined;
      if (c) {
        calls.delete(m.id);
        if (m.error) c.reject(new Error(`${c.method}: ${m.error.message}`));
        else c.resolve(m.result);
      } else if (m.method) {
        for (const f of listeners.get(m.sessionId ?? "")?.get(m.method) ?? []) f(m.params);
      }
    }
  });
  /**
   * @param {string} method
   * @param {object} [params]
   * @param {string} [sessionId]
   * @returns {Promise<any>}
   */
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = ++seq;
      calls.set(id, { resolve, reject, method });
      out.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    });
  /** @param {string} sessionId */
  const session = (sessionId) => ({
    /** @param {string} method @param {object} [params] */
    send: (method, params) => send(method, params, sessionId),
    /** @param {string} event @param {(params: any) => void} f */
    on(event, f) {
      if (!listeners.has(sessionId)) listeners.set(sessionId, new Map());
      const byEvent = /** @type {Map<string, ((params: any) => void)[]>} */ (listeners.get(sessionId));
      byEvent.set(event, [...(byEvent.get(event) ?? []), f]);
    },
  });
  return {
    session,
    /** The first page's session. */
    async page() {
      for (let tries = 0; ; tries++) {
        const { targetInfos } = await send("Target.getTargets");
        const target = targetInfos.find((/** @type {any} */ t) => t.type === "page");
        if (target) return session((await send("Target.attachToTarget", { targetId: target.targetId, flatten: true })).sessionId);
        if (tries > 100) throw new Error("Chromium opened no page");
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async close() {
      await Promise.race([send("Browser.close").catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
      try {
        process.kill(-(proc.pid ?? 0), "SIGKILL");
      } catch {
        // Gone already.
      }
      await exited;
    },
  };
}

/** @typedef {{ send(method: string, params?: object): Promise<any>, on(event: string, f: (params: any) => void): void }} Session */

/**
 * The value of a page expression (awaited when it is a promise); throws
 * what the page threw.
 * @param {Session} page
 * @param {string} expression
 */
async function evaluate(page, expression) {
  const { result, exceptionDetails } = await page.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
  if (exceptionDetails) throw new Error(exceptionDetails.exception?.description ?? exceptionDetails.text);
  return result.value;
}

/**
 * Polls a page expression every 50 ms until it is true; throws what the
 * page threw, or after timeoutMs (0: never), or once stopped() says so.
 * @param {Session} page
 * @param {string} expression
 * @param {number} timeoutMs
 * @param {() => boolean} [stopped]
 */
async function waitFor(page, expression, timeoutMs, stopped = () => false) {
  const until = timeoutMs ? Date.now() + timeoutMs : Infinity;
  for (;;) {
    if (stopped()) return;
    if ((await evaluate(page, expression)) === true) return;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Picks a file into the page's input, as a user would (the input's change event follows).
 * @param {Session} page
 * @param {string} selector
 * @param {string} file
 */
async function setInputFiles(page, selector, file) {
  const { root } = await page.send("DOM.getDocument", { depth: 0 });
  const { nodeId } = await page.send("DOM.querySelector", { nodeId: root.nodeId, selector });
  if (!nodeId) throw new Error(`no ${selector} on the page`);
  await page.send("DOM.setFileInputFiles", { nodeId, files: [file] });
}

/**
 * Attaches to every worker the page starts (not pausing it) and has it
 * report its part PUTs' resource timing entries through a binding.
 * @param {ReturnType<typeof launch>} browser
 * @param {Session} page
 */
function watchWorkers(browser, page) {
  page.on("Target.attachedToTarget", (/** @type {any} */ e) => {
    if (e.targetInfo?.type !== "worker") return;
    const worker = browser.session(e.sessionId);
    worker.on("Runtime.bindingCalled", (/** @type {any} */ b) => {
      if (b.name === "__benchPut") workerPuts.push(JSON.parse(b.payload));
    });
    const observe = `new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const part = new URL(e.name).searchParams.get("partNumber");
        if (part && e.initiatorType === "xmlhttprequest")
          globalThis.__benchPut(JSON.stringify({ part, start: performance.timeOrigin + e.startTime, end: performance.timeOrigin + e.responseEnd }));
      }
    }).observe({ type: "resource", buffered: true })`;
    worker
      .send("Runtime.addBinding", { name: "__benchPut" })
      .then(() => worker.send("Runtime.evaluate", { expression: observe }))
      .catch(() => {}); // a worker that ended meanwhile
  });
  page.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: false, flatten: true }).catch((e) => console.error("no worker attach:", e));
}

/**
 * The part PUTs the page and its workers sent (resource timing: a part's
 * URL has a partNumber), and the most in flight at once: what the probe
 * copies.
 * @param {Session} page
 */
async function partPuts(page) {
  /** @type {{ part: string, start: number, end: number }[]} */
  const puts = await evaluate(
    page,
    `performance.getEntriesByType("resource").flatMap((e) => {
      const part = new URL(e.name).searchParams.get("partNumber");
      return part && e.initiatorType === "xmlhttprequest" ? [{ part, start: performance.timeOrigin + e.startTime, end: performance.timeOrigin + e.responseEnd }] : [];
    })`,
  );
  puts.push(...workerPuts);
  let inFlight = 0;
  let maxInFlight = 0;
  // Ends before starts at the same moment: a PUT sent as another is answered does not overlap it.
  const edges = puts.flatMap((p) => [{ at: p.start, d: 1 }, { at: p.end, d: -1 }]).sort((a, b) => a.at - b.at || a.d - b.d);
  for (const e of edges) maxInFlight = Math.max(maxInFlight, (inFlight += e.d));
  return { partPuts: new Set(puts.map((p) => p.part)).size, maxInFlight };
}

/**
 * The main thread's longest task between two epoch-ms moments, and how many
 * took over 50 ms (every "longtask" entry does).
 * @param {Session} page
 * @param {number} from
 * @param {number} to
 */
async function longTasks(page, from, to) {
  /** @type {{ at: number, ms: number }[]} */
  const all = await evaluate(page, `window.__longTasks ?? []`);
  const during = all.filter((t) => t.at + t.ms >= from && t.at <= to);
  return { longestTaskMs: Math.max(0, ...during.map((t) => t.ms)), longTasks: during.length };
}

/**
 * The raw probe: picks FILE_PATH into an input of its own and PUTs the
 * parts PROBE_PATH lists, `concurrency` at a time, as the client's
 * transport does (XMLHttpRequest, the signed headers but those the
 * browser sets, upload progress listened to), then sends the complete.
 * PROBE_BODY says what each PUT sends: "blob" (default: the file's slice,
 * which the browser process reads), "read-blob" (a worker of the page reads
 * the slice first, then the slice is sent: the client's read to hash it),
 * "read-buffer" (a worker reads the slice and hands the bytes back, which
 * are sent: a read shared by the hash and the PUT), "worker-buffer" (the
 * worker that read the slice sends the bytes itself, by its own XHR: no
 * bytes cross to the page), "worker-blob" (the same, a Blob made of the
 * bytes read). With PROBE_HASH=1 a worker that reads also hashes what it
 * read (crypto.subtle.digest), as the client's workers do.
 * @param {Session} page
 */
async function probe(page) {
  const plan = { ...JSON.parse(readFileSync(required("PROBE_PATH"), "utf8")), body: process.env.PROBE_BODY ?? "blob", hash: process.env.PROBE_HASH === "1" };
  await evaluate(
    page,
    `(() => {
      const input = document.createElement("input");
      input.type = "file";
      input.id = "bench-probe-file";
      input.hidden = true;
      document.body.append(input);
    })()`,
  );
  await setInputFiles(page, "#bench-probe-file", FILE_PATH);
  emit({ event: "probing", epochMs: Date.now() });
  const run = async (/** @type {any} */ plan) => {
    /** @type {{ partNumber: number, start: number, end: number, url: string, method?: string, headers?: Record<string, string> }[]} */
    const parts = plan.parts;
    const file = /** @type {HTMLInputElement} */ (document.getElementById("bench-probe-file")).files?.[0];
    if (!file) throw new Error("the probe's input holds no file");
    // transport.ts's FORBIDDEN: headers the browser sets itself.
    const forbidden = new Set(["content-length", "host", "connection", "expect", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "date", "origin", "referer"]);
    const now = () => performance.timeOrigin + performance.now();
    const loaded = new Map();
    // One reading worker per sender (every PROBE_BODY but blob). Given a
    // part to send ("worker-*"), it sends it by its own XHR, as put() below
    // does, and answers with the status; otherwise it hands the bytes back.
    const reader = `onmessage = async (e) => {
      const { slice, hash, send } = e.data;
      const b = await slice.arrayBuffer();
      if (hash) await crypto.subtle.digest("SHA-256", b);
      if (!send) return postMessage(b, [b]);
      const xhr = new XMLHttpRequest();
      xhr.open(send.method, send.url, true);
      for (const [k, v] of send.headers) xhr.setRequestHeader(k, v);
      xhr.responseType = "text";
      xhr.upload.onprogress = (e) => postMessage({ loaded: e.loaded });
      xhr.onload = () => postMessage({ status: xhr.status, text: xhr.responseText.slice(0, 300) });
      xhr.onerror = () => postMessage({ status: 0, text: "no answer" });
      xhr.send(send.blob ? new Blob([b]) : b);
    };`;
    const readerUrl = URL.createObjectURL(new Blob([reader], { type: "text/javascript" }));
    /** @param {Worker} w @param {Blob} slice @returns {Promise<ArrayBuffer>} */
    const read = (w, slice) =>
      new Promise((resolve) => {
        w.onmessage = (e) => resolve(e.data);
        w.postMessage({ slice, hash: plan.hash });
      });
    /** @param {Worker} w @param {typeof parts[number]} p @param {Blob} slice */
    const workerPut = (w, p, slice) =>
      new Promise((resolve, reject) => {
        w.onmessage = (e) => {
          if (e.data.loaded !== undefined) return loaded.set(p.partNumber, e.data.loaded);
          if (e.data.status >= 200 && e.data.status <= 299) resolve(undefined);
          else reject(new Error(`part ${p.partNumber}: HTTP ${e.data.status}: ${e.data.text}`));
        };
        const headers = Object.entries(p.headers ?? {}).filter(([k]) => !forbidden.has(k.toLowerCase()));
        w.postMessage({ slice, hash: plan.hash, send: { method: p.method ?? "PUT", url: p.url, headers, blob: plan.body === "worker-blob" } });
      });
    /** @param {typeof parts[number]} p @param {Blob | ArrayBuffer} body */
    const put = (p, body) =>
      new Promise((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open(p.method ?? "PUT", p.url, true);
        for (const [k, v] of Object.entries(p.headers ?? {})) if (!forbidden.has(k.toLowerCase())) xhr.setRequestHeader(k, v);
        xhr.responseType = "text";
        xhr.upload.onprogress = (e) => loaded.set(p.partNumber, e.loaded);
        xhr.onload = () =>
          xhr.status >= 200 && xhr.status <= 299 ? resolve(undefined) : reject(new Error(`part ${p.partNumber}: HTTP ${xhr.status}: ${xhr.responseText.slice(0, 300)}`));
        xhr.onerror = () => reject(new Error(`part ${p.partNumber}: no answer`));
        xhr.send(body);
      });
    let next = 0;
    const sender = async () => {
      const w = plan.body === "blob" ? undefined : new Worker(readerUrl);
      while (next < parts.length) {
        const p = parts[next++];
        const slice = file.slice(p.start, p.end);
        if (w && plan.body.startsWith("worker-")) {
          await workerPut(w, p, slice);
          continue;
        }
        const bytes = w ? await read(w, slice) : undefined;
        await put(p, plan.body === "read-buffer" && bytes ? bytes : slice);
      }
      w?.terminate();
    };
    const startMs = now();
    await Promise.all(Array.from({ length: Math.min(plan.concurrency, parts.length) }, sender));
    const putsDoneMs = now();
    const res = await fetch(plan.complete.url, { method: "POST", headers: { "Content-Type": "application/json" }, body: plan.complete.body });
    if (!res.ok) throw new Error(`complete: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    return { startMs, putsDoneMs, doneMs: now() };
  };
  const got = await evaluate(page, `(${run.toString()})(${JSON.stringify(plan)})`);
  emit({ event: "probed", startMs: got.startMs, putsDoneMs: got.putsDoneMs, epochMs: got.doneMs, ...(await longTasks(page, got.startMs, got.doneMs)) });
}

/**
 * Starts a Chromium trace of the page (CDP Tracing, the DevTools
 * timeline's categories); the function it returns ends it and writes it
 * to TRACE_PATH.
 * @param {Session} page
 */
async function startTrace(page) {
  const cdp = page;
  await cdp.send("Tracing.start", {
    transferMode: "ReturnAsStream",
    traceConfig: {
      includedCategories: ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing", "loading", "netlog", "toplevel"],
    },
  });
  return async () => {
    const done = new Promise((resolve) => cdp.on("Tracing.tracingComplete", resolve));
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
