/**
 * One attempt at each API call (POST /uploads, GET /uploads/{uploadId}, and
 * the multipart routes under /uploads/{uploadId}),
 * with every failure turned into an {@link UploadError} that says whether a
 * retry may help. Retrying is the caller's business (see retry.ts).
 */
import { API_CODES, type ErrorCode } from "./codes.js";
import { UploadError, abortError } from "./errors.js";
import type { components } from "./openapi.gen.js";
import { type RequestState, attemptSignal, isRetryableStatus, parseRetryAfter } from "./retry.js";

/** The wire types, generated from openapi.yaml (`npm run gen`). */
type Schemas = components["schemas"];

/** The body of POST /uploads. `sha256` is required without `partSize`. */
export type CreateRequest = Schemas["CreateRequest"];

/** A part's number and the SHA-256 (hex) of its bytes: what signing binds a part URL to, and what complete declares. */
export type PartSha256 = Schemas["PartToSign"];

/**
 * The optional body of POST /uploads/{id}/complete: every part's SHA-256,
 * which the server compares with the parts S3 holds (409 parts_mismatch
 * when one differs; nothing is stored), and the whole file's SHA-256 if the
 * client has one it did not give at create.
 */
export type CompleteRequest = Schemas["CompleteRequest"];

/** How to send the bytes. `headers` never lists Content-Length. */
export type UploadInstructions = Schemas["PutInstructions"];

/** How to send one part of a multipart upload. */
export type PartInstructions = Schemas["SignedPart"];

/** A part the storage holds (GET /uploads/{id}/parts). */
export type StoredPart = Schemas["StoredPart"];

export type MultipartLayout = Schemas["Multipart"];

// The members a state never has are named as absent (`?: undefined`), so
// that code holding an UploadResponse can test `body.upload` or
// `body.multipart` before it knows the state.

/** A pending upload sent in one PUT. */
export type PendingUpload = Schemas["PendingUpload"] & { multipart?: undefined };

/** A pending upload sent in parts: their URLs come from POST /uploads/{id}/parts. */
export type PendingMultipartUpload = Schemas["PendingMultipartUpload"] & { upload?: undefined };

export type CompletedUpload = Schemas["CompletedUpload"];

/** Discarded with DELETE /uploads/{id}. */
export type AbortedUpload = Schemas["AbortedUpload"];

export type UploadResponse = PendingUpload | PendingMultipartUpload | CompletedUpload | AbortedUpload;

/** Every error body of the API: `{"error": code, "message": sentence}`. */
export type ErrorBody = Schemas["Error"];

/** An error code of the API (openapi.yaml's ErrorCode); codes.ts names them. */
export type { ErrorCode };

export interface ApiAnswer {
  body: UploadResponse;
  status: number;
  /** `Idempotent-Replay: true`: answered from the record of an earlier attempt. */
  replay: boolean;
}

/** What the `authorization` option is asked: `fresh` after a 401, when a cached token will not do. */
export interface AuthorizationRequest {
  fresh: boolean;
}

/** Gives the Authorization header value; see {@link ApiOptions.authorization}. */
export type Authorization = (req?: AuthorizationRequest) => string | undefined | Promise<string | undefined>;

export interface ApiOptions {
  /** The API's base URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com or http://127.0.0.1:3000. */
  baseUrl: string;
  fetch?: typeof fetch;
  /**
   * The Authorization header value (e.g. `Bearer <JWT>`), asked for before
   * each request. When the API answers 401 (API Gateway's authorizer or the
   * API's `unauthenticated`: the token expired), it is asked again with
   * `{ fresh: true }`, meaning a cached token will not do, and the request is
   * repeated once, at once, with what it gives (retry-policy.json's
   * "unauthorized"). The same token again, or a 401 to the repeat, is final.
   * A function that takes no argument works too (it gets one repeat if it
   * gives another token).
   */
  authorization?: Authorization;
  /** Wall time, for Retry-After dates. */
  now?: () => number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Time limit of this attempt (Infinity: none). */
  timeoutMs?: number;
  /** The request's state across its attempts (given by retry()): a 401 gets one repeat with a fresh token per request. */
  request?: RequestState;
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
    const fields: CreateRequest = { filename: req.filename, contentType: req.contentType, size: req.size };
    if (req.sha256 !== undefined) fields.sha256 = req.sha256;
    if (req.partSize !== undefined) fields.partSize = req.partSize;
    const headers = { "Idempotency-Key": key, "Content-Type": "application/json" };
    return uploadAnswer(await this.call("POST", "uploads", headers, JSON.stringify(fields), opts));
  }

  /** GET /uploads/{uploadId}. One attempt. */
  async get(uploadId: string, opts: CallOptions = {}): Promise<ApiAnswer> {
    return uploadAnswer(await this.call("GET", uploadPath(uploadId), {}, undefined, opts));
  }

  /** POST /uploads/{uploadId}/parts: signed PUTs for up to 100 parts, each bound to its SHA-256 (hex). One attempt. */
  async partUrls(uploadId: string, parts: PartSha256[], opts: CallOptions = {}): Promise<PartInstructions[]> {
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

  /**
   * POST /uploads/{uploadId}/complete: joins the parts. With a body, the
   * server first compares the declared part SHA-256s with the parts S3
   * holds (409 parts_mismatch when one differs). Idempotent. One attempt.
   */
  async complete(uploadId: string, body?: CompleteRequest, opts: CallOptions = {}): Promise<ApiAnswer> {
    if (body === undefined) return uploadAnswer(await this.call("POST", uploadPath(uploadId) + "/complete", {}, undefined, opts));
    return uploadAnswer(await this.call("POST", uploadPath(uploadId) + "/complete", { "Content-Type": "application/json" }, JSON.stringify(body), opts));
  }

  /** DELETE /uploads/{uploadId}: discards a multipart upload and the parts stored so far. One attempt. */
  async abort(uploadId: string, opts: CallOptions = {}): Promise<ApiAnswer> {
    return uploadAnswer(await this.call("DELETE", uploadPath(uploadId), {}, undefined, opts));
  }

  private async call(method: string, path: string, headers: Record<string, string>, body: string | undefined, opts: CallOptions): Promise<RawAnswer> {
    const state: RequestState = opts.request ?? { freshTokenAsked: false, repeats: 0 };
    if (opts.signal?.aborted) throw abortError(opts.signal);
    // Asked without an argument: a function that takes none works as it always did.
    let auth = (await this.authorization?.()) || undefined;
    for (;;) {
      try {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        return await this.send(method, path, auth === undefined ? headers : { ...headers, Authorization: auth }, body, opts);
      } catch (e) {
        // A 401 from the API (not a foreign answer): the token may have
        // expired; one repeat, at once, with a fresh one (retry-policy.json
        // "unauthorized"). The same token again cannot help.
        if (!(e instanceof UploadError) || e.kind !== "api" || e.status !== 401 || !this.authorization || state.freshTokenAsked) throw e;
        state.freshTokenAsked = true;
        const fresh = await this.freshToken(opts);
        if (!fresh || fresh === auth) throw e;
        auth = fresh;
        state.repeats++;
      }
    }
  }

  private async freshToken(opts: CallOptions): Promise<string | undefined> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const auth = (await this.authorization?.({ fresh: true })) || undefined;
    if (opts.signal?.aborted) throw abortError(opts.signal);
    return auth;
  }

  /** One request, one answer. */
  private async send(method: string, path: string, headers: Record<string, string>, body: string | undefined, opts: CallOptions): Promise<RawAnswer> {
    const url = this.url(path);
    const { signal, done } = attemptSignal(opts.signal, opts.timeoutMs ?? Infinity);
    try {
      let res: Response;
      let text: string;
      try {
        res = await this.fetchFn(url, method === "GET" ? { method, headers, signal, cache: "no-store" } : { method, headers, body, signal });
        text = await res.text();
      } catch (e) {
        if (signal.aborted) {
          const err = abortError(signal);
          if (err.kind !== "timeout") throw err;
          throw new UploadError({ kind: "timeout", message: `${method} ${url}: ${err.message}`, retryable: err.retryable, url, cause: err });
        }
        // fetch rejects with a TypeError on any network failure, CORS refusals included.
        throw new UploadError({ kind: "network", message: `no answer from ${url}: ${networkReason(e)}`, retryable: isRetryableStatus(0), url, cause: e });
      }
      if (res.ok) return { text, status: res.status, replay: res.headers.get("Idempotent-Replay") === "true", url, res };
      throw apiError(res, text, this.now(), url);
    } finally {
      done();
    }
  }
}

/**
 * How a request got no answer, as far as fetch says: node's fetch gives the
 * cause's code ("connect ECONNREFUSED 127.0.0.1:1", "getaddrinfo ENOTFOUND
 * api.test"); a browser says only "Failed to fetch" (Chrome), "NetworkError
 * when attempting to fetch resource." (Firefox) or "Load failed" (Safari),
 * whatever happened.
 */
function networkReason(e: unknown): string {
  const cause: unknown = e instanceof Error ? e.cause : undefined;
  if (cause instanceof Error && cause.message) {
    const code = (cause as { code?: unknown }).code;
    if (code === "ECONNREFUSED") return `connection refused (${cause.message})`;
    if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `unknown host (${cause.message})`;
    return cause.message;
  }
  const m = errorText(e);
  if (e instanceof TypeError && /failed to fetch|networkerror|load failed/i.test(m)) {
    return `${m} (connection refused, unknown host, TLS or CORS failure: the browser does not say which)`;
  }
  return m;
}

interface RawAnswer {
  text: string;
  status: number;
  replay: boolean;
  url: string;
  res: Response;
}

function uploadPath(uploadId: string): string {
  return "uploads/" + encodeURIComponent(uploadId);
}

function uploadAnswer(res: RawAnswer): ApiAnswer {
  return { body: checkUpload(jsonBody(res), res.status), status: res.status, replay: res.replay };
}

/** A 2xx's body, parsed; one that is not JSON is not the API's (a web page, say): a foreign answer. */
function jsonBody(res: RawAnswer): unknown {
  try {
    return JSON.parse(res.text);
  } catch {
    throw foreignError(res.res, res.text, res.url);
  }
}

function partList(res: RawAnswer): unknown[] {
  const b = jsonBody(res);
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

/** An error code a newer server may add: lower snake_case (with a message beside it). */
const API_CODE_SHAPE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

/**
 * The answers API Gateway gives itself, before the API's code runs, with a
 * body `{"message": "…"}`: its authorizer's 401 and 403, throttling's 429,
 * and 500, 502, 503 and 504 when the integration failed or timed out.
 */
const GATEWAY_STATUSES: ReadonlySet<number> = new Set([401, 403, 429, 500, 502, 503, 504]);

/**
 * Who gave an error answer to an API request: the API (an error body with
 * one of its codes, or one shaped like a newer one), API Gateway (its
 * `{"message": …}` with one of its statuses), or something else: the base
 * URL does not point at a onceupload API (as pkg/client/foreign.go).
 */
export function classifyAnswer(status: number, text: string): { from: "api"; code: string; message?: string } | { from: "gateway"; message: string } | { from: "foreign" } {
  let b: unknown;
  try {
    b = JSON.parse(text);
  } catch {
    return { from: "foreign" };
  }
  if (!b || typeof b !== "object" || Array.isArray(b)) return { from: "foreign" };
  const o = b as Record<string, unknown>;
  const message = typeof o.message === "string" ? o.message : undefined;
  if (typeof o.error === "string" && (API_CODES.has(o.error) || (message !== undefined && API_CODE_SHAPE.test(o.error)))) return { from: "api", code: o.error, message };
  if (o.error === undefined && message !== undefined && GATEWAY_STATUSES.has(status)) return { from: "gateway", message };
  return { from: "foreign" };
}

/** An error answer of the API as an UploadError; kind "foreign" when it is not the API's, nor API Gateway's (see {@link classifyAnswer}). */
export function apiError(res: Response, text: string, now: number, url?: string): UploadError {
  const who = classifyAnswer(res.status, text);
  if (who.from === "foreign") return foreignError(res, text, url);
  const code = who.from === "api" ? who.code : undefined;
  return new UploadError({
    kind: "api",
    status: res.status,
    code,
    message: who.message || res.statusText || `HTTP ${res.status}`,
    retryable: isRetryableStatus(res.status, code),
    retryAfterMs: parseRetryAfter(res.headers.get("Retry-After"), now),
    url,
  });
}

/** What answered, on one line: the status, the Server header and media type (when the browser shows them), the first bytes of the body. */
export function describeAnswer(res: Response, text: string): string {
  let s = `${res.status}${res.statusText ? " " + res.statusText : ""}`;
  const server = res.headers.get("Server");
  if (server) s += `, Server: ${server}`;
  const type = res.headers.get("Content-Type");
  if (type) s += `, Content-Type: ${type}`;
  if (text) s += `, body ${JSON.stringify(firstChars(text, 80))}`;
  return s;
}

/** Up to n characters of s, on one line, cut between code points. */
export function firstChars(s: string, n: number): string {
  const line = s.split(/\s+/).filter(Boolean).join(" ");
  const chars = Array.from(line);
  return chars.length <= n ? line : chars.slice(0, n).join("") + "…";
}

/**
 * The error of an answer that is not a onceupload API's. It is retried only
 * when its status is one that may pass (a proxy's 502 or 503 page while the
 * API is briefly away), as the Go client does; anything else asks the same
 * wrong URL again and gets the same.
 */
function foreignError(res: Response, text: string, url?: string): UploadError {
  const answer = describeAnswer(res, text);
  return new UploadError({
    kind: "foreign",
    status: res.status,
    message: `not a onceupload API: ${url ?? "the API's base URL"} answered ${answer}`,
    retryable: isRetryableStatus(res.status),
    url,
    answer,
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
  return checkUpload(b, status);
}

/** Checks the shape of a 2xx body, parsed. */
function checkUpload(b: unknown, status: number): UploadResponse {
  if (!b || typeof b !== "object") throw protocolError(status, "not an object");
  const o = b as Record<string, unknown>;
  for (const f of ["uploadId", "storageKey"] as const) {
    if (typeof o[f] !== "string" || o[f] === "") throw protocolError(status, `no ${f}`);
  }
  // A multipart upload created without the whole file's SHA-256 has none.
  if (o.sha256 !== undefined && (typeof o.sha256 !== "string" || o.sha256 === "")) throw protocolError(status, "no sha256");
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
  if (typeof o.sha256 !== "string") throw protocolError(status, "no sha256");
  return b as PendingUpload;
}
