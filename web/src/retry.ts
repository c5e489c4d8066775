/**
 * The one retry policy of every onceupload client, stated for both clients in
 * pkg/api/testdata/retry-policy.json (this client's tests read that table):
 * full-jitter backoff `random(0, min(maxDelay, baseDelay·2^retry))`,
 * `Retry-After` honoured (seconds or an HTTP date, capped), retries only of
 * what may succeed when repeated (no answer, 408, 425, 429 but not
 * `too_many_uploads`, 500, 502, 503, 504, 409 `idempotency_in_progress`, and
 * S3's 409 `ConditionalRequestConflict` and 400 `RequestTimeout`), and a
 * retry budget per request rather than a count of attempts: a network that
 * is down for a few seconds (a phone handing off from Wi-Fi to LTE) costs a
 * few retries, not the upload.
 *
 * While the browser says it is offline, no attempt is made and no budget is
 * spent: the loop waits for the `online` event.
 *
 * Time, randomness and the network's state are injected ({@link Clock},
 * `random`, {@link Network}) so that tests run on a virtual clock.
 */
import { CONDITIONAL_REQUEST_CONFLICT, IDEMPOTENCY_IN_PROGRESS, REQUEST_TIMEOUT, TOO_MANY_UPLOADS } from "./codes.js";
import { UploadError, abortError } from "./errors.js";

/** Wall time and waiting. Tests pass a fake. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the abort error when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(abortError(signal));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

/**
 * Whether the device has a network. Only "offline" is trusted: a browser
 * that says it is online may still reach nothing, which the requests find out.
 */
export interface Network {
  isOnline(): boolean;
  /** Calls `fn` when the device goes offline; returns the unsubscribe function. */
  onOffline(fn: () => void): () => void;
  /** Resolves once the device is online (at once if it is); rejects with the abort error when `signal` aborts. */
  waitOnline(signal?: AbortSignal): Promise<void>;
}

/** navigator.onLine and the window's online/offline events; always online where there are none (workers without them, node). */
export const browserNetwork: Network = {
  isOnline: () => globalThis.navigator?.onLine !== false,
  onOffline: (fn) => {
    if (typeof globalThis.addEventListener !== "function") return () => {};
    globalThis.addEventListener("offline", fn);
    return () => globalThis.removeEventListener("offline", fn);
  },
  waitOnline: (signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      if (browserNetwork.isOnline() || typeof globalThis.addEventListener !== "function") return resolve();
      const done = () => {
        globalThis.removeEventListener("online", onOnline);
        signal?.removeEventListener("abort", onAbort);
      };
      const onOnline = () => {
        done();
        resolve();
      };
      const onAbort = () => {
        done();
        reject(abortError(signal));
      };
      globalThis.addEventListener("online", onOnline);
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

/** The shared policy's fields carry the shared table's names (retry-policy.json "defaults"). */
export interface RetryPolicy {
  /** First backoff ceiling, in ms. */
  baseDelayMs: number;
  /** Largest backoff ceiling, in ms. */
  maxDelayMs: number;
  /** Longest wait a server's Retry-After may impose, in ms. */
  maxRetryAfterMs: number;
  /** No retry whose wait would end later than this after the request's first attempt, in ms (time offline not counted). */
  retryBudgetMs: number;
  /** Attempts in all, the first included; 0: no cap (the budget bounds them). */
  maxAttempts: number;
  /** This client's own addition: the time limit of one attempt, in ms (Infinity: none). */
  attemptTimeoutMs: number;
}

export const DEFAULT_POLICY: RetryPolicy = {
  baseDelayMs: 250,
  maxDelayMs: 20_000,
  maxRetryAfterMs: 60_000,
  retryBudgetMs: 300_000,
  maxAttempts: 0,
  attemptTimeoutMs: 15_000,
};

/** Statuses that may succeed when repeated; 0 is no answer at all. A code can change that either way: see {@link isRetryableStatus}. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([0, 408, 425, 429, 500, 502, 503, 504]);

/** Error codes that make a status retryable (the API's `error`, or S3's `<Code>`). */
const RETRYABLE_CODES: ReadonlyMap<number, ReadonlySet<string>> = new Map([
  [409, new Set([IDEMPOTENCY_IN_PROGRESS, CONDITIONAL_REQUEST_CONFLICT])],
  // S3's answer to an upload connection that stalled.
  [400, new Set([REQUEST_TIMEOUT])],
]);

/** Error codes that make a retryable status final. */
const FINAL_CODES: ReadonlyMap<number, ReadonlySet<string>> = new Map([[429, new Set([TOO_MANY_UPLOADS])]]);

/**
 * Whether an answer may succeed when repeated (retry-policy.json's
 * "retryable" table): a status of {@link RETRYABLE_STATUSES} unless its code
 * makes it final (429 `too_many_uploads`), or another status whose code
 * makes it retryable (409 `idempotency_in_progress`, S3's 409
 * `ConditionalRequestConflict` and 400 `RequestTimeout`).
 */
export function isRetryableStatus(status: number, code?: string): boolean {
  if (RETRYABLE_STATUSES.has(status)) return code === undefined || !FINAL_CODES.get(status)?.has(code);
  return code !== undefined && RETRYABLE_CODES.get(status)?.has(code) === true;
}

/**
 * Full jitter: a uniform draw from [0, min(maxDelay, baseDelay·2^retry)),
 * where `retry` counts the retries already made (0 before the first retry).
 */
export function backoffDelay(retry: number, policy: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs">, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(retry, 52));
  return Math.floor(random() * ceiling);
}

// The three HTTP-date forms (RFC 9110 §5.6.7), all in GMT.
const IMF_FIXDATE = /^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Za-z]{6,9}, \d{2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * A Retry-After header in ms: delta-seconds or an HTTP date (RFC 9110).
 * Undefined when absent or unreadable; a date in the past gives 0.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value == null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  let at = NaN;
  if (IMF_FIXDATE.test(v) || RFC850_DATE.test(v)) at = Date.parse(v);
  else if (ASCTIME_DATE.test(v)) at = Date.parse(v + " GMT");
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/**
 * Thrown by an attempt to end {@link retry} at once with `error`, whether
 * or not it is retryable (retry() rethrows at once what is not an
 * UploadError); the caller unwraps it.
 */
export class Unretried extends Error {
  constructor(readonly error: UploadError) {
    super(error.message);
  }
}

/** What the UI hears before each wait. */
export interface RetryInfo {
  /** The attempt that failed (1-based). */
  attempt: number;
  /** How long until the next attempt, in ms (0 when waiting for the network). */
  delayMs: number;
  /** Why it failed. */
  error: UploadError;
  /** Whether the delay came from the server's Retry-After. */
  fromRetryAfter: boolean;
  /** The device is offline: the next attempt waits for it to be online again, however long that takes. */
  offline: boolean;
}

/**
 * One request's state across its attempts (the same object at every
 * attempt): the repeat with a fresh token that a 401 gets (retry-policy.json
 * "unauthorized") is made at most once per request, and is not one of the
 * policy's `maxAttempts`.
 */
export interface RequestState {
  /** Whether a fresh token was asked for already (a 401's repeat was made, or found pointless). */
  freshTokenAsked: boolean;
  /** Requests sent besides the attempts: the repeat with a fresh token. */
  repeats: number;
}

/** What each attempt is given. */
export interface AttemptContext {
  /** Shared by all the attempts of one request. */
  request: RequestState;
  /** 1-based. */
  attempt: number;
  /** Aborts when the caller aborts, or with a retryable network error when the device goes offline. */
  signal?: AbortSignal;
  /** The attempt's time limit: the smaller of the policy's and what is left of the budget. */
  timeoutMs: number;
}

export interface RetryOptions {
  policy?: Partial<RetryPolicy>;
  clock?: Clock;
  random?: () => number;
  /** Default: {@link browserNetwork}. */
  network?: Network;
  signal?: AbortSignal;
  onRetry?: (info: RetryInfo) => void;
}

/**
 * Runs `op` until it succeeds, it throws something not retryable, the
 * attempts run out, the next wait would end past the retry budget, or
 * `signal` aborts. Anything that is not an {@link UploadError} is not
 * retried. The error thrown carries the number of attempts made.
 */
export async function retry<T>(op: (ctx: AttemptContext) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const policy: RetryPolicy = { ...DEFAULT_POLICY, ...opts.policy };
  const clock = opts.clock ?? systemClock;
  const random = opts.random ?? Math.random;
  const network = opts.network ?? browserNetwork;
  const { signal } = opts;
  // The budget starts when the first attempt ends, so a long upload's own
  // sending time is not counted as retrying. Time spent offline moves its
  // end: waiting for the network is not retrying.
  let deadline: number | undefined;
  // The `retry` of the backoff formula: retries made since the network was last found to be back.
  let retries = 0;
  const request: RequestState = { freshTokenAsked: false, repeats: 0 };

  const waitOnline = async () => {
    const since = clock.now();
    await network.waitOnline(signal);
    if (deadline !== undefined) deadline += clock.now() - since;
  };

  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw abortError(signal);
    if (!network.isOnline()) await waitOnline();
    const left = deadline === undefined ? policy.attemptTimeoutMs : deadline - clock.now();
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const unsubscribe = network.onOffline(() =>
      ctrl.abort(new UploadError({ kind: "network", message: "The device went offline.", retryable: isRetryableStatus(0) })),
    );
    let error: UploadError;
    try {
      return await op({ attempt, request, signal: ctrl.signal, timeoutMs: Math.max(1, Math.min(policy.attemptTimeoutMs, left)) });
    } catch (e) {
      if (signal?.aborted) throw abortError(signal);
      if (!(e instanceof UploadError)) throw e;
      error = e;
    } finally {
      unsubscribe();
      signal?.removeEventListener("abort", onAbort);
    }
    // The requests sent: the attempts and a 401's repeat with a fresh token (not counted against maxAttempts).
    error.attempts = attempt + request.repeats;
    deadline ??= clock.now() + policy.retryBudgetMs;
    if (!error.retryable) throw error;
    if (policy.maxAttempts > 0 && attempt >= policy.maxAttempts) throw error;

    if (!network.isOnline() && error.status === undefined) {
      // No answer because there is no network: wait for it, then try at
      // once, with the backoff started afresh.
      opts.onRetry?.({ attempt, delayMs: 0, error, fromRetryAfter: false, offline: true });
      await waitOnline();
      retries = 0;
      continue;
    }
    const fromRetryAfter = error.retryAfterMs !== undefined;
    const delayMs = fromRetryAfter ? Math.min(error.retryAfterMs as number, policy.maxRetryAfterMs) : backoffDelay(retries, policy, random);
    retries++;
    if (clock.now() + delayMs > deadline) {
      throw new UploadError({
        kind: "deadline",
        message: `retrying for ${formatSeconds(policy.retryBudgetMs)} did not help (last error: ${error.message})`,
        status: error.status,
        code: error.code,
        retryable: true,
        attempts: error.attempts,
        url: error.url,
        cause: error,
      });
    }
    opts.onRetry?.({ attempt, delayMs, error, fromRetryAfter, offline: false });
    await clock.sleep(delayMs, signal);
  }
}

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

/**
 * An AbortSignal that aborts when `parent` does or after `timeoutMs`, with a
 * retryable timeout error as its reason. `done()` clears the timer.
 */
export function attemptSignal(parent: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; done: () => void } {
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(parent?.reason);
  if (parent?.aborted) ctrl.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (Number.isFinite(timeoutMs)) {
    timer = setTimeout(
      () => ctrl.abort(new UploadError({ kind: "timeout", message: `no answer within ${formatSeconds(timeoutMs)}`, retryable: true })),
      timeoutMs,
    );
  }
  return {
    signal: ctrl.signal,
    done: () => {
      if (timer !== undefined) clearTimeout(timer);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}
