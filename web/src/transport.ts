/**
 * The PUT of the bytes to the presigned URL. XMLHttpRequest, because it is
 * the browser API with upload progress events. The signed headers are sent as
 * given, except Content-Length, which the browser sets from the body (and
 * forbids scripts to set).
 */
import { CHANGED_BYTES_CODES, EXPIRED_TOKEN, PROBABLY_CORS } from "./codes.js";
import { UploadError, abortError } from "./errors.js";
import { Unretried, isRetryableStatus } from "./retry.js";

export interface PutRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: Blob;
  signal?: AbortSignal;
  /** Give up when no upload progress was seen for this long, in ms (Infinity: never). */
  stallTimeoutMs?: number;
  onProgress?: (loaded: number, total: number) => void;
}

export interface PutResponse {
  status: number;
  /** The response body (S3 sends XML errors). */
  text: string;
  etag: string | null;
}

/**
 * Sends one PUT. Resolves with any HTTP status; rejects with an UploadError
 * of kind "network", "timeout" or "aborted" when there is no status.
 */
export type PutTransport = (req: PutRequest) => Promise<PutResponse>;

/** Headers the browser sets itself and refuses from scripts. */
const FORBIDDEN = new Set(["content-length", "host", "connection", "expect", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "date", "origin", "referer"]);

export function sendableHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (!FORBIDDEN.has(k.toLowerCase())) out[k] = v;
  }
  return out;
}

export const xhrTransport: PutTransport = (req) =>
  new Promise<PutResponse>((resolve, reject) => {
    if (req.signal?.aborted) {
      reject(abortError(req.signal));
      return;
    }
    const xhr = new XMLHttpRequest();
    let stallTimer: ReturnType<typeof setTimeout> | undefined;
    let stalled = false;
    const stallMs = req.stallTimeoutMs ?? Infinity;
    const armStallTimer = () => {
      if (!Number.isFinite(stallMs)) return;
      if (stallTimer !== undefined) clearTimeout(stallTimer);
      stallTimer = setTimeout(() => {
        stalled = true;
        xhr.abort();
      }, stallMs);
    };
    const cleanup = () => {
      if (stallTimer !== undefined) clearTimeout(stallTimer);
      req.signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => xhr.abort();
    req.signal?.addEventListener("abort", onAbort, { once: true });

    xhr.open(req.method, req.url, true);
    for (const [k, v] of Object.entries(sendableHeaders(req.headers))) xhr.setRequestHeader(k, v);
    xhr.responseType = "text";
    xhr.upload.onprogress = (e) => {
      armStallTimer();
      req.onProgress?.(e.loaded, e.lengthComputable ? e.total : req.body.size);
    };
    xhr.onload = () => {
      cleanup();
      resolve({ status: xhr.status, text: xhr.responseText, etag: xhr.getResponseHeader("ETag") });
    };
    // Status 0: DNS, connection, TLS or CORS failure; the browser does not say which.
    xhr.onerror = () => {
      cleanup();
      reject(new UploadError({ kind: "network", message: "PUT to storage: no answer (network or CORS failure)", retryable: true }));
    };
    xhr.onabort = () => {
      cleanup();
      if (stalled) {
        reject(new UploadError({ kind: "timeout", message: `PUT to storage: no progress for ${Math.round(stallMs / 1000)} s`, retryable: true }));
      } else {
        reject(abortError(req.signal));
      }
    };
    armStallTimer();
    xhr.send(req.body);
  });

/**
 * How a PUT that did not fail ended (retry-policy.json's "outcomes"):
 * "stored", S3 took these bytes (a 2xx); "already-stored", S3 answered 412
 * PreconditionFailed to a PUT that sent `If-None-Match: *`. A single PUT's
 * URL signs that header (and the bytes' length and SHA-256), so it only
 * ever creates its object: the object was there already, stored by an
 * earlier attempt whose answer was lost, or by another PUT of the same
 * upload that won a race. Either way the upload is confirmed with
 * `GET /uploads/{id}`; neither is retried.
 */
export type PutOutcome = "stored" | "already-stored";

/** Whether a PUT's headers (a single PUT's `upload.headers`) include `If-None-Match: *`, whatever the name's case. */
export function sendsIfNoneMatch(headers: Record<string, string>): boolean {
  return Object.entries(headers).some(([k, v]) => k.toLowerCase() === "if-none-match" && v.trim() === "*");
}

/**
 * The outcome of a PUT's answer, or undefined when it is an error (see
 * {@link storageError}). A 412 is "already-stored" only for a PUT that sent
 * `If-None-Match: *` (`createOnly`); otherwise it is an error, not retried.
 */
export function putOutcome(res: Pick<PutResponse, "status">, createOnly: boolean): PutOutcome | undefined {
  if (res.status >= 200 && res.status <= 299) return "stored";
  if (createOnly && res.status === 412) return "already-stored";
  return undefined;
}

/**
 * Whether S3 refused a PUT because its URL no longer works: 403 (the URL's
 * own expiry) or 400 ExpiredToken (the session credentials that signed it
 * expired first). A fresh URL cures both.
 */
export function urlNoLongerWorks(err: { status?: number; code?: string }): boolean {
  return err.status === 403 || (err.status === 400 && err.code === EXPIRED_TOKEN);
}

/**
 * The error for a PUT answer that is not 2xx. S3 answers with an XML body
 * whose `<Code>` says why (AccessDenied, BadDigest, SlowDown, …).
 */
export function storageError(res: PutResponse): UploadError {
  const code = /<Code>([^<]*)<\/Code>/.exec(res.text)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(res.text)?.[1];
  if (res.status === 400 && code && CHANGED_BYTES_CODES.has(code)) {
    return new UploadError({
      kind: "file",
      status: res.status,
      code,
      message: "The file changed after it was picked: storage refused bytes that do not match its SHA-256 or size. Pick it again.",
    });
  }
  // The same table as the API's: S3 answers 503 SlowDown, 500 InternalError,
  // 409 ConditionalRequestConflict (two PUTs with If-None-Match raced), …
  const retryable = isRetryableStatus(res.status, code);
  return new UploadError({
    kind: "storage",
    status: res.status,
    code,
    message: message ?? `HTTP ${res.status}`,
    retryable,
  });
}

/**
 * Tries of one storage request that may fail with no answer, before the
 * storage has answered anything or taken a byte in the run, until the run
 * ends taken for a CORS refusal ({@link StorageReach}).
 */
export const NO_ANSWER_TRIES = 3;

/**
 * Tells a storage that refuses this page's origin (CORS) from a network
 * that fails, as far as a page can. The browser hides a CORS refusal: the
 * PUT fails as a dropped connection does, with no status (XHR's error
 * event, fetch's TypeError). What differs is what came before: the API
 * has just answered (it gave the URL), so the network works; and the
 * storage refuses the origin from the first request on, before a byte of
 * any PUT is sent, where a network drop cuts off a storage that took bytes
 * or answered before. So in one run, until some storage request has shown
 * upload progress or got an answer (any status, an error included),
 * a request whose tries all failed with no answer while the device is
 * online ends the run at its {@link NO_ANSWER_TRIES}th try, with a
 * PROBABLY_CORS error (kind "network", retryable: Resume tries again, as
 * it should once the storage's rules allow the origin). A real drop right
 * after the API answered gets the same few retries, then that error and a
 * Resume; a drop once bytes moved is retried as before, for the whole
 * budget.
 */
export class StorageReach {
  /** A storage request of this run showed progress or got an answer. */
  private reached = false;

  constructor(
    private readonly isOnline: () => boolean,
    private readonly tries = NO_ANSWER_TRIES,
  ) {}

  /** The transport for one request (all its tries), watched. */
  watch(inner: PutTransport): PutTransport {
    let silent = 0;
    return async (req) => {
      let res: PutResponse;
      try {
        res = await inner({
          ...req,
          onProgress: (loaded, total) => {
            if (loaded > 0) this.reached = true;
            req.onProgress?.(loaded, total);
          },
        });
      } catch (e) {
        const noAnswer = e instanceof UploadError && e.kind === "network" && e.status === undefined && !req.signal?.aborted;
        if (!noAnswer || this.reached || !this.isOnline()) throw e;
        if (++silent < this.tries) throw e;
        throw new Unretried(probablyCors(e, silent));
      }
      this.reached = true;
      return res;
    };
  }
}

function probablyCors(cause: UploadError, tries: number): UploadError {
  const origin = globalThis.location?.origin;
  return new UploadError({
    kind: "network",
    code: PROBABLY_CORS,
    retryable: true,
    attempts: tries,
    message:
      `The storage never answered this page: ${tries} tries to send the file failed with no answer before a byte was sent, right after the API answered. ` +
      `This is probably refused by the storage's CORS rules for this origin${origin ? ` (${origin})` : ""}: Resume once they allow it.`,
    cause,
  });
}
