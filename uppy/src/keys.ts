/**
 * Which onceupload key an Uppy file has: kept durably (localStorage by
 * default), so that the same file, restored by Golden Retriever or added
 * again after a reload, resumes the upload its key started instead of
 * minting a second one.
 *
 * Uppy's file ids are deterministic: made from the file's name, type,
 * relative path, size and modification time (and the Uppy instance's id).
 * The client's own record (IndexedDB) holds the upload's state; this holds
 * only the file id → key link, and, once the upload completed, its result,
 * so that a file whose upload completed is answered with that result and
 * never sent again while the link is kept.
 */
import type { CompletedUpload } from "@onceupload/web";

/** One Uppy file's link to its upload. */
export interface KeyEntry {
  /** The upload's Idempotency-Key (the client's record key). */
  key: string;
  /** When the link was written (epoch ms). */
  at: number;
  /** The completed upload, once it completed. */
  result?: CompletedUpload;
}

/** Where the links are kept. Synchronous: a link is written in the same task as the event that makes it. */
export interface KeyStore {
  get(fileId: string): KeyEntry | undefined;
  set(fileId: string, entry: KeyEntry): void;
  delete(fileId: string): void;
  /** Every link (to drop those of completed uploads older than the plugin's rememberCompletedMs). */
  entries(): [string, KeyEntry][];
}

/** Links in memory only: for tests, or where nothing may persist (a reload then starts over). */
export class MemoryKeyStore implements KeyStore {
  private readonly links = new Map<string, KeyEntry>();
  get(fileId: string) {
    return this.links.get(fileId);
  }
  set(fileId: string, entry: KeyEntry) {
    this.links.set(fileId, entry);
  }
  delete(fileId: string) {
    this.links.delete(fileId);
  }
  entries(): [string, KeyEntry][] {
    return [...this.links.entries()];
  }
}

/**
 * Links in a Web Storage (localStorage by default), one item per Uppy file,
 * named `onceupload-uppy:<API base URL>:<Uppy file id>`: the uploads of one
 * API are not another's.
 */
export class WebStorageKeyStore implements KeyStore {
  private readonly prefix: string;
  constructor(
    apiBase: string,
    private readonly storage: Storage,
  ) {
    this.prefix = `onceupload-uppy:${apiBase}:`;
  }
  get(fileId: string): KeyEntry | undefined {
    const raw = this.storage.getItem(this.prefix + fileId);
    if (raw === null) return undefined;
    try {
      const v = JSON.parse(raw) as Partial<KeyEntry> | null;
      return v && typeof v.key === "string" && typeof v.at === "number" ? (v as KeyEntry) : undefined;
    } catch {
      return undefined;
    }
  }
  set(fileId: string, entry: KeyEntry) {
    this.storage.setItem(this.prefix + fileId, JSON.stringify(entry));
  }
  delete(fileId: string) {
    this.storage.removeItem(this.prefix + fileId);
  }
  entries(): [string, KeyEntry][] {
    const out: [string, KeyEntry][] = [];
    for (let i = 0; i < this.storage.length; i++) {
      const name = this.storage.key(i);
      if (!name?.startsWith(this.prefix)) continue;
      const id = name.slice(this.prefix.length);
      const e = this.get(id);
      if (e) out.push([id, e]);
    }
    return out;
  }
}

/** localStorage where the page has it (it throws in some private modes), else memory. */
export function defaultKeyStore(apiBase: string): KeyStore {
  try {
    const s = globalThis.localStorage;
    if (s) {
      const probe = "onceupload-uppy:probe";
      s.setItem(probe, "1");
      s.removeItem(probe);
      return new WebStorageKeyStore(apiBase, s);
    }
  } catch {
    // No usable localStorage: links last as long as the page.
  }
  return new MemoryKeyStore();
}
