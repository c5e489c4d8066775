/**
 * A fake of the onceupload client (the plugin's Client: add, get, upload,
 * hasFile, discard), with the real client's contract where the plugin
 * relies on it: add() stores the record, then tells it (a "phase" event),
 * before anything else; upload() rejects with an "aborted" UploadError when
 * its signal aborts, and with "busy" while the key runs already; a
 * completed upload's record is deleted. What an upload does is scripted per
 * call (`behave`).
 */
import { type CompletedUpload, type ResumeOptions, type RunOptions, type UploadEvent, type UploadRecord, UploadError } from "@onceupload/web";
import type { Client } from "../src/index.js";

export interface UploadCall {
  key: string;
  file?: Blob;
  signal?: AbortSignal;
  emit: (e: UploadEvent) => void;
}

/** What one upload() call does: resolves with the result, or rejects; default: progress, then completed. */
export type Behaviour = (call: UploadCall, complete: () => CompletedUpload) => Promise<CompletedUpload>;

export class FakeClient implements Client {
  readonly apiBase = "http://127.0.0.1:3000";
  readonly records = new Map<string, UploadRecord>();
  readonly adds: string[] = [];
  readonly uploads: UploadCall[] = [];
  readonly discards: string[] = [];
  /** Keys kept with their bytes (as the client keeps files up to 64 MiB), or picked in this "page". */
  readonly withFile = new Set<string>();
  private readonly running = new Set<string>();
  private minted = 0;
  /** Scripted behaviours, used in turn; then the default. */
  behaviours: Behaviour[] = [];

  async add(file: File, opts: RunOptions = {}): Promise<UploadRecord> {
    const key = `key-${++this.minted}`;
    const rec: UploadRecord = {
      key,
      api: this.apiBase,
      filename: file.name,
      contentType: file.type,
      size: file.size,
      lastModified: file.lastModified,
      phase: "ready",
      createdAt: 0,
      updatedAt: 0,
    };
    this.records.set(key, rec);
    this.withFile.add(key);
    this.adds.push(key);
    opts.onEvent?.({ type: "phase", phase: "ready", record: rec });
    return rec;
  }

  async get(key: string): Promise<UploadRecord | undefined> {
    return this.records.get(key);
  }

  hasFile(rec: UploadRecord): boolean {
    return this.withFile.has(rec.key);
  }

  async upload(key: string, opts: ResumeOptions = {}): Promise<CompletedUpload> {
    if (this.running.has(key)) throw new UploadError({ kind: "busy", retryable: true, message: "This upload is already running (in this page or another tab)." });
    const rec = this.records.get(key);
    if (!rec) throw new UploadError({ kind: "state", message: "This upload is no longer stored in the browser." });
    if (!opts.file && !this.withFile.has(key)) {
      throw new UploadError({ kind: "file", code: "file_needed", retryable: true, message: `Choose "${rec.filename}" again to resume: the browser did not keep a copy of it.` });
    }
    const call: UploadCall = { key, file: opts.file, signal: opts.signal, emit: (e) => opts.onEvent?.(e) };
    this.uploads.push(call);
    this.running.add(key);
    const complete = (): CompletedUpload => {
      const result: CompletedUpload = {
        uploadId: `up-${key}`,
        status: "completed",
        storageKey: `uploads/local/up-${key}`,
        filename: rec.filename,
        contentType: rec.contentType,
        bytes: rec.size,
        etag: "e",
        completedAt: "2026-01-01T00:00:00Z",
      };
      this.records.delete(key);
      call.emit({ type: "completed", result });
      return result;
    };
    try {
      const behave = this.behaviours.shift() ?? defaultBehaviour;
      return await behave(call, complete);
    } finally {
      this.running.delete(key);
    }
  }

  async discard(key: string): Promise<"aborted" | "completed" | "forgotten"> {
    if (this.running.has(key)) throw new UploadError({ kind: "busy", retryable: true, message: "busy" });
    this.discards.push(key);
    this.records.delete(key);
    return "aborted";
  }

  /** A new page: nothing picked, only the records (and the bytes they keep) remain. */
  reload(keepBytes: boolean): void {
    if (!keepBytes) this.withFile.clear();
  }
}

const defaultBehaviour: Behaviour = async (call, complete) => {
  call.emit({ type: "upload-progress", loaded: 1, total: 2 });
  return complete();
};

/** Holds the upload until its signal aborts (a Pause), then rejects as the client does. */
export const holdUntilAborted: Behaviour = (call) =>
  new Promise((_, reject) => {
    const stop = () => reject(new UploadError({ kind: "aborted", message: "Stopped." }));
    if (call.signal?.aborted) stop();
    call.signal?.addEventListener("abort", stop);
  });

/** Rejects with err. */
export const failWith =
  (err: UploadError): Behaviour =>
  async () => {
    throw err;
  };
