/**
 * The demo page: pick or drop files, watch each one upload, resume what a
 * reload interrupted. The API base URL is the page's origin, or `?api=URL`.
 * An application of the package like any other: it imports
 * @onceupload/web's public entry only, and its build (build.mjs) copies the
 * hashing worker to assets/, which HASH_WORKER tells the client.
 */
import {
  ACTIVE_PHASES,
  IndexedDBStore,
  MemoryStore,
  STORAGE_UNANSWERED,
  type Step,
  TOO_MANY_UPLOADS,
  UploadClient,
  type UploadClientOptions,
  UploadError,
  type UploadEvent,
  type UploadRecord,
  describeError,
  normalizeBaseUrl,
  printable,
  toUploadError,
} from "@onceupload/web";

/** Uploads that run at once; the others wait their turn (their keys are minted and stored already). */
const CONCURRENCY = 3;
/** Where build.mjs puts the package's hash-worker.js, beside demo.js. */
const HASH_WORKER = new URL("./assets/hash-worker.js", import.meta.url);

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const list = $<HTMLUListElement>("uploads");
const empty = $<HTMLParagraphElement>("empty");
const notice = $<HTMLParagraphElement>("notice");
const input = $<HTMLInputElement>("file-input");
const dropzone = $<HTMLDivElement>("dropzone");
const tokenInput = $<HTMLInputElement>("token");
const clearHistoryButton = $<HTMLButtonElement>("clear-history");

/** Completed uploads listed again after a reload: the newest MAX_HISTORY, in localStorage. */
const HISTORY_KEY = "onceupload.history";
const MAX_HISTORY = 20;
/** Per upload key, the parts the storage held when last heard of: what an interrupted upload keeps. */
const PARTS_KEY = "onceupload.parts";
/** The access token, for this tab only (never in the URL, never in localStorage). */
const TOKEN_KEY = "onceupload.token";

interface HistoryEntry {
  key: string;
  filename: string;
  size: number;
  uploadId: string;
  storageKey: string;
  completedAt: number;
}

function readJSON<T>(storage: Storage | undefined, name: string, fallback: T): T {
  try {
    const v = storage?.getItem(name);
    return v ? (JSON.parse(v) as T) : fallback;
  } catch {
    return fallback;
  }
}

function writeJSON(storage: Storage | undefined, name: string, value: unknown) {
  try {
    storage?.setItem(name, JSON.stringify(value));
  } catch {
    // Storage full or disabled: the page still works, it only forgets more.
  }
}

const local = (): Storage | undefined => {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
};

function history(): HistoryEntry[] {
  const h = readJSON<unknown>(local(), HISTORY_KEY, []);
  return Array.isArray(h) ? (h as HistoryEntry[]) : [];
}

function addHistory(entry: HistoryEntry) {
  const h = history().filter((e) => e.key !== entry.key);
  h.push(entry);
  writeJSON(local(), HISTORY_KEY, h.slice(-MAX_HISTORY));
  updateClearHistory();
}

function updateClearHistory() {
  clearHistoryButton.hidden = history().length === 0;
}

type PartsKept = Record<string, { done: number; total: number }>;

function partsKept(key: string): { done: number; total: number } | undefined {
  return readJSON<PartsKept>(local(), PARTS_KEY, {})[key];
}

function savePartsKept(key: string, done: number, total: number) {
  const all = readJSON<PartsKept>(local(), PARTS_KEY, {});
  if (all[key]?.done === done && all[key]?.total === total) return;
  all[key] = { done, total };
  writeJSON(local(), PARTS_KEY, all);
}

function forgetPartsKept(key: string) {
  const all = readJSON<PartsKept>(local(), PARTS_KEY, {});
  if (!(key in all)) return;
  delete all[key];
  writeJSON(local(), PARTS_KEY, all);
}

/** The token typed into the page, if any, as an Authorization header value. */
function authorization(): string | undefined {
  const t = tokenInput.value.trim().replace(/^Bearer\s+/i, "");
  return t ? `Bearer ${t}` : undefined;
}

function setupToken() {
  try {
    tokenInput.value = sessionStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    // No sessionStorage: the token lasts as long as the page.
  }
  // Enter in the field must not reload the page.
  tokenInput.form?.addEventListener("submit", (e) => e.preventDefault());
  tokenInput.addEventListener("input", () => {
    try {
      const v = tokenInput.value.trim();
      if (v) sessionStorage.setItem(TOKEN_KEY, v);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // As above.
    }
  });
}

function showNotice(text: string) {
  notice.textContent = text;
  notice.hidden = false;
}

function apiBase(): string {
  const param = new URLSearchParams(location.search).get("api");
  if (!param) return location.origin;
  try {
    // One spelling per API: the uploads kept in IndexedDB are the API's, however ?api= spells it.
    return normalizeBaseUrl(param);
  } catch {
    showNotice(`The api parameter "${printable(param)}" is not an http(s) base URL; using ${location.origin}.`);
    return location.origin;
  }
}

/**
 * The client's tunings a test (or a trial by hand) may give in the page's
 * query, each a number: `retryBaseMs` and `retryMaxMs` (the backoff's first
 * and largest ceilings, of every request), `multipartBytes` and `partBytes`
 * (small files in parts). Anything else, or a value that is empty or not a
 * number, is ignored: the defaults are the product's.
 */
function tunings(): Partial<UploadClientOptions> {
  const q = new URLSearchParams(location.search);
  const num = (name: string) => {
    // Number("") and Number(" ") are 0: an empty value is no value.
    const raw = q.get(name)?.trim();
    if (!raw) return undefined;
    const v = Number(raw);
    return Number.isFinite(v) && v >= 0 ? v : undefined;
  };
  const out: Partial<UploadClientOptions> = {};
  const policy = { baseDelayMs: num("retryBaseMs"), maxDelayMs: num("retryMaxMs") };
  for (const k of ["baseDelayMs", "maxDelayMs"] as const) if (policy[k] === undefined) delete policy[k];
  if (Object.keys(policy).length > 0) out.createPolicy = out.putPolicy = policy;
  const multipartBytes = num("multipartBytes");
  const partBytes = num("partBytes");
  if (multipartBytes !== undefined) out.multipartBytes = multipartBytes;
  if (partBytes !== undefined) out.partBytes = partBytes;
  return out;
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${units[i]}`;
}

function formatDuration(seconds: number): string {
  const s = Math.max(1, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** What a retry is for, in the status line. */
const RETRY_WHAT: Record<Step, string> = { create: "create", put: "upload", parts: "part request", complete: "completion" };

/** Why an attempt failed, in a few words. */
function retryReason(e: UploadError): string {
  switch (e.kind) {
    case "network":
      // The client's message names the URL and what it can tell of why
      // ("no answer from http://…/uploads: …"), so a wrong ?api= shows;
      // a storage that has never answered this page gets the CORS hint.
      return e.url || e.code === STORAGE_UNANSWERED ? e.message : "no answer from the server";
    case "timeout":
      return "the server took too long";
    default:
      return e.code ? `HTTP ${e.status} ${e.code}` : `HTTP ${e.status}`;
  }
}

/**
 * The API refused to create the upload: the user holds as many unfinished
 * multipart uploads as the server allows. Nothing was created and waiting
 * does not help, so there is no retry: the row says what frees a place and
 * offers Try again, for when the user has.
 */
function tooManyUploads(e: UploadError | undefined): boolean {
  return e?.kind === "api" && e.status === 429 && e.code === TOO_MANY_UPLOADS;
}

const TOO_MANY_TEXT =
  "Not started: you have too many unfinished uploads. Finish or discard some of them (Resume or Discard on their rows, here or in another tab), then press Try again.";

/** A failure's text; a 401 or 403 from the API points at the token field. */
function failedText(e: UploadError): string {
  const text = describeError(e);
  if (e.kind !== "api" || (e.status !== 401 && e.status !== 403)) return `Failed: ${text}`;
  return `Failed: ${text}${/[.!?]$/.test(text) ? "" : "."} Check the access token below.`;
}

/** A tiny semaphore for CONCURRENCY: a finished upload hands its slot to the next in line. */
let active = 0;
const waiting: (() => void)[] = [];
async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (active < CONCURRENCY) active++;
  else await new Promise<void>((r) => waiting.push(r));
  try {
    return await fn();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else active--;
  }
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
}

let seq = 0;

/** Which buttons a row shows ("refused": the create was refused for too many unfinished uploads). */
type Actions = "running" | "discarding" | "resumable" | "refused" | "final" | "done";

/** One file's row in the list. */
class Row {
  readonly li: HTMLLIElement;
  private readonly nameId = `upload-name-${++seq}`;
  private readonly progress: HTMLProgressElement;
  private readonly status: HTMLParagraphElement;
  private readonly percent: HTMLSpanElement;
  private readonly keyCode: HTMLElement;
  private readonly idCode: HTMLElement;
  private readonly idWrap: HTMLSpanElement;
  private readonly details: HTMLParagraphElement;
  private readonly partsText: HTMLSpanElement;
  /** Whether the status line shows a retry (so that progress puts "Uploading…" back). */
  private retrying = false;
  /** The PUT found the file stored already (S3's 412 to If-None-Match): said while confirming. */
  private alreadyStored = false;
  /** Parts the storage held when this run first said (for the "first-part-stored" mark). */
  private partsAtStart?: number;
  private firstPartMarked = false;
  /** The status line says the parts stored are being checked (until the upload's progress). */
  private checking = false;
  private readonly actions: HTMLDivElement;
  private countdown?: ReturnType<typeof setInterval>;
  private controller?: AbortController;
  /** Recent (time, bytes sent) samples, for the speed and the time left. */
  private samples: { t: number; loaded: number }[] = [];
  private readonly size: number;
  key?: string;

  constructor(
    private readonly client: UploadClient,
    readonly filename: string,
    size: number,
  ) {
    this.size = size;
    this.progress = el("progress", { max: 100, value: 0 });
    this.progress.setAttribute("aria-labelledby", this.nameId);
    this.status = el("p", { className: "status" });
    this.status.setAttribute("role", "status");
    this.status.setAttribute("aria-live", "polite");
    this.status.setAttribute("aria-atomic", "true");
    this.percent = el("span", { className: "percent" });
    this.percent.setAttribute("aria-hidden", "true");
    this.keyCode = el("code", { className: "key" });
    this.idCode = el("code", { className: "upload-id" });
    this.idWrap = el("span", {}, "upload ", this.idCode);
    this.idWrap.hidden = true;
    this.actions = el("div", { className: "actions" });
    this.partsText = el("span", { className: "parts" });
    this.partsText.hidden = true;
    this.details = el("p", { className: "details" }, el("span", {}, "key ", this.keyCode), this.idWrap, this.partsText);
    this.details.hidden = true;
    this.li = el(
      "li",
      { className: "upload" },
      // Escaped: a name's bidi controls must not make it read as another (invoice\u202Efdp.exe as "invoiceexe.pdf").
      el("div", { className: "top" }, el("span", { className: "name", id: this.nameId }, printable(filename)), el("span", { className: "size" }, formatBytes(size))),
      this.progress,
      el("div", { className: "mid" }, this.status, this.percent),
      this.details,
      this.actions,
    );
    list.prepend(this.li);
    empty.hidden = true;
  }

  setRecord(r: Pick<UploadRecord, "key" | "uploadId" | "phase">) {
    this.key = r.key;
    this.li.dataset.key = r.key;
    this.keyCode.textContent = r.key;
    this.details.hidden = false;
    if (r.uploadId) {
      this.li.dataset.uploadId = r.uploadId;
      this.idCode.textContent = r.uploadId;
      this.idWrap.hidden = false;
    }
    // The end states (completed, failed, paused) are shown by their own
    // handlers, with their text, in one go.
    if (r.phase !== "completed" && r.phase !== "failed" && r.phase !== "paused") this.li.dataset.phase = r.phase;
  }

  setPhase(phase: string) {
    this.li.dataset.phase = phase;
  }

  setStatus(text: string) {
    this.stopCountdown();
    this.retrying = false;
    if (this.status.textContent !== text) this.status.textContent = text;
  }

  /** The bar shows the step under way: preparing (hashing), then sending. */
  setProgress(loaded: number, total: number, extra = "") {
    const pct = total > 0 ? Math.floor((loaded / total) * 100) : 0;
    this.progress.value = pct;
    const text = extra ? `${extra} · ${pct} %` : `${pct} %`;
    if (this.percent.textContent !== text) this.percent.textContent = text;
  }

  /** Sending: the bar, bytes sent, the speed over the last few seconds and the time left. */
  private sendProgress(loaded: number, total: number) {
    const now = performance.now();
    const last = this.samples[this.samples.length - 1];
    if (last && loaded < last.loaded) this.samples = [];
    this.samples.push({ t: now, loaded });
    while (this.samples.length > 2 && now - this.samples[0].t > 5000) this.samples.shift();
    const first = this.samples[0];
    const dt = (now - first.t) / 1000;
    let text = `${formatBytes(loaded)} of ${formatBytes(total)}`;
    if (dt >= 1 && loaded > first.loaded && loaded < total) {
      const rate = (loaded - first.loaded) / dt;
      text += ` · ${formatBytes(Math.round(rate))}/s · ${formatDuration((total - loaded) / rate)} left`;
      this.li.dataset.speed = String(Math.round(rate));
    }
    this.setProgress(loaded, total, text);
  }

  /** What the storage keeps of an interrupted multipart upload, as last heard of here. */
  private keptText(rec: UploadRecord): string {
    const kept = rec.partSize ? partsKept(rec.key) : undefined;
    if (!kept || !rec.partSize) return "";
    this.setParts(kept.done, kept.total);
    const bytes = Math.min(kept.done * rec.partSize, rec.size);
    this.setProgress(bytes, rec.size);
    return `${kept.done} of ${kept.total} parts stored, ${formatBytes(bytes)}`;
  }

  /** Multipart uploads: how many parts the storage holds. */
  setParts(done: number, total: number) {
    this.li.dataset.partsDone = String(done);
    this.li.dataset.partCount = String(total);
    this.partsText.textContent = `${done} of ${total} parts stored`;
    this.partsText.hidden = false;
  }

  clearProgress() {
    this.progress.value = 0;
    this.percent.textContent = "";
    this.samples = [];
    delete this.li.dataset.speed;
  }

  retryCountdown(what: string, delayMs: number, reason: string) {
    this.stopCountdown();
    this.retrying = true;
    const until = Date.now() + delayMs;
    const tick = () => {
      const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      this.status.textContent = `Retrying ${what} in ${s} s (${reason})`;
      if (s === 0) this.stopCountdown();
    };
    tick();
    this.countdown = setInterval(tick, 1000);
  }

  private stopCountdown() {
    if (this.countdown !== undefined) clearInterval(this.countdown);
    this.countdown = undefined;
  }

  /** Buttons for the row's state. */
  setActions(kind: Actions, rec?: UploadRecord) {
    // Keyboard users keep their place: focus moves to the row's new first button (or the row).
    const hadFocus = this.li.contains(document.activeElement) && document.activeElement !== this.li;
    this.setButtons(kind, rec);
    if (hadFocus) {
      const first = this.actions.querySelector("button");
      if (first) first.focus();
      else {
        this.li.tabIndex = -1;
        this.li.focus();
      }
    }
  }

  private setButtons(kind: Actions, rec?: UploadRecord) {
    this.actions.replaceChildren();
    const button = (text: string, label: string, onClick: () => void, primary = false) => {
      const b = el("button", { type: "button", textContent: text, className: primary ? "primary" : "" });
      b.setAttribute("aria-label", label.replace("%s", printable(this.filename)));
      b.addEventListener("click", onClick);
      this.actions.append(b);
      return b;
    };
    if (kind === "running") {
      button("Pause", "Pause upload of %s", () => this.controller?.abort());
      return;
    }
    if (kind === "discarding") return;
    if ((kind === "resumable" || kind === "refused") && rec) {
      const [text, label] = kind === "resumable" ? ["Resume", "Resume upload of %s"] : ["Try again", "Try uploading %s again"];
      if (this.client.hasFile(rec)) {
        button(text, label, () => void this.run(), true);
      } else {
        // The browser did not keep the file: the user picks it again, and it is checked against the record.
        const picker = el("input", { type: "file", hidden: true });
        picker.addEventListener("change", () => {
          const f = picker.files?.[0];
          if (f) void this.run(f);
        });
        this.actions.append(picker);
        button(`${text}… (pick the same file)`, `${label} (pick the same file)`, () => picker.click(), true);
      }
    }
    if (kind === "done") return;
    if (rec?.partSize && (rec.uploadId || rec.sent)) {
      // The storage may hold parts of it: Discard deletes them, where Remove would leave them behind.
      button("Discard", "Discard upload of %s", () => void this.discard());
    } else {
      button("Remove", "Remove %s", () => void this.remove());
    }
  }

  private async discard() {
    if (!this.key) return;
    this.setActions("discarding");
    this.setStatus("Discarding…");
    try {
      const outcome = await this.client.discard(this.key);
      if (outcome === "completed") {
        // Too late: it completed meanwhile (another tab). Say so rather than pretend it is gone.
        this.setPhase("completed");
        this.setStatus("Completed before it could be discarded");
        this.setActions("done");
        return;
      }
      forgetPartsKept(this.key);
      this.li.remove();
      empty.hidden = list.children.length > 0;
    } catch (e) {
      const err = toUploadError(e);
      this.setStatus(`Discard failed: ${describeError(err)}`);
      const rec = await this.client.get(this.key).catch(() => undefined);
      this.setActions(rec ? "resumable" : "final", rec);
    }
  }

  private async remove() {
    if (this.key) {
      forgetPartsKept(this.key);
      await this.client.remove(this.key).catch(() => undefined);
    }
    this.li.remove();
    empty.hidden = list.children.length > 0;
  }

  /** Shows a stored record as it was left (after a reload). */
  showStored(rec: UploadRecord) {
    this.setRecord(rec);
    const kept = this.keptText(rec);
    if (ACTIVE_PHASES.has(rec.phase)) {
      const head = kept ? `Interrupted with ${kept}.` : "Interrupted.";
      this.setStatus(
        this.client.hasFile(rec)
          ? `${head} Resume continues with the same key.`
          : `${head} Resume, then pick the same file again${rec.partSize ? (kept ? ": only the missing parts are sent" : ": the parts already stored are kept") : ""}.`,
      );
      this.setActions("resumable", rec);
    } else if (rec.phase === "paused") {
      this.setPhase("paused");
      this.setStatus(kept ? `Paused with ${kept}. Resume continues with the same key.` : "Paused. Resume continues with the same key.");
      this.setActions("resumable", rec);
    } else {
      this.setPhase(rec.phase);
      const err = rec.error ? UploadError.fromJSON(rec.error) : undefined;
      if (tooManyUploads(err)) {
        this.setStatus(TOO_MANY_TEXT);
        this.setActions("refused", rec);
        return;
      }
      this.setStatus(err ? failedText(err) : "Failed: unknown error");
      this.setActions(err?.retryable ? "resumable" : "final", rec);
    }
  }

  onEvent = (e: UploadEvent) => {
    switch (e.type) {
      case "phase":
        this.setRecord(e.record);
        switch (e.phase) {
          case "hashing":
            this.setStatus("Preparing…");
            break;
          case "ready":
            this.setStatus("Waiting to upload…");
            break;
          case "creating":
            this.clearProgress();
            this.setStatus("Creating upload…");
            break;
          case "uploading":
            this.setStatus("Uploading…");
            break;
          case "completing":
            this.setStatus(this.alreadyStored ? "Already stored; confirming…" : "Confirming…");
            break;
          case "completed":
          case "paused":
          case "failed":
            // Said by the "completed" event, or by failed() when add() or upload() rejects.
            break;
        }
        break;
      case "hash-progress":
        this.setProgress(e.loaded, e.total);
        break;
      case "hashed-in":
        // Where the file (or its parts) was hashed: the page's thread means the worker did not start.
        this.li.dataset.hashedIn = e.where;
        break;
      case "verify-progress":
        // Resuming with the file picked again: the parts stored are checked against it first.
        this.setStatus("Checking the parts stored against this file…");
        this.checking = true;
        this.setProgress(e.loaded, e.total);
        break;
      case "upload-progress":
        // Bytes moving again after a retry or a wait for the network, or the check of the parts stored done.
        if ((this.retrying && e.loaded > 0) || this.checking) {
          this.checking = false;
          this.setStatus("Uploading…");
        }
        this.sendProgress(e.loaded, e.total);
        break;
      case "parts":
        // The first "parts" of a run is the listing (or none held); a larger count is a part this run stored.
        if (this.partsAtStart === undefined) this.partsAtStart = e.done;
        else if (e.done > this.partsAtStart && !this.firstPartMarked) {
          this.firstPartMarked = true;
          this.mark("first-part-stored");
        }
        this.setParts(e.done, e.total);
        if (this.key) savePartsKept(this.key, e.done, e.total);
        break;
      case "created":
        this.li.dataset.replay = String(e.replay);
        this.mark("created");
        break;
      case "retry":
        if (e.offline) {
          this.setStatus("Waiting for the network…");
          this.retrying = true;
        } else {
          this.retryCountdown(RETRY_WHAT[e.step], e.delayMs, retryReason(e.error));
        }
        break;
      case "refresh":
        this.setStatus("The upload link expired; getting a fresh one with the same key…");
        break;
      case "stored":
        // A retried PUT whose first attempt landed (its answer lost) meets
        // S3's 412: the file is there, which is success, not a failure.
        this.alreadyStored = e.outcome === "already-stored";
        if (this.alreadyStored) this.setStatus("Already stored; confirming…");
        break;
      case "completed":
        this.mark("completed");
        this.setPhase("completed");
        this.setProgress(1, 1);
        this.setStatus("Completed");
        this.idCode.textContent = e.result.uploadId;
        this.idWrap.hidden = false;
        this.li.dataset.uploadId = e.result.uploadId;
        this.li.dataset.storageKey = e.result.storageKey;
        this.setActions("done");
        if (this.key) {
          forgetPartsKept(this.key);
          addHistory({ key: this.key, filename: this.filename, size: this.size, uploadId: e.result.uploadId, storageKey: e.result.storageKey, completedAt: Date.now() });
        }
        break;
      case "failed":
        break;
    }
  };

  private async failed(e: unknown) {
    const err = toUploadError(e);
    const rec = this.key ? await this.client.get(this.key).catch(() => undefined) : undefined;
    if (err.kind === "aborted") {
      const kept = rec ? this.keptText(rec) : "";
      if (rec && !rec.partSize) {
        // A single PUT cut short: the storage keeps none of it.
        this.clearProgress();
        this.setStatus("Paused. Resume continues with the same key and sends the file again from the start.");
      } else {
        this.setStatus(kept ? `Paused with ${kept}. Resume continues with the same key.` : "Paused. Resume continues with the same key.");
      }
    } else if (tooManyUploads(err)) {
      this.setStatus(TOO_MANY_TEXT);
    } else {
      this.setStatus(failedText(err));
    }
    this.setActions(!rec ? "final" : tooManyUploads(err) ? "refused" : err.kind === "aborted" || err.retryable ? "resumable" : "final", rec);
    this.setPhase(err.kind === "aborted" ? "paused" : "failed");
  }

  /** A completed upload from the history (after a reload). */
  showCompleted(h: HistoryEntry) {
    this.key = h.key;
    this.li.dataset.key = h.key;
    this.li.dataset.history = "true";
    this.keyCode.textContent = h.key;
    this.details.hidden = false;
    this.idCode.textContent = h.uploadId;
    this.idWrap.hidden = false;
    this.li.dataset.uploadId = h.uploadId;
    this.li.dataset.storageKey = h.storageKey;
    this.setPhase("completed");
    this.setProgress(1, 1);
    this.setStatus(`Completed ${new Date(h.completedAt).toLocaleString()}`);
    this.setActions("done");
  }

  /**
   * Tells the page's listeners when this upload reached a point, for
   * measurements (make bench): a window event "onceupload:timing" whose
   * detail is { mark, key, filename, size, at }, `at` in ms since the epoch
   * (performance.timeOrigin + performance.now()). Marks: "picked" (the row
   * starts; no key yet), "created" (each create's answer), "first-part-stored"
   * (a multipart run's first part acknowledged by the storage), "completed".
   */
  private mark(mark: string) {
    const detail = { mark, key: this.key, filename: this.filename, size: this.size, at: performance.timeOrigin + performance.now() };
    window.dispatchEvent(new CustomEvent("onceupload:timing", { detail }));
  }

  /** A freshly picked file: key, hash (a single PUT's), upload. */
  async start(file: File) {
    this.mark("picked");
    this.controller = new AbortController();
    this.setActions("running");
    // A file for a single PUT is hashed first ("Preparing…", from its phase); a larger one starts at once.
    this.setStatus("Starting…");
    let rec: UploadRecord;
    try {
      rec = await this.client.add(file, { signal: this.controller.signal, onEvent: this.onEvent });
    } catch (e) {
      await this.failed(e);
      return;
    }
    await this.run(undefined, rec);
  }

  /** Runs or resumes the upload of this row's record. */
  async run(file?: File, rec?: UploadRecord) {
    if (!this.key) return;
    this.controller = new AbortController();
    this.alreadyStored = false;
    this.partsAtStart = undefined;
    this.firstPartMarked = false;
    this.checking = false;
    this.setActions("running");
    if (!rec || rec.phase !== "ready") this.setStatus("Resuming…");
    const key = this.key;
    try {
      await slot(() => this.client.upload(key, { file, signal: this.controller!.signal, onEvent: this.onEvent }));
    } catch (e) {
      await this.failed(e);
    }
  }
}

function main() {
  const base = apiBase();
  $<HTMLElement>("api-base").textContent = base;
  setupToken();
  updateClearHistory();
  clearHistoryButton.addEventListener("click", () => {
    try {
      local()?.removeItem(HISTORY_KEY);
    } catch {
      // Nothing kept, nothing to clear.
    }
    for (const li of list.querySelectorAll<HTMLLIElement>("li.upload[data-phase=completed]")) li.remove();
    empty.hidden = list.children.length > 0;
    updateClearHistory();
    $<HTMLElement>("file-input").focus();
  });

  const tuned = tunings();
  // The client, once we know whether IndexedDB works here. Files picked
  // before that wait for it.
  const ready: Promise<UploadClient> = (async () => {
    const client = new UploadClient({ apiBase: base, store: new IndexedDBStore(), authorization, hashWorkerUrl: HASH_WORKER, ...tuned });
    let stored: UploadRecord[];
    try {
      stored = await client.pending();
    } catch (e) {
      showNotice(`This browser cannot keep uploads across reloads here (${toUploadError(e).message}).`);
      return new UploadClient({ apiBase: base, store: new MemoryStore(), authorization, hashWorkerUrl: HASH_WORKER, ...tuned });
    }
    // Oldest at the bottom: rows are prepended. Completed ones first, below the unfinished.
    const pendingKeys = new Set(stored.map((r) => r.key));
    for (const h of history()) if (!pendingKeys.has(h.key)) new Row(client, h.filename, h.size).showCompleted(h);
    for (const rec of stored) new Row(client, rec.filename, rec.size).showStored(rec);
    return client;
  })();

  const addFiles = (files: FileList | File[] | null) => {
    const picked = Array.from(files ?? []);
    void ready.then((client) => {
      for (const f of picked) void new Row(client, f.name, f.size).start(f);
    });
  };
  input.addEventListener("change", () => {
    addFiles(input.files);
    input.value = "";
  });

  // Dropping anywhere else must not navigate away from the page.
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => e.preventDefault());
  let depth = 0;
  dropzone.addEventListener("dragenter", (e) => {
    e.preventDefault();
    depth++;
    dropzone.classList.add("over");
  });
  dropzone.addEventListener("dragleave", () => {
    if (--depth <= 0) {
      depth = 0;
      dropzone.classList.remove("over");
    }
  });
  dropzone.addEventListener("dragover", (e) => {
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = "copy";
  });
  dropzone.addEventListener("drop", (e) => {
    e.preventDefault();
    depth = 0;
    dropzone.classList.remove("over");
    addFiles(e.dataTransfer?.files ?? null);
  });
  // Stored uploads are listed: the page is ready.
  void ready.then(() => {
    document.documentElement.dataset.ready = "true";
  });
}

main();
