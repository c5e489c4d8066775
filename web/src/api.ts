/**
 * One attempt at each API call (POST /uploads, GET /uploads/{uploadId}, and
 * the multipart routes under /uploads/{uploadId}),
 * with every failure turned into an {@link UploadError} that says whether a
 * retry may help. Retrying is the caller's business (see retry.ts).
 */
import { UploadError, abortError } from "./errors.js";
import { attemptSignal, isRetryableStatus, parseRetryAfter } from "./retry.js";

/** The body of POST /uploads. */
export interface CreateRequest {
  filename: string;
  contentType: string;
  size: number;
  /** 64 lower-case hex characters. */
  sha256: string;
  /** Asks for a multipart upload in parts of this size (5 MiB to 5 GiB, at most 10,000 parts). */
  partSize?: number;
}

/** How to send the bytes. `headers` never lists Content-Length. */
export interface UploadInstructions {
  method: "PUT";
  url: string;
  headers: Record<string, string>;
  expiresAt: string;
}

/** How to send one part of a multipart upload. */
export interface PartInstructions extends UploadInstructions {
  partNumber: number;
}

/** A part the storage holds (GET /uploads/{id}/parts). */
export interface StoredPart {
  partNumber: number;
  size: number;
  /** 64 lower-case hex characters. */
  sha256: string;
  etag: string;
}

export interface MultipartLayout {
  partSize: number;
  partCount: number;
}

interface UploadBase {
  uploadId: string;
  storageKey: string;
  filename: string;
  contentType: string;
  bytes: number;
  sha256: string;
}

/** A pending upload sent in one PUT. */
export interface PendingUpload extends UploadBase {
  status: "pending";
  upload: UploadInstructions;
  multipart?: undefined;
}

/** A pending upload sent in parts: their URLs come from POST /uploads/{id}/parts. */
export interface PendingMultipartUpload extends UploadBase {
  status: "pending";
  upload?: undefined;
  multipart: MultipartLayout;
}

export interface CompletedUpload extends UploadBase {
  status: "completed";
  etag: string;
  completedAt: string;
  multipart?: MultipartLayout;
  /** S3's checksum of the parts' checksums (multipart uploads). */
  compositeSha256?: string;
}

/** Discarded with DELETE /uploads/{id}. */
export interface AbortedUpload extends UploadBase {
  status: "aborted";
}

export type UploadResponse = PendingUpload | PendingMultipartUpload | CompletedUpload | AbortedUpload;

export interface ApiAnswer {
  body: UploadResponse;
  status: number;
  /** `Idempotent-Replay: true`: answered from the record of an earlier attempt. */
  replay: boolean;
}

export interface ApiOptions {
  /** The API's base URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com or http://127.0.0.1:3000. */
  baseUrl: string;
  fetch?: typeof fetch;
  /** The Authorization header value (e.g. `Bearer <JWT>`), asked for before each request. */
  authorization?: () => string | undefined | Promise<string | undefined>;
  /** Wall time, for Retry-After dates. */
  now?: () => number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Time limit of this attempt (Infinity: none). */
  timeoutMs?: number;
}

export class Api {
  private readonly base: string;
  private readonly fetchFn: typeof fetch;
  private readonly authorization?: ApiOptions["authorization"];
  private readonly now: () => number;

  constructor(opts: ApiOptions) {
    this.base = opts.baseUrl.endsWith("/") ? opts.baseUrl : opts.baseUrl + "/";
    // Called as a plain function: window.fetch must not be called as a method of another object.
    const f = opts.fetch ?? globalThis.fetch;
    this.fetchFn = (input, init) => f(input, init);
    this.authorization = opts.authorization;
    this.now = opts.now ?? Date.now;
  }

  /** The absolute URL of an API path ("uploads", "uploads/ID"). */
  url(path: string): string {
    return new URL(path, this.base).toString();
  }

  /** POST /uploads with the key. One attempt. */
  async create(key: string, req: CreateRequest, opts: CallOptions = {}): Promise<ApiAnswer> {
    const fields: CreateRequest = { filename: req.filename, contentType: req.contentType, size: req.size, sha256: req.sha256 };
    if (req.partSize !== undefined) fields.partSize = req.partSize;
    const headers = { "Idempotency-Key": key, "Content-Type": "application/json" };
    return uploadAnswer(await this.call("POST", "uploads", headers, JSON.stringify(fields), opts));
  }

  /** GET /uploads/{uploadId}. One attempt. */
  async get(uploadId: string, opts: CallOptions = {}): Promise<ApiAnswer> {
    return uploadAnswer(await this.call("GET", uploadPath(uploadId), {}, undefined, opts));
  }

  /** POST /uploads/{uploadId}/parts: signed PUTs for up to 100 parts, each bound to its SHA-256 (hex). One attempt. */
  async partUrls(uploadId: string, parts: { partNumber: number; sha256: string }[], opts: CallOptions = {}): Promise<PartInstructions[]> {
    const res = await this.call("POST", uploadPath(uploadId) + "/parts", { "Content-Type": "application/json" }, JSON.stringify({ parts }), opts);
    const list = partList(res);
    for (const p of list as Partial<PartInstructions>[]) {
      if (typeof p.partNumber !== "number" || typeof p.url !== "string" || (p.method !== undefined && p.method !== "PUT")) {
        throw protocolError(res.status, "a part without a URL");
      }
    }
    return list as PartInstructions[];
  }

  /** GET /uploads/{uploadId}/parts: the parts the storage holds. One attempt. */
  async listParts(uploadId: string, opts: CallOptions = {}): Promise<StoredPart[]> {
    const res = await this.call("GET", uploadPath(uploadId) + "/parts", {}, undefined, opts);
    const list = partList(res);
    for (const p of list as Partial<StoredPart>[]) {
      if (typeof p.partNumber !== "number" || typeof p.size !== "number" || typeof p.sha256 !== "string") throw protocolError(res.status, "a part without its size or SHA-256");
    }
    return list as StoredPart[];
  }

  /** POST /uploads/{uploadId}/complete: joins the parts. Idempotent. One attempt. */
  async complete(uploadId: string, opts: CallOptions = {}): Promise<ApiAnswer> {
    return uploadAnswer(await this.call("POST", uploadPath(uploadId) + "/complete", {}, undefined, opts));
  }

  /** DELETE /uploads/{uploadId}: discards a multipart upload and the parts stored so far. One attempt. */
  async abort(uploadId: string, opts: CallOptions = {}): Promise<ApiAnswer> {
    return uploadAnswer(await this.call("DELETE", uploadPath(uploadId), {}, undefined, opts));
  }

  private async call(method: string, path: string, headers: Record<string, string>, body: string | undefined, opts: CallOptions): Promise<RawAnswer> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const auth = await this.authorization?.();
    if (auth) headers = { ...headers, Authorization: auth };
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const { signal, done } = attemptSignal(opts.signal, opts.timeoutMs ?? Infinity);
    try {
      let res: Response;
      let text: string;
      try {
        res = await this.fetchFn(this.url(path), method === "GET" ? { method, headers, signal, cache: "no-store" } : { method, headers, body, signal });
        text = await res.text();
      } catch (e) {
        if (signal.aborted) throw abortError(signal);
        // fetch rejects with a TypeError on any network failure, CORS refusals included.
        throw new UploadError({ kind: "network", message: `${method} /${path}: no answer (${errorText(e)})`, retryable: isRetryableStatus(0), cause: e });
      }
      if (res.ok) return { text, status: res.status, replay: res.headers.get("Idempotent-Replay") === "true" };
      throw apiError(res, text, this.now());
    } finally {
      done();
    }
  }
}

interface RawAnswer {
  text: string;
  status: number;
  replay: boolean;
}

function uploadPath(uploadId: string): string {
  return "uploads/" + encodeURIComponent(uploadId);
}

function uploadAnswer(res: RawAnswer): ApiAnswer {
  return { body: parseUpload(res.text, res.status), status: res.status, replay: res.replay };
}

function partList(res: RawAnswer): unknown[] {
  let b: unknown;
  try {
    b = JSON.parse(res.text);
  } catch {
    throw protocolError(res.status, "not JSON");
  }
  const parts = b && typeof b === "object" ? (b as { parts?: unknown }).parts : undefined;
  if (!Array.isArray(parts)) throw protocolError(res.status, "no parts");
  return parts.map((p: unknown) => {
    if (!p || typeof p !== "object") throw protocolError(res.status, "a part that is not an object");
    return p;
  });
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** An error answer of the API as an UploadError. */
export function apiError(res: Response, text: string, now: number): UploadError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const b: unknown = JSON.parse(text);
    if (b && typeof b === "object") {
      const o = b as Record<string, unknown>;
      if (typeof o.error === "string") code = o.error;
      if (typeof o.message === "string") message = o.message;
    }
  } catch {
    // Not JSON (a proxy's error page, API Gateway's own {"message": …}): keep the status.
  }
  return new UploadError({
    kind: "api",
    status: res.status,
    code,
    message: message || res.statusText || `HTTP ${res.status}`,
    retryable: isRetryableStatus(res.status, code),
    retryAfterMs: parseRetryAfter(res.headers.get("Retry-After"), now),
  });
}

function protocolError(status: number, what: string): UploadError {
  return new UploadError({ kind: "protocol", status, message: `The API's answer is not an upload (${what}).` });
}

/** Checks the shape of a 2xx body. */
export function parseUpload(text: string, status: number): UploadResponse {
  let b: unknown;
  try {
    b = JSON.parse(text);
  } catch {
    throw protocolError(status, "not JSON");
  }
  if (!b || typeof b !== "object") throw protocolError(status, "not an object");
  const o = b as Record<string, unknown>;
  for (const f of ["uploadId", "storageKey", "sha256"] as const) {
    if (typeof o[f] !== "string" || o[f] === "") throw protocolError(status, `no ${f}`);
  }
  if (typeof o.bytes !== "number") throw protocolError(status, "no bytes");
  if (o.status === "completed") return b as CompletedUpload;
  if (o.status === "aborted") return b as AbortedUpload;
  if (o.status !== "pending") throw protocolError(status, `status ${JSON.stringify(o.status)}`);
  const m = o.multipart as Record<string, unknown> | undefined;
  if (m && typeof m === "object") {
    if (!Number.isInteger(m.partSize) || !Number.isInteger(m.partCount)) throw protocolError(status, "multipart without partSize and partCount");
    return b as PendingMultipartUpload;
  }
  const u = o.upload as Record<string, unknown> | undefined;
  if (!u || typeof u.url !== "string" || (u.method !== undefined && u.method !== "PUT") || (u.headers !== undefined && typeof u.headers !== "object")) {
    throw protocolError(status, "pending without upload instructions or a multipart layout");
  }
  return b as PendingUpload;
}
