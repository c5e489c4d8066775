/**
 * Where an upload's state lives between page loads: IndexedDB, one record per
 * logical upload, keyed by its Idempotency-Key. The key is written before
 * anything is sent, so a reload or a browser restart resumes with it.
 */
import type { CompletedUpload } from "./api.js";
import { normalizedOrUndefined } from "./baseurl.js";
import type { SerializedUploadError } from "./errors.js";
import { UploadError } from "./errors.js";

/**
 * hashing → ready → creating → uploading → completing → completed, or
 * failed / paused (stopped by the caller) from any of them. A multipart
 * upload starts "ready" (its parts are hashed while it is "uploading").
 */
export type Phase = "hashing" | "ready" | "creating" | "uploading" | "completing" | "completed" | "failed" | "paused";

/** Phases in which work is (or was, before a reload) under way. */
export const ACTIVE_PHASES: ReadonlySet<Phase> = new Set(["hashing", "ready", "creating", "uploading", "completing"]);

export interface UploadRecord {
  /** The Idempotency-Key, minted once when the file was picked. */
  key: string;
  /**
   * The API base URL this upload belongs to, normalised (normalizeBaseUrl).
   * Records of earlier versions hold it as it was typed: see {@link foldRecords}.
   */
  api: string;
  filename: string;
  contentType: string;
  size: number;
  lastModified: number;
  /**
   * The whole file's SHA-256, lower-case hex, once computed: single PUTs
   * only (a multipart upload has no whole-file pass; records of an earlier
   * version of this client have one, which their create declared).
   */
  sha256?: string;
  /** Multipart uploads (files over the client's multipartBytes): the part size, chosen when the file was picked. */
  partSize?: number;
  /**
   * Records of an earlier version of this client only: each part's SHA-256
   * (hex), from its whole-file pass. This version hashes each part as it
   * sends it and keeps the hashes in memory only: after a reload the parts
   * the storage holds are hashed again from the file picked again.
   */
  partSha256?: string[];
  /** A create was sent with this key: the server may hold an upload even when its id never arrived here. */
  sent?: boolean;
  /** The file itself, kept when small enough, so that a reload can resume without picking it again. */
  file?: Blob;
  phase: Phase;
  uploadId?: string;
  storageKey?: string;
  result?: CompletedUpload;
  error?: SerializedUploadError;
  /** Epoch ms. */
  createdAt: number;
  updatedAt: number;
}

export interface UploadStore {
  get(key: string): Promise<UploadRecord | undefined>;
  put(record: UploadRecord): Promise<void>;
  delete(key: string): Promise<void>;
  /** Every record, oldest first. */
  list(): Promise<UploadRecord[]>;
}

/** Records in memory: for tests, or for pages that must not persist anything. */
export class MemoryStore implements UploadStore {
  private readonly records = new Map<string, UploadRecord>();
  async get(key: string) {
    const r = this.records.get(key);
    return r && { ...r };
  }
  async put(record: UploadRecord) {
    this.records.set(record.key, { ...record });
  }
  async delete(key: string) {
    this.records.delete(key);
  }
  async list() {
    return [...this.records.values()].map((r) => ({ ...r })).sort(byCreation);
  }
}

function byCreation(a: UploadRecord, b: UploadRecord): number {
  return a.createdAt - b.createdAt || a.key.localeCompare(b.key);
}

/** What {@link foldRecords} found: the API's records, and the writes that make the store say so. */
export interface Folded {
  /** The records of the API, folded, with `api` in its one spelling, oldest first. */
  records: UploadRecord[];
  /** Records to write (their `api` respelled, or a folded record's kept file taken over). Written before `drop` is deleted. */
  put: UploadRecord[];
  /** Keys of records folded into another: to delete. */
  drop: string[];
}

/**
 * Which record of several for one file carries on: a completed one, then
 * one with an upload id (the server holds its upload), then one whose
 * create was sent (the server may hold one), then a bare key; of equals,
 * the most recently created (its key is furthest from the server's expiry),
 * as the Go CLI's state file decides.
 */
function rank(r: UploadRecord): number {
  if (r.phase === "completed" || r.result) return 0;
  if (r.uploadId) return 1;
  if (r.sent) return 2;
  return 3;
}

/** The same file as far as a page can tell (it has no path): its name, size, modification time and type. */
function fileIdentity(r: UploadRecord): string {
  return JSON.stringify([r.filename, r.size, r.lastModified, r.contentType]);
}

/**
 * The records of the API `api` (normalised) among `all` (oldest first, as
 * {@link UploadStore.list} gives them). Earlier versions of this client kept
 * the base URL as typed, so one API's records may be under several
 * spellings (`…:3000`, `…:3000/`); each is found under its normalised form,
 * and respelled. Where that bug left several records of one file (the file
 * picked again because its record was not listed under the other
 * spelling), they are folded into one, which a Resume continues: the
 * winner by {@link rank}, taking over a kept copy of the file if it has
 * none; the others are dropped. Records of one file under one spelling are
 * the same file picked twice on purpose, and stay two uploads (so does
 * every record of a group that holds such twins: none is known to be the
 * duplicate of another); two whose
 * SHA-256 differ are not one file. A group with a record `busy` (running
 * here or in another tab) is left as it is, for a later call.
 */
export function foldRecords(all: UploadRecord[], api: string, busy: (key: string) => boolean = () => false): Folded {
  const mine = all.filter((r) => r.api === api || normalizedOrUndefined(r.api) === api);
  const groups = new Map<string, UploadRecord[]>();
  for (const r of mine) {
    const id = fileIdentity(r);
    groups.set(id, [...(groups.get(id) ?? []), r]);
  }
  const put: UploadRecord[] = [];
  const drop: string[] = [];
  const kept = new Map<string, UploadRecord>();
  const respell = (r: UploadRecord) => {
    const again = r.api === api ? r : { ...r, api };
    if (again !== r) put.push(again);
    kept.set(r.key, again);
  };
  for (const group of groups.values()) {
    if (group.some((r) => busy(r.key))) {
      for (const r of group) kept.set(r.key, r);
      continue;
    }
    // The bug left one record per spelling. Several under one spelling are
    // the file picked more than once on purpose, and then no record can be
    // told a duplicate of another: each stays an upload.
    const spellings = new Set(group.map((r) => r.api)).size;
    if (spellings < 2 || spellings < group.length) {
      group.forEach(respell);
      continue;
    }
    const winner = [...group].sort((a, b) => rank(a) - rank(b) || b.createdAt - a.createdAt)[0];
    const folded = group.filter((r) => r !== winner && !(r.sha256 && winner.sha256 && r.sha256 !== winner.sha256));
    for (const r of group) if (r !== winner && !folded.includes(r)) respell(r);
    const file = winner.file ?? folded.find((r) => r.file)?.file;
    const merged = { ...winner, api, ...(file ? { file } : {}) };
    if (merged.api !== winner.api || merged.file !== winner.file) put.push(merged);
    kept.set(merged.key, merged);
    drop.push(...folded.map((r) => r.key));
  }
  return { records: mine.filter((r) => kept.has(r.key)).map((r) => kept.get(r.key)!), put, drop };
}

export interface IndexedDBStoreOptions {
  /** Database name. Default "onceupload". */
  name?: string;
  /** The IDBFactory (default: the global indexedDB). */
  indexedDB?: IDBFactory;
}

const STORE = "uploads";

function stateError(message: string, cause?: unknown): UploadError {
  return new UploadError({ kind: "state", message, cause });
}

function promisify<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(stateError(`IndexedDB: ${req.error?.message ?? "request failed"}`, req.error));
  });
}

/** The browser's IndexedDB. One short transaction per call. */
export class IndexedDBStore implements UploadStore {
  private readonly name: string;
  private readonly factory?: IDBFactory;
  private db?: Promise<IDBDatabase>;

  constructor(opts: IndexedDBStoreOptions = {}) {
    this.name = opts.name ?? "onceupload";
    this.factory = opts.indexedDB;
  }

  private open(): Promise<IDBDatabase> {
    if (this.db) return this.db;
    const factory = this.factory ?? globalThis.indexedDB;
    if (!factory) return Promise.reject(stateError("IndexedDB is not available, so uploads cannot survive a reload."));
    this.db = new Promise<IDBDatabase>((resolve, reject) => {
      const req = factory.open(this.name, 1);
      req.onupgradeneeded = () => {
        const db = req.result;
        if (!db.objectStoreNames.contains(STORE)) db.createObjectStore(STORE, { keyPath: "key" });
      };
      req.onsuccess = () => {
        const db = req.result;
        // Another tab wants a newer schema: let it, and reopen on next use.
        db.onversionchange = () => {
          db.close();
          this.db = undefined;
        };
        db.onclose = () => {
          this.db = undefined;
        };
        resolve(db);
      };
      req.onerror = () => {
        this.db = undefined;
        reject(stateError(`IndexedDB: cannot open "${this.name}": ${req.error?.message ?? "unknown error"}`, req.error));
      };
      req.onblocked = () => {
        // Resolves once the other connection closes; nothing to do meanwhile.
      };
    });
    return this.db;
  }

  private async tx<T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
    const db = await this.open();
    const t = db.transaction(STORE, mode);
    const result = promisify(fn(t.objectStore(STORE)));
    const committed = new Promise<void>((resolve, reject) => {
      t.oncomplete = () => resolve();
      t.onerror = () => reject(stateError(`IndexedDB: ${t.error?.message ?? "transaction failed"}`, t.error));
      t.onabort = () => reject(stateError(`IndexedDB: transaction aborted${t.error ? ": " + t.error.message : ""}`, t.error));
    });
    // Resolved only once the transaction has committed: the record is on disk.
    const [value] = await Promise.all([result, committed]);
    return value;
  }

  async get(key: string): Promise<UploadRecord | undefined> {
    return (await this.tx("readonly", (s) => s.get(key) as IDBRequest<UploadRecord | undefined>)) ?? undefined;
  }

  async put(record: UploadRecord): Promise<void> {
    await this.tx("readwrite", (s) => s.put(record));
  }

  async delete(key: string): Promise<void> {
    await this.tx("readwrite", (s) => s.delete(key));
  }

  async list(): Promise<UploadRecord[]> {
    return (await this.tx("readonly", (s) => s.getAll() as IDBRequest<UploadRecord[]>)).sort(byCreation);
  }

  /** Closes the connection (tests; a later call reopens it). */
  close(): void {
    void this.db?.then((db) => db.close());
    this.db = undefined;
  }
}
