// @ts-check
// Drives the scratch application (test/app: Uppy's Dashboard, Golden
// Retriever and @onceupload/uppy, installed from the packed tarballs) in
// Debian's Chromium (playwright-core, never a downloaded browser) through
// one scenario, and prints what the page and the browser did as one JSON
// line on stdout. It waits for what it must; uppy/browser_test.go starts
// the local stack, runs this once per scenario, and checks the output
// against the bucket and the API.
//
//   node test/e2e.mjs <scenario>
//   APP_URL   the application's origin (the stack's front door, serving its dist/)
//   CHROMIUM  the browser (default /usr/bin/chromium)
//   OUT_DIR   where a failed scenario's screenshot goes (default test-results)
//
// Scenarios (files on disk with a fixed modification time, so that Uppy
// gives a file picked again the same id):
//   reload  a small file (one PUT) and a multipart one (11 MiB, parts of
//           5 MiB) in one upload; part 2 is held until the small file has
//           succeeded and parts 1 and 3 are stored, then the page is
//           reloaded; Golden Retriever restores both (the large one without
//           its bytes: over its 10 MiB), the Dashboard asks for that one
//           again, it is picked again, and the Dashboard's button resumes.
//   ghost   the multipart file alone, the client keeping no copy
//           (?keepFileBytes=0), and the application resuming a restored
//           upload by itself (?autoResume=1): after the reload the restored
//           file has no bytes anywhere; the upload fails with the client's
//           message; the file is picked again in the Dashboard and retried.
//   cancel  the multipart file, part 2 held; the Dashboard's cancel
//           (uppy.cancelAll: every file removed).
//   readd   the multipart file, part 2 held, the page reloaded without
//           Golden Retriever (?goldenRetriever=0): the same file added
//           again resumes with its key.
//   pause   the multipart file, part 2 held; the Dashboard's Pause, then
//           its Resume (uppy.pauseAll, resumeAll).
//   error   the small file, its first create answered 429 too_many_uploads
//           (a page route: the stack's limit is not reached here, and that
//           answer is never retried); then the Dashboard's Retry.
import { randomBytes, createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const scenario = process.argv[2] ?? "";
const APP_URL = process.env.APP_URL ?? "";
if (!APP_URL) throw new Error("APP_URL is not set");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const OUT_DIR = process.env.OUT_DIR ?? "test-results";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const WAIT = 30_000;
const MiB = 1 << 20;
// The stack's S3 takes parts of 5 MiB at least: 11 MiB is three parts (5, 5, 1).
const MULTIPART = { multipartBytes: String(8 * MiB), partBytes: String(5 * MiB) };

const t0 = Date.now();
/** @param {unknown[]} args */
function log(...args) {
  console.error(`[e2e +${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...args);
}

const dir = mkdtempSync(join(tmpdir(), "onceupload-uppy-files-"));
/** @typedef {{ name: string, path: string, size: number, sha256: string, contentType: string }} TestFile */
/** @param {string} name @param {number} size @returns {TestFile} */
function makeFile(name, size) {
  const buffer = randomBytes(size);
  const path = join(dir, name);
  writeFileSync(path, buffer);
  const fixed = new Date("2026-01-02T03:04:05Z");
  utimesSync(path, fixed, fixed);
  return { name, path, size, sha256: createHash("sha256").update(buffer).digest("hex"), contentType: "application/octet-stream" };
}

/** An event the application recorded. @typedef {{type: string, name: string, fileId: string, message?: string, body?: Record<string, unknown>}} AppEvent */

/**
 * The application's events (run in the page).
 * @returns {AppEvent[]}
 */
function appEvents() {
  /** @type {unknown} */
  const parsed = JSON.parse(localStorage.getItem("app-events") ?? "[]");
  return /** @type {AppEvent[]} */ (parsed);
}

/**
 * What the browser sent: the API's creates (with their key) and deletes,
 * and every PUT to the storage (a part's number, or 0 for a single PUT),
 * each with the moment (before the interruption, or after: the reload, or
 * the Pause) and its answer.
 * @typedef {{ method: string, url: string, key: string, part: number, after: boolean, status: number }} Sent
 */

async function main() {
  const profile = mkdtempSync(join(tmpdir(), "onceupload-chromium-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 900, height: 720 } });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(WAIT);
  /** @type {string[]} */
  const consoleLines = [];
  page.on("console", (m) => {
    consoleLines.push(`${m.type()}: ${m.text()}`);
    log(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => {
    consoleLines.push(`pageerror: ${e.message}`);
    log(`page error: ${e.message}`);
  });
  /** Set when the upload is interrupted (the reload, the Pause): part 2 goes through from then on. */
  let after = false;
  /** @type {Sent[]} */
  const sent = [];
  /** @type {Map<import("playwright-core").Request, Sent>} */
  const byRequest = new Map();
  page.on("request", (r) => {
    const u = new URL(r.url());
    const api = u.origin === new URL(APP_URL).origin;
    const isCreate = api && r.method() === "POST" && u.pathname === "/uploads";
    const isDelete = api && r.method() === "DELETE" && u.pathname.startsWith("/uploads/");
    const isPut = !api && r.method() === "PUT";
    if (!isCreate && !isDelete && !isPut) return;
    const s = { method: r.method(), url: r.url(), key: r.headers()["idempotency-key"] ?? "", part: Number(u.searchParams.get("partNumber") ?? 0), after, status: 0 };
    sent.push(s);
    byRequest.set(r, s);
  });
  page.on("response", (resp) => {
    const s = byRequest.get(resp.request());
    if (s) s.status = resp.status();
  });

  /** @type {import("playwright-core").Route[]} */
  const held = [];
  // Part 2's PUTs are held (never answered) until the interruption (the reload, or the Pause, cancels them).
  const holdPart2 = () =>
    page.route(
      (u) => u.searchParams.get("partNumber") === "2",
      (route) => {
        if (after) void route.continue();
        else held.push(route);
      },
    );
  const stored = (/** @type {number} */ part) => sent.some((s) => s.part === part && s.status === 200);

  /** @param {Record<string, string>} query */
  const open = async (query) => {
    const u = new URL("/", APP_URL);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    await page.goto(u.toString());
    await page.locator("html[data-ready=true]").waitFor();
  };
  /** @param {TestFile[]} files */
  const pick = (files) => page.locator("input.uppy-Dashboard-input").first().setInputFiles(files.map((f) => f.path));
  /** Picks a file again for the restored file without bytes (the Dashboard's "Re-select"). @param {TestFile} f */
  const repick = async (f) => {
    // After an upload-error Uppy's notice lies over the item for 5 s (infoTimeout): the click is
    // given to the button itself rather than waiting for the notice to go.
    await page.locator(".uppy-Dashboard-Item.is-ghost .uppy-Dashboard-Item-reSelect").dispatchEvent("click");
    await pick([f]);
    await page.locator(".uppy-Dashboard-Item.is-ghost").waitFor({ state: "detached" });
  };
  /** The application's upload-success and upload-error events, in order, across reloads. */
  const events = () => page.evaluate(appEvents);
  /** @param {string} type @param {string} name */
  const waitEvent = (type, name) =>
    page.waitForFunction(
      ([t, n]) => {
        /** @type {unknown} */
        const parsed = JSON.parse(localStorage.getItem("app-events") ?? "[]");
        return /** @type {AppEvent[]} */ (parsed).some((e) => e.type === t && e.name === n);
      },
      [type, name],
    );
  const until = async (/** @type {() => boolean} */ ok, /** @type {string} */ what) => {
    const end = Date.now() + WAIT;
    while (!ok()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  /**
   * Waits until Golden Retriever has saved Uppy's state (at most every
   * 500 ms, in IndexedDB "uppy-blobs") with the upload under way and each
   * named file, the ones in `complete` marked complete: what the reload
   * restores.
   * @param {string[]} names @param {string[]} complete
   */
  const goldenRetrieverSaved = async (names, complete) => {
    const end = Date.now() + WAIT;
    for (;;) {
      const saved = await page.evaluate(
        () =>
          /** @type {Promise<string>} */ (
            new Promise((resolve) => {
              const req = indexedDB.open("uppy-blobs");
              req.onerror = () => resolve("");
              req.onsuccess = () => {
                const db = req.result;
                if (!db.objectStoreNames.contains("metadata")) return resolve("");
                const get = db.transaction("metadata").objectStore("metadata").get("app");
                get.onsuccess = () => {
                  /** @type {unknown} */
                  const rec = get.result;
                  resolve(/** @type {{metadata?: string} | undefined} */ (rec)?.metadata ?? "");
                };
                get.onerror = () => resolve("");
              };
            })
          ),
      );
      /** @type {{files?: Record<string, {name: string, progress: {uploadComplete?: boolean}}>, currentUploads?: Record<string, unknown>}} */
      const state = saved ? /** @type {typeof state} */ (/** @type {unknown} */ (JSON.parse(saved))) : {};
      const files = Object.values(state.files ?? {});
      const ok =
        Object.keys(state.currentUploads ?? {}).length > 0 &&
        names.every((n) => files.some((f) => f.name === n && (!complete.includes(n) || f.progress.uploadComplete)));
      if (ok) return;
      if (Date.now() > end) throw new Error(`timed out waiting for Golden Retriever to save ${names.join(", ")}`);
      await page.waitForTimeout(100);
    }
  };
  const reload = async () => {
    after = true;
    await page.reload();
    await page.locator("html[data-ready=true]").waitFor();
  };
  /** Records the client still holds (IndexedDB "onceupload"), and the plugin's links (localStorage). */
  const leftovers = () =>
    page.evaluate(async () => {
      /** @type {{key: string, phase: string}[]} */
      const records = await new Promise((resolve, reject) => {
        const req = indexedDB.open("onceupload");
        req.onerror = () => reject(req.error ?? new Error("indexedDB.open failed"));
        req.onsuccess = () => {
          const db = req.result;
          if (!db.objectStoreNames.contains("uploads")) return resolve([]);
          const all = db.transaction("uploads").objectStore("uploads").getAll();
          all.onsuccess = () => resolve(/** @type {{key: string, phase: string}[]} */ (all.result).map((r) => ({ key: r.key, phase: r.phase })));
          all.onerror = () => reject(all.error ?? new Error("getAll failed"));
        };
      });
      /** @type {Record<string, string>} */
      const links = {};
      for (let i = 0; i < localStorage.length; i++) {
        const k = localStorage.key(i) ?? "";
        if (k.startsWith("onceupload-uppy:")) links[k] = localStorage.getItem(k) ?? "";
      }
      return { records, links };
    });

  /** @type {TestFile[]} */
  let files;
  /** @type {Record<string, unknown>} */
  const seen = {};
  try {
    switch (scenario) {
      case "reload": {
        const small = makeFile("small.txt", 256 * 1024);
        const big = makeFile("big.bin", 11 * MiB);
        files = [small, big];
        await open(MULTIPART);
        await holdPart2();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await waitEvent("upload-success", small.name);
        await until(() => held.length > 0 && stored(1) && stored(3), "part 2 held, parts 1 and 3 stored");
        await goldenRetrieverSaved([small.name, big.name], [small.name]);
        log("reloading with part 2 held");
        await reload();
        await page.locator(".uppy-Dashboard-Item").nth(1).waitFor();
        seen.restored = await page.locator(".uppy-Dashboard-Item").count();
        seen.ghosts = await page.locator(".uppy-Dashboard-Item.is-ghost").count();
        // The Dashboard asks for the files it could not restore: picked
        // again, Uppy puts the bytes back into the restored file (the same id).
        await repick(big);
        // The Dashboard's button, which resumes the restored upload (restore-confirmed).
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await waitEvent("upload-success", big.name);
        break;
      }
      case "ghost": {
        const big = makeFile("big.bin", 11 * MiB);
        files = [big];
        // The application resumes a restored upload by itself (?autoResume=1), without waiting for the file to be picked again.
        await open({ ...MULTIPART, keepFileBytes: "0", autoResume: "1" });
        await holdPart2();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await until(() => held.length > 0 && stored(1) && stored(3), "part 2 held, parts 1 and 3 stored");
        await goldenRetrieverSaved([big.name], []);
        await reload();
        await waitEvent("upload-error", big.name);
        seen.ghosts = await page.locator(".uppy-Dashboard-Item.is-ghost").count();
        log("upload-error for the file without bytes; picking it again");
        // Picked again: Uppy puts its bytes back into the restored file (the same id); Retry resumes.
        await repick(big);
        log("picked again; Retry");
        await page.locator(".uppy-StatusBar-actionBtn--retry").click();
        await waitEvent("upload-success", big.name);
        break;
      }
      case "cancel": {
        const big = makeFile("big.bin", 11 * MiB);
        files = [big];
        await open(MULTIPART);
        await holdPart2();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await until(() => held.length > 0 && stored(1), "part 2 held, part 1 stored");
        seen.linkBefore = (await leftovers()).links;
        await page.locator('.uppy-StatusBar button[data-cy="cancel"]').click();
        await until(() => sent.some((s) => s.method === "DELETE" && s.status !== 0), "the upload's DELETE answered");
        break;
      }
      case "readd": {
        const big = makeFile("big.bin", 11 * MiB);
        files = [big];
        await open({ ...MULTIPART, goldenRetriever: "0" });
        await holdPart2();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await until(() => held.length > 0 && stored(1) && stored(3), "part 2 held, parts 1 and 3 stored");
        await reload();
        // Without Golden Retriever the reloaded page has no file: the same one is added again.
        seen.restored = await page.locator(".uppy-Dashboard-Item").count();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await waitEvent("upload-success", big.name);
        break;
      }
      case "pause": {
        const big = makeFile("big.bin", 11 * MiB);
        files = [big];
        await open(MULTIPART);
        await holdPart2();
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await until(() => held.length > 0 && stored(1) && stored(3), "part 2 held, parts 1 and 3 stored");
        const toggle = page.locator('.uppy-StatusBar button[data-cy="togglePauseResume"]');
        await toggle.click();
        after = true;
        await page.locator('.uppy-StatusBar button[data-cy="togglePauseResume"][title="Resume"]').waitFor();
        // Paused: the held PUT was aborted; nothing more is sent.
        await page.waitForTimeout(500);
        seen.sentWhilePaused = sent.filter((s) => s.after).length;
        await toggle.click();
        await waitEvent("upload-success", big.name);
        break;
      }
      case "error": {
        const small = makeFile("small.txt", 256 * 1024);
        files = [small];
        await open({});
        let refused = 0;
        await page.route(
          (u) => u.origin === new URL(APP_URL).origin && u.pathname === "/uploads",
          (route) => {
            if (route.request().method() !== "POST" || refused > 0) return void route.continue();
            refused++;
            void route.fulfill({
              status: 429,
              contentType: "application/json",
              body: JSON.stringify({ error: "too_many_uploads", message: "This tenant holds 3 unfinished multipart uploads, the most it may." }),
            });
          },
        );
        await pick(files);
        await page.locator(".uppy-StatusBar-actionBtn--upload").click();
        await waitEvent("upload-error", small.name);
        seen.errorShown = await page.locator(".uppy-Dashboard-Item.is-error").count();
        after = true;
        await page.locator(".uppy-StatusBar-actionBtn--retry").click();
        await waitEvent("upload-success", small.name);
        break;
      }
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
    // Late duplicates would come now.
    await page.waitForTimeout(1_000);
    const out = { scenario, files, events: await events(), sent, ...(await leftovers()), seen, console: consoleLines };
    process.stdout.write(JSON.stringify(out) + "\n");
  } catch (e) {
    log("failed; events:", JSON.stringify(await events().catch(String)), "sent:", JSON.stringify(sent));
    mkdirSync(OUT_DIR, { recursive: true });
    await page.screenshot({ path: join(OUT_DIR, `${scenario}-failed.png`) }).catch(() => undefined);
    throw e;
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
