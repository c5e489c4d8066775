/**
 * @onceupload/uppy: an Uppy uploader plugin that sends each file through
 * onceupload's browser client (@onceupload/web): one Idempotency-Key per
 * file, kept across reloads; SHA-256 on the single PUT or on every part;
 * resume with only the missing parts sent; `upload-success` once per file,
 * and only for a completed upload.
 *
 * ```ts
 * import Uppy from "@uppy/core";
 * import OnceUpload from "@onceupload/uppy";
 * new Uppy().use(OnceUpload, { apiBase: "https://api.example.com", hashWorkerUrl: "/assets/hash-worker.js" });
 * ```
 *
 * How Uppy's actions map to the client's:
 * - the uploader (`addUploader`): per file, the key linked to the Uppy
 *   file id (KeyStore), or `client.add(file)` (which mints and stores it),
 *   then `client.upload(key, {signal, onEvent})`;
 * - `upload-pause` (a file's pause), `pause-all`: the run's AbortSignal
 *   (the client's Pause: the record stays "paused"); unpause, `resume-all`:
 *   `client.upload(key)` again, which sends only what the storage lacks;
 * - `upload-retry`, `retry-all`: Uppy calls the uploader again, which
 *   resumes with the file's key;
 * - `file-removed` (a file's cancel, and `cancelAll`, which removes every
 *   file): the run stops and `client.discard(key)` deletes what the server
 *   holds and forgets the key;
 * - the client's `upload-progress` events: Uppy's `upload-progress`; its
 *   `hash-progress` and `verify-progress`: Uppy's `preprocess-progress`;
 *   its completion: `upload-success` (the body is the API's completed
 *   upload, with the key); its UploadError: `upload-error`, with
 *   `describeError`'s sentence as the message.
 */
import { BasePlugin, type Body, type Meta, type PluginOpts, type Uppy, type UppyFile } from "@uppy/core";
import { type CompletedUpload, type UploadClientOptions, type UploadEvent, UploadClient, UploadError, describeError, toUploadError } from "@onceupload/web";
import { type KeyEntry, type KeyStore, MemoryKeyStore, WebStorageKeyStore, defaultKeyStore } from "./keys.js";

export { MemoryKeyStore, WebStorageKeyStore };
export type { KeyEntry, KeyStore };

/** What the plugin needs of an UploadClient (a test gives a fake). */
export type Client = Pick<UploadClient, "apiBase" | "add" | "get" | "upload" | "hasFile" | "discard">;

/** The options: an UploadClient's (apiBase, authorization, hashWorkerUrl, …), or a client of your own. */
export type OnceUploadOptions = PluginOpts &
  Partial<UploadClientOptions> & {
    /** An UploadClient to upload with; else one is made from the other options (apiBase is then required). */
    client?: Client;
    /** Files uploading at once (each sends up to the client's partConcurrency parts). Default 3. */
    limit?: number;
    /** Where each Uppy file's key is kept. Default: localStorage (memory where there is none). */
    keys?: KeyStore;
    /**
     * How long a completed upload's link is kept, so that the same file,
     * added again, is answered with that upload instead of sent again. Default 24 h.
     */
    rememberCompletedMs?: number;
  };

/** The body of `upload-success`: the API's completed upload, and the key it was made with. */
export type OnceUploadBody = CompletedUpload & { idempotencyKey: string };

/** Uppy's error shape, with the client's error beside its sentence. */
export interface OnceUploadError extends Error {
  /** The client's error: kind, status, code, retryable. */
  cause: UploadError;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Where one file's run stands. */
type RunState = "waiting" | "running" | "paused" | "settled";

export default class OnceUpload<M extends Meta, B extends Body> extends BasePlugin<OnceUploadOptions, M, B> {
  /** The package's version (test/plugin.test.ts holds it to package.json's). */
  static VERSION = "0.1.0";

  readonly client: Client;
  readonly keys: KeyStore;
  private readonly limit: number;
  private readonly rememberCompletedMs: number;
  /** The files this page is uploading (or holds paused), by Uppy file id. */
  private readonly runs = new Map<string, FileRun<M, B>>();
  private active = 0;
  /** Runs waiting for a place (see slot). */
  private waiting: (() => void)[] = [];

  constructor(uppy: Uppy<M, B>, opts: OnceUploadOptions) {
    super(uppy, opts);
    this.type = "uploader";
    this.id = opts.id ?? "OnceUpload";
    if (opts.client) {
      this.client = opts.client;
    } else {
      if (!opts.apiBase) throw new TypeError("@onceupload/uppy: give apiBase (the onceupload API's base URL), or a client");
      this.client = new UploadClient({ ...opts, apiBase: opts.apiBase });
    }
    this.keys = opts.keys ?? defaultKeyStore(this.client.apiBase);
    this.limit = Math.max(1, opts.limit ?? 3);
    this.rememberCompletedMs = opts.rememberCompletedMs ?? DAY_MS;
  }

  override install(): void {
    const { capabilities } = this.uppy.getState();
    // Pause and resume (the Dashboard shows them), and cancelling one file during an upload.
    this.uppy.setState({ capabilities: { ...capabilities, resumableUploads: true, individualCancellation: true } });
    this.uppy.addUploader(this.upload);
    this.uppy.on("upload-pause", this.onPause);
    this.uppy.on("pause-all", this.onPauseAll);
    this.uppy.on("resume-all", this.onResumeAll);
    this.uppy.on("file-removed", this.onRemoved);
    this.forgetOldResults();
  }

  override uninstall(): void {
    this.uppy.removeUploader(this.upload);
    this.uppy.off("upload-pause", this.onPause);
    this.uppy.off("pause-all", this.onPauseAll);
    this.uppy.off("resume-all", this.onResumeAll);
    this.uppy.off("file-removed", this.onRemoved);
    // Stopped as a Pause: the keys stay, and a later page resumes them.
    for (const run of this.runs.values()) run.pause();
  }

  /** The uploader Uppy calls with the files of an upload (a new one, a retry, or one Golden Retriever restored). */
  private readonly upload = async (fileIDs: string[]): Promise<void> => {
    const files = this.uppy
      .getFilesByIds(fileIDs)
      // Already completed (Golden Retriever restores a batch whole): not sent again, nothing emitted.
      // With an error: Uppy clears it before a retry; until then the file waits.
      .filter((f) => !f.progress.uploadComplete && !f.error);
    if (files.length === 0) return;
    this.uppy.emit(
      "upload-start",
      files.filter((f) => !f.progress.uploadStarted || !f.isRestored),
    );
    await Promise.allSettled(files.map((f) => this.runFile(f)));
  };

  private runFile(file: UppyFile<M, B>): Promise<void> {
    const existing = this.runs.get(file.id);
    if (existing) {
      // Uppy asked again for a file this page holds (a retry of a paused file): one run per file.
      if (!file.isPaused) existing.resume();
      return existing.done;
    }
    const run = new FileRun(this, file.id);
    this.runs.set(file.id, run);
    void run.done.then(() => {
      if (this.runs.get(file.id) === run) this.runs.delete(file.id);
    });
    if (file.isPaused) run.pauseBeforeStart();
    else run.resume();
    return run.done;
  }

  private readonly onPause = (file: UppyFile<M, B> | undefined, isPaused: boolean): void => {
    const run = file && this.runs.get(file.id);
    if (!run) return;
    if (isPaused) run.pause();
    else run.resume();
  };

  private readonly onPauseAll = (): void => {
    for (const run of this.runs.values()) run.pause();
  };

  private readonly onResumeAll = (): void => {
    for (const run of this.runs.values()) run.resume();
  };

  /** A file removed (its cancel, or cancelAll): the upload is given up for good. */
  private readonly onRemoved = (file: UppyFile<M, B>): void => {
    const run = this.runs.get(file.id);
    if (run) {
      this.runs.delete(file.id);
      void run.cancel();
      return;
    }
    void this.discard(file.id);
  };

  /** Forgets a file's link and, unless its upload completed, discards the upload (the server drops what it holds). */
  async discard(fileId: string, key?: string): Promise<void> {
    const entry = this.keys.get(fileId);
    this.keys.delete(fileId);
    const k = key ?? entry?.key;
    if (!k || entry?.result) return;
    try {
      await this.client.discard(k);
    } catch (e) {
      this.uppy.log(`[OnceUpload] could not discard the upload of ${fileId}: ${describeError(toUploadError(e))}`, "warning");
    }
  }

  /**
   * Runs fn once fewer than `limit` files are being sent; not at all if
   * signal aborts first (a Pause or a cancel of a file still waiting).
   */
  async slot(signal: AbortSignal, fn: () => Promise<void>): Promise<void> {
    while (this.active >= this.limit && !signal.aborted) {
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    if (signal.aborted) return;
    this.active++;
    try {
      await fn();
    } finally {
      this.active--;
      // Every waiter looks again; one takes the place.
      const woken = this.waiting;
      this.waiting = [];
      for (const wake of woken) wake();
    }
  }

  /**
   * The key of a file's upload: the one linked to its Uppy id while the
   * client still holds its record (or the completed result), else a new
   * one from `client.add` (stored by the client before anything is sent,
   * and linked here as soon as it is).
   */
  async keyFor(file: UppyFile<M, B>, signal: AbortSignal, onEvent: (e: UploadEvent) => void): Promise<{ key: string; result?: CompletedUpload }> {
    const known = this.keys.get(file.id);
    if (known?.result) return { key: known.key, result: known.result };
    if (known && (await this.client.get(known.key))) return { key: known.key };
    if (file.isRemote) {
      throw new UploadError({ kind: "file", message: `"${file.name}" comes from a remote source (Companion), which @onceupload/uppy does not upload.` });
    }
    const data = file.data;
    if (!data) {
      throw new UploadError({
        kind: "file",
        code: "file_needed",
        retryable: true,
        message: `Choose "${file.name}" again: its bytes were not kept after the page was reloaded.`,
      });
    }
    const picked = new File([data], file.meta.name || file.name, {
      type: file.type || data.type,
      lastModified: data instanceof File ? data.lastModified : Date.now(),
    });
    let linked: string | undefined;
    const rec = await this.client.add(picked, {
      signal,
      onEvent: (e) => {
        // The record is stored: link it now, before its hashing, so that a reload finds it.
        if (e.type === "phase" && !linked) {
          linked = e.record.key;
          this.keys.set(file.id, { key: linked, at: Date.now() });
        }
        onEvent(e);
      },
    });
    if (linked !== rec.key) this.keys.set(file.id, { key: rec.key, at: Date.now() });
    return { key: rec.key };
  }

  /**
   * Emits upload-success for a completed upload, if the file is still there.
   * Once per file: a file has one run at a time (runFile), which ends here,
   * and Uppy marks the file complete, which the uploader then skips.
   */
  succeed(fileId: string, key: string, result: CompletedUpload): void {
    this.keys.set(fileId, { key, at: Date.now(), result });
    const file = this.uppy.getFile(fileId);
    if (!file) return;
    const body: OnceUploadBody = { ...result, idempotencyKey: key };
    this.uppy.emit("upload-success", file, { status: 200, body: body as unknown as B, bytesUploaded: result.bytes });
  }

  /** Emits upload-error with the client's sentence for the error. */
  fail(fileId: string, err: UploadError): void {
    const file = this.uppy.getFile(fileId);
    if (!file) return;
    const error = new Error(describeError(err), { cause: err }) as OnceUploadError;
    error.name = "OnceUploadError";
    const response = err.status !== undefined ? { status: err.status, body: { error: err.code ?? "", message: err.message } as unknown as B } : undefined;
    this.uppy.emit("upload-error", file, error, response);
  }

  progress(fileId: string, loaded: number, total: number): void {
    const file = this.uppy.getFile(fileId);
    if (!file) return;
    this.uppy.emit("upload-progress", file, { uploadStarted: file.progress.uploadStarted ?? Date.now(), bytesUploaded: loaded, bytesTotal: total });
  }

  /** Uppy's preprocess-progress (with message and value), or preprocess-complete (without). */
  preprocess(fileId: string, message?: string, value?: number): void {
    const file = this.uppy.getFile(fileId);
    if (!file) return;
    if (message === undefined) this.uppy.emit("preprocess-complete", file);
    else this.uppy.emit("preprocess-progress", file, { mode: "determinate", message, value: value ?? 0 });
  }

  private forgetOldResults(): void {
    const now = Date.now();
    try {
      for (const [id, e] of this.keys.entries()) {
        if (e.result && now - e.at > this.rememberCompletedMs) this.keys.delete(id);
      }
    } catch (e) {
      this.uppy.log(`[OnceUpload] could not prune the kept keys: ${String(e)}`, "warning");
    }
  }
}

/**
 * One file's upload in this page: runs of `client.upload` with the file's
 * key, one at a time (a Pause aborts the run in flight; a resume starts the
 * next once it has stopped), until it completes, fails, or the file is
 * removed; then `done` resolves (Uppy's uploader waits on it).
 */
class FileRun<M extends Meta, B extends Body> {
  readonly done: Promise<void>;
  private settle!: () => void;
  private state: RunState = "waiting";
  private controller: AbortController | null = null;
  /** The run in flight (or the last one), never rejected. */
  private attempt: Promise<void> = Promise.resolve();
  private key: string | undefined;
  private removed = false;

  constructor(
    private readonly plugin: OnceUpload<M, B>,
    private readonly fileId: string,
  ) {
    this.done = new Promise((resolve) => (this.settle = resolve));
  }

  pauseBeforeStart(): void {
    this.state = "paused";
  }

  resume(): void {
    if (this.state === "settled" || this.state === "running") return;
    this.state = "running";
    const controller = new AbortController();
    this.controller = controller;
    // After the previous run has stopped: the client runs one upload of a key at a time.
    this.attempt = this.attempt.then(() => this.plugin.slot(controller.signal, () => this.go(controller.signal)));
  }

  pause(): void {
    if (this.state === "settled") return;
    this.state = "paused";
    this.controller?.abort();
  }

  /** The file was removed: stop, then discard the upload. */
  async cancel(): Promise<void> {
    this.removed = true;
    this.controller?.abort();
    await this.attempt;
    this.finish();
    await this.plugin.discard(this.fileId, this.key);
  }

  private finish(): void {
    this.state = "settled";
    this.settle();
  }

  private async go(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const file = this.plugin.uppy.getFile(this.fileId);
    if (!file) return this.finish();
    // Hashing a file for its single PUT, or checking the parts S3 holds
    // against a file picked again, is Uppy's preprocessing ("Hashing… 40 %").
    let preprocessing = false;
    const preprocessed = () => {
      if (preprocessing) this.plugin.preprocess(this.fileId);
      preprocessing = false;
    };
    const onEvent = (e: UploadEvent) => {
      if (signal.aborted) return;
      if (e.type === "hash-progress" || e.type === "verify-progress") {
        preprocessing = true;
        this.plugin.preprocess(this.fileId, e.type === "hash-progress" ? "Hashing" : "Checking the stored parts", e.loaded / e.total);
      } else if (e.type === "upload-progress") {
        preprocessed();
        this.plugin.progress(this.fileId, e.loaded, e.total);
      }
    };
    try {
      const { key, result: done } = await this.plugin.keyFor(file, signal, onEvent);
      this.key = key;
      let result = done;
      if (!result) {
        const rec = await this.plugin.client.get(key);
        // The bytes Uppy holds, when the client has none of its own (a large file after a reload): checked against the record.
        const data = !file.isRemote && file.data && rec && !this.plugin.client.hasFile(rec) ? file.data : undefined;
        result = await this.plugin.client.upload(key, { signal, onEvent: (e) => this.onEvent(key, e, onEvent), file: data });
      }
      preprocessed();
      if (this.removed) return;
      this.plugin.succeed(this.fileId, key, result);
      this.finish();
    } catch (e) {
      preprocessed();
      if (this.removed) return;
      const err = toUploadError(e);
      // Paused: the record stays, and resume() runs it again.
      if (signal.aborted && err.kind === "aborted") return;
      this.plugin.fail(this.fileId, err);
      this.finish();
    }
  }

  /** The completed result is linked at once, in the event's task: a reload right after finds it. */
  private onEvent(key: string, e: UploadEvent, next: (e: UploadEvent) => void): void {
    if (e.type === "completed") this.plugin.keys.set(this.fileId, { key, at: Date.now(), result: e.result });
    next(e);
  }
}
