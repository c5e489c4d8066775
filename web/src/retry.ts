/**
 * The retry policy of DESIGN.md ("Clients"): full-jitter exponential backoff
 * `random(0, min(cap, base·2^attempt))`, `Retry-After` honoured (seconds or an
 * HTTP date, capped), retries only of what may succeed when repeated (network
 * errors, timeouts, 408, 425, 429, 500, 502, 503, 504 and 409
 * `idempotency_in_progress`), an overall deadline, and AbortSignal support.
 *
 * Time and randomness are injected ({@link Clock}, `random`) so that tests run
 * on a virtual clock.
 */
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

export interface RetryPolicy {
  /** First backoff ceiling, in ms (`base`). */
  baseMs: number;
  /** Largest backoff ceiling, in ms (`cap`). */
  capMs: number;
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** Overall time budget from the first attempt, in ms (Infinity: none). */
  deadlineMs: number;
  /** Longest wait a server's Retry-After may impose, in ms. */
  retryAfterCapMs: number;
  /** Time limit of one attempt, in ms (Infinity: none). */
  attemptTimeoutMs: number;
}

export const DEFAULT_POLICY: RetryPolicy = {
  baseMs: 250,
  capMs: 10_000,
  maxAttempts: 8,
  deadlineMs: 60_000,
  retryAfterCapMs: 20_000,
  attemptTimeoutMs: 15_000,
};

/** Statuses that may succeed when repeated. 409 counts only as `idempotency_in_progress`. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

export function isRetryableStatus(status: number, code?: string): boolean {
  return RETRYABLE_STATUSES.has(status) || (status === 409 && code === "idempotency_in_progress");
}

/**
 * Full jitter: a uniform draw from [0, min(cap, base·2^retry)), where `retry`
 * counts the retries already made (0 before the first retry).
 */
export function backoffDelay(retry: number, policy: Pick<RetryPolicy, "baseMs" | "capMs">, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(retry, 52));
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

/** What the UI hears before each wait. */
export interface RetryInfo {
  /** The attempt that failed (1-based). */
  attempt: number;
  /** How long until the next attempt, in ms. */
  delayMs: number;
  /** Why it failed. */
  error: UploadError;
  /** Whether the delay came from the server's Retry-After. */
  fromRetryAfter: boolean;
}

/** What each attempt is given. */
export interface AttemptContext {
  /** 1-based. */
  attempt: number;
  /** Aborts when the caller aborts. */
  signal?: AbortSignal;
  /** The attempt's time limit: the smaller of the policy's and what is left of the deadline. */
  timeoutMs: number;
}

export interface RetryOptions {
  policy?: Partial<RetryPolicy>;
  clock?: Clock;
  random?: () => number;
  signal?: AbortSignal;
  onRetry?: (info: RetryInfo) => void;
}

/**
 * Runs `op` until it succeeds, it throws something not retryable, the
 * attempts run out, the deadline would pass, or `signal` aborts. Anything
 * that is not an {@link UploadError} is not retried. The error thrown carries
 * the number of attempts made.
 */
export async function retry<T>(op: (ctx: AttemptContext) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const policy: RetryPolicy = { ...DEFAULT_POLICY, ...opts.policy };
  const clock = opts.clock ?? systemClock;
  const random = opts.random ?? Math.random;
  const { signal } = opts;
  const deadline = clock.now() + policy.deadlineMs;

  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw abortError(signal);
    const left = deadline - clock.now();
    let error: UploadError;
    try {
      return await op({ attempt, signal, timeoutMs: Math.max(1, Math.min(policy.attemptTimeoutMs, left)) });
    } catch (e) {
      if (signal?.aborted) throw abortError(signal);
      if (!(e instanceof UploadError)) throw e;
      error = e;
    }
    error.attempts = attempt;
    if (!error.retryable) throw error;
    if (attempt >= policy.maxAttempts) throw error;

    const fromRetryAfter = error.retryAfterMs !== undefined;
    const delayMs = fromRetryAfter
      ? Math.min(error.retryAfterMs as number, policy.retryAfterCapMs)
      : backoffDelay(attempt - 1, policy, random);
    if (clock.now() + delayMs >= deadline) {
      throw new UploadError({
        kind: "deadline",
        message: `the time limit of ${formatSeconds(policy.deadlineMs)} ran out (last error: ${error.message})`,
        status: error.status,
        code: error.code,
        retryable: true,
        attempts: attempt,
        cause: error,
      });
    }
    opts.onRetry?.({ attempt, delayMs, error, fromRetryAfter });
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
