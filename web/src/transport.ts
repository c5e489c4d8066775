/**
 * The PUT of the bytes to the presigned URL. XMLHttpRequest, because it is
 * the browser API with upload progress events. The signed headers are sent as
 * given, except Content-Length, which the browser sets from the body (and
 * forbids scripts to set).
 */
import { CHANGED_BYTES_CODES, EXPIRED_TOKEN, PROBABLY_CORS, STORAGE_UNANSWERED } from "./codes.js";
import { UploadError, abortError } from "./errors.js";
import { Unretried, attemptSignal, isRetryableStatus } from "./retry.js";

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

export const xhrTransport: PutTransport = (req) => xhrPut(req);

/**
 * {@link xhrTransport} with a body of bytes at hand (a worker that read a
 * part sends those bytes). XHR takes its own copy of an ArrayBuffer body
 * when it is sent: the caller may drop it once this returns.
 */
export function xhrPut(req: Omit<PutRequest, "body"> & { body: Blob | Uint8Array<ArrayBuffer> }): Promise<PutResponse> {
  const size = req.body instanceof Uint8Array ? req.body.byteLength : req.body.size;
  return new Promise<PutResponse>((resolve, reject) => {
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
      req.onProgress?.(e.loaded, e.lengthComputable ? e.total : size);
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
}

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
 * Tries of one storage request that fail with no answer, before the storage
 * has answered anything or taken a byte in the run, after which the page
 * says it may be CORS (a hint while retrying), and after which a probe
 * that finds the storage reachable ends the run ({@link StorageReach}).
 */
export const NO_ANSWER_TRIES = 3;

/** A probe that has not answered in this long proves nothing (a network that drops packets). */
export const PROBE_TIMEOUT_MS = 10_000;

/**
 * Asks whether the storage at `url` (its origin) can be reached from this
 * page at all, outside CORS: resolves if it answered anything, rejects if
 * not, or if the browser will not say. Injected for tests.
 */
export type StorageProbe = (url: string, signal: AbortSignal) => Promise<unknown>;

/**
 * `fetch(origin, {mode: "no-cors"})`: CORS does not apply to it, so it
 * resolves (an opaque response, whatever the status) whenever the storage
 * answers; S3 answers an anonymous GET with an XML 403. Only an opaque
 * response counts: any other type (a service worker's fallback page) was
 * not made by the storage, and rejects. Its rejection
 * proves nothing: the network is down, or the browser withholds the
 * answer (a browser whose opaque-response blocking refuses S3's XML error
 * body fails the fetch, where Chromium's resolves it empty).
 */
export const noCorsProbe: StorageProbe = async (url, signal) => {
  const res = await fetch(url, { mode: "no-cors", cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer", signal });
  // Only an opaque response comes from the storage: any other type was made
  // on this side (a service worker answering with a fallback page).
  if (res.type !== "opaque") throw new Error(`no-cors probe: a ${res.type} response, not the storage's`);
  return res;
};

/**
 * Tells a storage that refuses this page's origin (CORS) from a network
 * that fails, with evidence, not a guess. The browser hides a CORS
 * refusal: the PUT fails as a dropped connection does, with no status
 * (XHR's error event, fetch's TypeError); and no answer is never a
 * verdict by itself: a network that is down for a few seconds right
 * after the API answered looks the same, and navigator.onLine stays true
 * whenever a link is up, whether or not the path to the storage is. So a
 * request that fails with no answer is retried with the usual backoff,
 * for the whole budget, unless there is evidence that waiting cannot help:
 * the storage reachable (a {@link StorageProbe}, which CORS does not
 * govern, resolves) while every CORS request to it fails.
 *
 * In one run, until some storage request has shown upload progress or got
 * an answer (any status, an error included): from a request's
 * {@link NO_ANSWER_TRIES}-1th try that failed with no answer while the
 * device is online, the storage is probed after each such failure. A try
 * that fails with no answer between two probes that both found the storage
 * reachable, once the request has failed so {@link NO_ANSWER_TRIES} times,
 * ends the run with a PROBABLY_CORS error (kind "network", retryable:
 * Resume tries again, as it should once the storage's rules allow the
 * origin). Anything less (a probe rejected, or one that resolves only once
 * the network is back) keeps retrying; from the {@link NO_ANSWER_TRIES}th
 * failure on, the retries carry a STORAGE_UNANSWERED error, so that the
 * page can say it may be CORS as a hint, not as a final error.
 */
export class StorageReach {
  /** A storage request of this run showed progress or got an answer. */
  private reached = false;

  constructor(
    private readonly isOnline: () => boolean,
    private readonly probe: StorageProbe = noCorsProbe,
    private readonly tries = NO_ANSWER_TRIES,
  ) {}

  /** The transport for one request (all its tries), watched. */
  watch(inner: PutTransport): PutTransport {
    let silent = 0;
    // The last probe of this request (made after its previous try failed) found the storage reachable.
    let reachable = false;
    return async (req) => {
      // Reachable before this try started: the probe after the previous failure.
      const reachableBefore = reachable;
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
        if (!noAnswer || this.reached || !this.isOnline()) {
          // A try that is not counted (offline, timed out, aborted, answered
          // with an error) breaks the chain of evidence: what a probe found
          // before it says nothing about the storage after it.
          reachable = false;
          throw e;
        }
        silent++;
        if (silent < this.tries - 1) {
          reachable = false;
          throw e;
        }
        reachable = await this.reachable(req);
        // Reachable before and after a CORS request that got no answer: waiting cannot help.
        if (silent >= this.tries && reachableBefore && reachable && !this.reached) throw new Unretried(probablyCors(e, silent));
        if (silent >= this.tries) throw unanswered(e);
        throw e;
      }
      this.reached = true;
      return res;
    };
  }

  /** Whether the probe found the storage of req reachable; false for anything it cannot prove. */
  private async reachable(req: PutRequest): Promise<boolean> {
    let url: string;
    try {
      url = new URL(req.url).origin + "/";
    } catch {
      return false;
    }
    const { signal, done } = attemptSignal(req.signal, PROBE_TIMEOUT_MS);
    // Raced against its own signal: a probe that ignores the signal (an
    // injected one) must not hold the request beyond the time limit or a Pause.
    let onAbort: (() => void) | undefined;
    const ended = new Promise<never>((_, reject) => {
      onAbort = () => reject(new Error("probe ended"));
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      await Promise.race([this.probe(url, signal), ended]);
      return !signal.aborted;
    } catch {
      return false;
    } finally {
      if (onAbort) signal.removeEventListener("abort", onAbort);
      done();
    }
  }
}

function pageOrigin(): string {
  const origin = globalThis.location?.origin;
  return origin ? ` (${origin})` : "";
}

function probablyCors(cause: UploadError, tries: number): UploadError {
  return new UploadError({
    kind: "network",
    code: PROBABLY_CORS,
    retryable: true,
    attempts: tries,
    message:
      `The storage never answered this page: ${tries} tries to send the file failed with no answer, while the storage could be reached without CORS. ` +
      `This is probably refused by the storage's CORS rules for this origin${pageOrigin()}: Resume once they allow it.`,
    cause,
  });
}

/** A try that failed with no answer, again: retried, with a hint the page may show. */
function unanswered(cause: UploadError): UploadError {
  return new UploadError({
    kind: "network",
    code: STORAGE_UNANSWERED,
    retryable: true,
    message: `no answer from the storage; if this persists, check its CORS rules for this origin${pageOrigin()}`,
    cause,
  });
}
