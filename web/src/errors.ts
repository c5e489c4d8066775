/**
 * Typed errors a UI can show. Every failure the client reports is an
 * {@link UploadError}: `kind` says where it happened, `retryable` whether
 * trying again later (Resume) can help, and `message` is a sentence for people.
 */
import { PROBABLY_CORS, STORAGE_UNANSWERED, TOO_MANY_UPLOADS } from "./codes.js";

/** Where an upload failed. */
export type UploadErrorKind =
  /** The API answered with an error status (see `status` and `code`). */
  | "api"
  /** The storage (S3) refused or failed the PUT (see `status` and `code`). */
  | "storage"
  /** No answer: the connection failed or was dropped. */
  | "network"
  /** One attempt took longer than its time limit. */
  | "timeout"
  /** The overall deadline passed before an attempt succeeded. */
  | "deadline"
  /** The caller aborted (AbortSignal), e.g. the user pressed Cancel. */
  | "aborted"
  /** The file cannot be read, or is not the file that was picked. */
  | "file"
  /** The upload is already running elsewhere (another tab). */
  | "busy"
  /** Local state (IndexedDB) failed, or the record is missing. */
  | "state"
  /** The server answered something that breaks the contract. */
  | "protocol"
  /**
   * What answers at the API's base URL is not a onceupload API (a wrong
   * path such as /v1, S3, a web server): neither an error body with one of
   * the API's codes nor one of API Gateway's own `{"message": …}` answers.
   * `url`, `status` and `answer` say what answered. Never retried.
   */
  | "foreign";

export interface UploadErrorInit {
  kind: UploadErrorKind;
  message: string;
  /** HTTP status, when there was a response. */
  status?: number;
  /** The API's `error` code (e.g. `idempotency_key_reuse`) or S3's `<Code>`. */
  code?: string;
  /** Whether the same request may succeed if tried again. */
  retryable?: boolean;
  /** The server's Retry-After, in milliseconds, if it sent one. */
  retryAfterMs?: number;
  /** How many attempts were made before giving up. */
  attempts?: number;
  /** The URL that failed (an API request's: no answer, or a foreign answer). */
  url?: string;
  /** Kind "foreign": what answered, on one line (status, media type, the first bytes of the body). */
  answer?: string;
  cause?: unknown;
}

export class UploadError extends Error {
  readonly kind: UploadErrorKind;
  readonly status?: number;
  readonly code?: string;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  /** The URL that failed, when known (see {@link UploadErrorInit.url}). */
  readonly url?: string;
  /** Kind "foreign": what answered. */
  readonly answer?: string;
  attempts: number;

  constructor(init: UploadErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "UploadError";
    this.kind = init.kind;
    this.status = init.status;
    this.code = init.code;
    this.retryable = init.retryable ?? false;
    this.retryAfterMs = init.retryAfterMs;
    this.attempts = init.attempts ?? 1;
    if (init.url !== undefined) this.url = init.url;
    if (init.answer !== undefined) this.answer = init.answer;
  }

  /** A plain object for IndexedDB or logs. */
  toJSON(): SerializedUploadError {
    return {
      kind: this.kind,
      message: this.message,
      status: this.status,
      code: this.code,
      retryable: this.retryable,
      attempts: this.attempts,
      ...(this.url !== undefined ? { url: this.url } : {}),
      ...(this.answer !== undefined ? { answer: this.answer } : {}),
    };
  }

  static fromJSON(e: SerializedUploadError): UploadError {
    return new UploadError(e);
  }
}

export interface SerializedUploadError {
  kind: UploadErrorKind;
  message: string;
  status?: number;
  code?: string;
  retryable: boolean;
  attempts: number;
  url?: string;
  answer?: string;
}

export function isUploadError(e: unknown): e is UploadError {
  return e instanceof UploadError;
}

/** Whether `e` says the base URL is not a onceupload API (kind "foreign"; its `url`, `status` and `answer` say what answered). */
export function isNotOnceupload(e: unknown): e is UploadError & { kind: "foreign"; answer: string } {
  return e instanceof UploadError && e.kind === "foreign";
}

/** The error an aborted signal should surface as. */
export function abortError(signal?: AbortSignal): UploadError {
  const reason: unknown = signal?.reason;
  if (reason instanceof UploadError) return reason;
  return new UploadError({ kind: "aborted", message: "The upload was stopped.", cause: reason });
}

/** Wraps anything thrown into an UploadError (unknown errors are not retryable). */
export function toUploadError(e: unknown, fallback: UploadErrorKind = "state"): UploadError {
  if (e instanceof UploadError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new UploadError({ kind: fallback, message, cause: e });
}

/**
 * The message, then the code and status in brackets, saying the status once:
 * a message that is only the status (an answer with no text of its own,
 * "HTTP 403") gives way to the code.
 */
function withStatus(e: UploadError): string {
  const onlyStatus = e.message === `HTTP ${e.status}`;
  if (!e.code) return onlyStatus ? e.message : `${e.message} (HTTP ${e.status})`;
  return onlyStatus ? `${e.code} (HTTP ${e.status})` : `${e.message} (${e.code}, HTTP ${e.status})`;
}

/** A sentence for the UI, with the server's code where it helps. */
export function describeError(e: UploadError): string {
  switch (e.kind) {
    case "network":
      if (e.code === PROBABLY_CORS) return e.message;
      if (e.code === STORAGE_UNANSWERED) return `The network failed: ${e.message}.`;
      // "no answer from https://…/uploads: …": which URL fails, and how.
      return e.url ? `The network failed: ${e.message}.` : "The network failed (no answer from the server).";
    case "timeout":
      return "The server took too long to answer.";
    case "foreign":
      return `This is not a onceupload API: ${e.url ?? "the base URL"} answered ${e.answer ?? `HTTP ${e.status}`}. Check the API's base URL.`;
    case "deadline":
      return `Gave up after ${e.attempts} attempt${e.attempts === 1 ? "" : "s"}: ${e.message}`;
    case "aborted":
      return "Stopped.";
    case "api":
      // Not retried, whatever the wait: say what frees a place.
      if (e.status === 429 && e.code === TOO_MANY_UPLOADS) {
        return "Too many unfinished uploads: the server allows only so many large uploads in progress at once. Finish or abort some of them, then try this one again.";
      }
      return withStatus(e);
    case "storage":
      return e.code ? `Storage refused the upload: ${withStatus(e)}` : `Storage refused the upload (HTTP ${e.status}).`;
    default:
      return e.message;
  }
}
