import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { setImmediate as tick } from "node:timers/promises";
import { describe, it } from "node:test";
import { Api, type Authorization, apiError } from "../src/api.js";
import { UploadError } from "../src/errors.js";
import { DEFAULT_POLICY, backoffDelay, isRetryableStatus, parseRetryAfter, retry, systemClock, type RetryInfo } from "../src/retry.js";
import { putOutcome, storageError } from "../src/transport.js";
import { FakeClock, FakeNetwork, createMeta, created, json, makeFile, sha256hex } from "./fakes.js";
import { failure, world } from "./world.js";

/**
 * The one retry policy of every client, as the Go client's tests read it too.
 * (This file runs from web/.test-build/, one level under web/ like web/test/.)
 */
interface SharedPolicy {
  defaults: Record<string, number>;
  /** A row "from": "S3" has S3's <Code> (its XML error body); otherwise the API's JSON "error". */
  retryable: { status: number; code?: string; from?: "S3"; retry: boolean }[];
  /** Answers that are neither success nor failure: "stored", for a single PUT (upload.url) that sent If-None-Match. */
  outcomes: { request: string; status: number; from?: string; retry: boolean; outcome: string }[];
  /** Answers repeated once, at once, with a fresh token. */
  unauthorized: { request: string; status: number; refreshToken: boolean; repeat: number; waitMs: number }[];
  backoff: { retry: number; random: number; waitMs: number }[];
  retryAfter: { header: string; now?: string; waitMs: number | null }[];
}
const shared = JSON.parse(readFileSync(new URL("../../pkg/api/testdata/retry-policy.json", import.meta.url), "utf8")) as SharedPolicy;

/** S3's XML error body with a code. */
const s3Body = (code: string) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>x</Message><RequestId>r</RequestId></Error>`;

/**
 * A row's answer as the client reads it: no answer (status 0), S3's answer
 * to a PUT (rows from S3, and rows without a code, whose statuses S3 gives
 * too), or the API's (rows without "from"). The API's answers carry a
 * Retry-After, which must not make a final answer retried. A row without a
 * code is, from the API, API Gateway's own answer ({"message": …}) where
 * it gives that status, else the API's with a code the row does not list
 * (an answer with neither is not a onceupload API's: see api.test.ts).
 */
function rowErrors(row: SharedPolicy["retryable"][number]): { error: UploadError; code?: string }[] {
  if (row.status === 0) return [{ error: new UploadError({ kind: "network", message: "no answer", retryable: isRetryableStatus(0) }) }];
  const errors: { error: UploadError; code?: string }[] = [];
  if (row.from === "S3" || row.code === undefined) errors.push({ error: storageError({ status: row.status, text: row.code ? s3Body(row.code) : "", etag: null }), code: row.code });
  if (row.from === undefined) {
    const gateway = [401, 403, 429, 500, 502, 503, 504].includes(row.status);
    const code = row.code ?? (gateway ? undefined : "some_other_code");
    const text = JSON.stringify(code ? { error: code, message: "x" } : { message: "x" });
    errors.push({ error: apiError(new Response(text, { status: row.status, headers: { "Retry-After": "1" } }), text, Date.now()), code });
  }
  return errors;
}

const transient = (status = 503, retryAfterMs?: number) =>
  new UploadError({ kind: "api", status, code: "service_unavailable", message: "try later", retryable: true, retryAfterMs });

describe("the shared retry policy (pkg/api/testdata/retry-policy.json)", () => {
  it("has the table's defaults", () => {
    assert.ok(Object.keys(shared.defaults).length >= 5);
    for (const [name, value] of Object.entries(shared.defaults)) {
      assert.equal(DEFAULT_POLICY[name as keyof typeof DEFAULT_POLICY], value, name);
    }
  });

  for (const row of shared.retryable) {
    it(`${row.retry ? "retries" : "does not retry"} ${row.status}${row.code ? " " + row.code : ""}${row.from ? " from " + row.from : ""}`, async () => {
      assert.equal(isRetryableStatus(row.status, row.code), row.retry);
      for (const { error, code } of rowErrors(row)) {
        // The answer read by the client's own parser (the API's JSON, S3's XML).
        assert.equal(error.status, row.status === 0 ? undefined : row.status);
        assert.equal(error.code, code);
        assert.equal(error.retryable, row.retry, `${error.kind} error`);
        // And the loop acts on it.
        const clock = new FakeClock();
        let calls = 0;
        await retry(
          async () => {
            if (++calls > 1) return;
            throw error;
          },
          { clock, random: () => 0.5 },
        ).catch(() => undefined);
        assert.equal(calls, row.retry ? 2 : 1, `${error.kind} error`);
        assert.equal(clock.sleeps.length, row.retry ? 1 : 0);
      }
    });
  }

  it("has outcomes", () => assert.ok(shared.outcomes.length > 0));

  // Each outcome row, acted out on the fake API and bucket, as the Go
  // client's policy_test.go does: a single PUT that sends If-None-Match: *
  // (its URL signs it) is stored, but its answer is lost; the retry gets
  // the row's status, which ends the PUT unretried and without an error;
  // the status route still says pending twice (the server has not recorded
  // the object yet), then completed, which the upload returns. A PUT
  // without If-None-Match answered so is an error, not retried.
  for (const row of shared.outcomes) {
    it(`${row.request} answered ${row.status}${row.from ? " from " + row.from : ""}: ${row.outcome}, ${row.retry ? "retried" : "not retried"}`, async () => {
      assert.deepEqual([row.request, row.outcome, row.from], ["PUT upload.url", "stored", "S3"], "the test knows the outcome \"stored\" of S3's answer to a single PUT");
      assert.equal(row.retry, false);
      assert.equal(putOutcome({ status: row.status }, true), "already-stored");
      assert.equal(putOutcome({ status: row.status }, false), undefined);
      assert.equal(isRetryableStatus(row.status, "PreconditionFailed"), row.retry);

      const w = world();
      w.server.putFaults.push("lose-response");
      w.server.pendingPolls = 2;
      const { client, events, onEvent } = w.page();
      const file = makeFile("a.bin", 1000);
      const done = await client.start(file, { onEvent });
      assert.equal(done.status, "completed");
      const object = w.server.objects.get(done.uploadId);
      assert.equal(object?.sha256, sha256hex(new Uint8Array(await file.arrayBuffer())));
      assert.deepEqual(
        w.server.puts.map((p) => [p.fault, p.status, p.headers["If-None-Match"]]),
        [
          ["lose-response", 200, "*"],
          [undefined, row.status, "*"],
        ],
        "the first PUT stored it (its answer lost), the retry met the row's status",
      );
      assert.equal(w.server.requestsTo("GET", "").length, 3, "pending, pending, completed");
      const retried = events.filter((e) => e.type === "retry");
      assert.deepEqual(
        retried.map((e) => e.type === "retry" && [e.step, e.error.kind]),
        [["put", "network"]],
        `only the lost answer was retried, not the ${row.status}`,
      );
      assert.deepEqual(
        events.filter((e) => e.type === "stored"),
        [{ type: "stored", outcome: "already-stored" }],
      );
      assert.ok(!events.some((e) => e.type === "failed"));
      assert.deepEqual(events.filter((e) => e.type === "upload-progress").at(-1), { type: "upload-progress", loaded: 1000, total: 1000 });

      // Only a PUT that sent If-None-Match reads the answer so: from a URL
      // that does not sign it, the same answer is an error, not retried.
      const old = world();
      old.server.signIfNoneMatch = false;
      old.server.putFaults.push({ status: row.status, body: s3Body("PreconditionFailed") });
      const err = await failure(old.page().client.start(makeFile("a.bin", 1000)));
      assert.deepEqual([err.kind, err.status, err.code, err.attempts], ["storage", row.status, "PreconditionFailed", 1]);
      assert.equal(old.server.puts.length, 1);
    });
  }

  for (const row of shared.backoff) {
    it(`waits ${row.waitMs} ms before retry ${row.retry} when random() is ${row.random}`, () => {
      assert.equal(backoffDelay(row.retry, DEFAULT_POLICY, () => row.random), row.waitMs);
    });
  }

  for (const row of shared.retryAfter) {
    it(`waits ${row.waitMs ?? "the backoff"} ${row.waitMs === null ? "" : "ms "}for Retry-After: ${row.header}`, async () => {
      const clock = new FakeClock(row.now ? Date.parse(row.now) : undefined);
      const retryAfterMs = parseRetryAfter(row.header, clock.now());
      let calls = 0;
      await retry(
        async () => {
          if (++calls === 1) throw new UploadError({ kind: "api", status: 503, message: "busy", retryable: true, retryAfterMs });
        },
        { clock, random: () => 0.5 },
      );
      // An unreadable header leaves the backoff: random 0.5 of the first ceiling, 250 ms.
      assert.deepEqual(clock.sleeps, [row.waitMs ?? 125]);
    });
  }

  it("has no attempt cap: retries until the next wait would end past the 5 min budget", async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const ends: number[] = [];
    let calls = 0;
    const err = await retry(
      async () => {
        calls++;
        clock.t += 1_000; // each attempt takes a second to fail
        throw new UploadError({ kind: "network", message: "no answer", retryable: true });
      },
      { clock, random: () => 0.999, onRetry: (i) => ends.push(clock.now() + i.delayMs) },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "deadline");
    assert.equal(err.retryable, true, "Resume may still help");
    assert.ok(calls > 8, `${calls} attempts: the old cap of 8 is gone`);
    assert.ok(ends.every((t) => t - start <= 300_000), "no wait ends past the budget");
    // The wait that was not made would have ended past it.
    assert.ok(clock.now() + Math.floor(0.999 * 20_000) - start > 300_000);
  });
});

/** POST /uploads through retry(), on a virtual clock, with each request's Authorization and the answers `answer` gives. */
async function createWith(answer: (n: number, auth: string) => Response, authorization: Authorization | undefined, policy: { maxAttempts?: number } = {}) {
  const seen: string[] = [];
  const f: typeof fetch = async (_input, init) => {
    const auth = new Headers(init?.headers).get("Authorization") ?? "";
    seen.push(auth);
    return answer(seen.length, auth);
  };
  const clock = new FakeClock();
  const api = new Api({ baseUrl: "https://api.test", fetch: f, authorization, now: () => clock.now() });
  const result = await retry((ctx) => api.create("key-0123456789abcdef", createMeta, ctx), { clock, random: () => 0.5, network: new FakeNetwork(), policy }).then(
    (ans) => ({ ans, err: undefined }),
    (err: unknown) => ({ ans: undefined, err: err as UploadError }),
  );
  return { ...result, seen, sleeps: clock.sleeps };
}

// Each "unauthorized" row, acted out as the Go client's policy_test.go
// does: an API request answered so is repeated, at once, with a fresh
// token, as many times as the row says (once), whether API Gateway's
// authorizer or the API answered; a 401 to the repeat is final, and so is
// one when the token source gives the same token again.
describe("the shared policy's unauthorized rows (a 401: one repeat with a fresh token)", () => {
  it("has unauthorized rows", () => assert.ok(shared.unauthorized?.length > 0));

  for (const row of shared.unauthorized ?? []) {
    it(`repeats ${row.request} answered ${row.status} once, at once, with a fresh token`, async () => {
      assert.deepEqual([row.refreshToken, row.repeat, row.waitMs, row.request], [true, 1, 0, "any API request (not S3's presigned URLs)"], "the test knows one repeat at once with a fresh token of any API request");
      for (const body of [{ message: "Unauthorized" }, { error: "unauthenticated", message: "The token has expired." }]) {
        for (const still of [false, true]) {
          // The token source: a cached token, or a fresh one when asked so.
          const asked: unknown[] = [];
          const authorization: Authorization = (req) => {
            asked.push(req?.fresh);
            return req?.fresh ? "Bearer fresh" : "Bearer old";
          };
          const { ans, err, seen, sleeps } = await createWith((_n, auth) => (auth !== "Bearer fresh" || still ? json(row.status, body) : json(201, created)), authorization);
          const what = `${JSON.stringify(body)}${still ? ", refused again" : ""}`;
          if (still) {
            assert.ok(err, what);
            assert.deepEqual([err.kind, err.status, err.retryable, err.attempts], ["api", row.status, false, 1 + row.repeat], what);
          } else {
            assert.equal(err, undefined, what);
            assert.equal(ans?.body.uploadId, "u1");
          }
          assert.deepEqual(seen, ["Bearer old", "Bearer fresh"], what);
          assert.deepEqual(asked, [undefined, true], `${what}: asked without an argument, then { fresh: true }`);
          assert.deepEqual(sleeps, [], `${what}: no wait`);
        }
      }
    });

    it(`does not count the repeat of a ${row.status} against maxAttempts; the repeat's own answer follows the other rules`, async () => {
      // With 1, a 401 still gets its repeat; with 2, the repeat's 503 still gets its retry.
      for (const maxAttempts of [1, 2]) {
        let k = 0;
        const { err, seen, sleeps } = await createWith(
          (n) => {
            if (n === 1) return json(row.status, { message: "Unauthorized" });
            if (n === 2 && maxAttempts === 2) return json(503, { error: "service_unavailable", message: "busy" });
            return json(201, created);
          },
          () => `Bearer t${++k}`,
          { maxAttempts },
        );
        assert.equal(err, undefined, `maxAttempts ${maxAttempts}`);
        assert.equal(seen.length, maxAttempts + 1, `maxAttempts ${maxAttempts}`);
        assert.equal(sleeps.length, maxAttempts - 1, "only the 503 waits");
      }
    });

    it(`repeats a request at most once for a ${row.status}, across its retries`, async () => {
      let k = 0;
      const { err, seen } = await createWith(
        (n) => (n === 2 ? json(503, { message: "Service Unavailable" }) : json(row.status, { message: "Unauthorized" })),
        () => `Bearer t${++k}`,
      );
      // 401, the repeat (503), the retry (401 again): final.
      assert.deepEqual(seen, ["Bearer t1", "Bearer t2", "Bearer t3"]);
      assert.deepEqual([err?.status, err?.attempts], [row.status, 3]);
    });

    it(`makes no repeat of a ${row.status} that would send the same token, nor without a token source, nor of a foreign answer`, async () => {
      // A fixed token (a function that takes no argument): asked again, gives the same: final at once.
      let asks = 0;
      const fixed = await createWith(() => json(row.status, { message: "Unauthorized" }), () => (asks++, "Bearer fixed"));
      assert.deepEqual([fixed.seen, asks, fixed.err?.status, fixed.err?.attempts], [["Bearer fixed"], 2, row.status, 1]);
      const none = await createWith(() => json(row.status, { message: "Unauthorized" }), undefined);
      assert.deepEqual([none.seen, none.err?.status, none.err?.attempts], [[""], row.status, 1]);
      // Not the API's 401 (a web server's page): not a token to refresh.
      let k = 0;
      const foreign = await createWith(() => new Response("<html>401 Authorization Required</html>", { status: row.status }), () => `Bearer t${++k}`);
      assert.deepEqual([foreign.seen.length, foreign.err?.kind, k], [1, "foreign", 1]);
    });
  }
});

describe("retry while offline", () => {
  const noAnswer = () => new UploadError({ kind: "network", message: "no answer", retryable: true });

  it("makes no attempt while offline, and starts once the browser is online", async () => {
    const clock = new FakeClock();
    const network = new FakeNetwork();
    network.set(false);
    let calls = 0;
    const p = retry(async () => void calls++, { clock, network });
    await tick();
    assert.equal(calls, 0);
    network.set(true);
    await p;
    assert.equal(calls, 1);
  });

  it("waits for the online event instead of spending retries or budget, however long it is offline", async () => {
    const clock = new FakeClock();
    const network = new FakeNetwork();
    const infos: RetryInfo[] = [];
    let calls = 0;
    const p = retry(
      async () => {
        if (++calls === 1) {
          network.set(false);
          throw noAnswer();
        }
        return "sent";
      },
      { clock, network, onRetry: (i) => infos.push(i), policy: { retryBudgetMs: 10_000 } },
    );
    await tick();
    clock.t += 3_600_000; // an hour offline
    network.set(true);
    assert.equal(await p, "sent");
    assert.equal(calls, 2);
    assert.deepEqual(clock.sleeps, [], "no backoff sleeps while offline");
    assert.deepEqual(
      infos.map((i) => [i.offline, i.delayMs]),
      [[true, 0]],
    );
  });

  it("abandons the attempt under way when the browser goes offline, then retries when it is back", async () => {
    const clock = new FakeClock();
    const network = new FakeNetwork();
    let calls = 0;
    const p = retry(
      (ctx) => {
        if (++calls > 1) return Promise.resolve("sent");
        // An attempt that would hang: only its signal ends it.
        return new Promise<string>((_, reject) => ctx.signal?.addEventListener("abort", () => reject(ctx.signal?.reason), { once: true }));
      },
      { clock, network },
    );
    await tick();
    network.set(false);
    await tick();
    assert.equal(calls, 1);
    network.set(true);
    assert.equal(await p, "sent");
    assert.equal(calls, 2);
  });

  it("Cancel stops the wait for the network", async () => {
    const network = new FakeNetwork();
    network.set(false);
    const ctrl = new AbortController();
    const p = retry(async () => "sent", { clock: new FakeClock(), network, signal: ctrl.signal }).catch((e: unknown) => e);
    await tick();
    ctrl.abort();
    const err = await p;
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "aborted");
  });
});

describe("backoffDelay (full jitter)", () => {
  const policy = { baseDelayMs: 250, maxDelayMs: 10_000 };
  it("is 0 when random() is 0", () => {
    for (let n = 0; n < 10; n++) assert.equal(backoffDelay(n, policy, () => 0), 0);
  });
  it("stays below min(cap, base·2^attempt)", () => {
    const justBelowOne = () => 0.999999;
    const ceilings = [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000];
    ceilings.forEach((ceiling, n) => {
      const d = backoffDelay(n, policy, justBelowOne);
      assert.ok(d < ceiling && d >= ceiling - 1, `retry ${n}: ${d} vs ${ceiling}`);
    });
  });
  it("is uniform over the whole range, not base plus jitter", () => {
    assert.equal(backoffDelay(3, policy, () => 0.5), 1000);
    assert.equal(backoffDelay(3, policy, () => 0.1), 200);
  });
  it("does not overflow for huge attempt numbers", () => {
    assert.equal(backoffDelay(5000, policy, () => 0.5), 5000);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.UTC(2026, 0, 15, 9, 0, 0);
  it("reads delta-seconds", () => {
    assert.equal(parseRetryAfter("120", now), 120_000);
    assert.equal(parseRetryAfter(" 3 ", now), 3_000);
    assert.equal(parseRetryAfter("0", now), 0);
  });
  it("reads the three HTTP-date forms as GMT", () => {
    assert.equal(parseRetryAfter("Thu, 15 Jan 2026 09:00:10 GMT", now), 10_000);
    assert.equal(parseRetryAfter("Thursday, 15-Jan-26 09:00:07 GMT", now), 7_000);
    assert.equal(parseRetryAfter("Thu Jan 15 09:00:05 2026", now), 5_000);
  });
  it("gives 0 for a date in the past", () => {
    assert.equal(parseRetryAfter("Thu, 15 Jan 2026 08:00:00 GMT", now), 0);
  });
  it("ignores what is neither", () => {
    for (const v of [null, undefined, "", "soon", "-1", "1.5", "2026-01-15T09:00:10Z", "10 seconds"]) {
      assert.equal(parseRetryAfter(v, now), undefined, String(v));
    }
  });
});

describe("isRetryableStatus", () => {
  it("retries only what may succeed when repeated", () => {
    for (const s of [408, 425, 429, 500, 502, 503, 504]) assert.equal(isRetryableStatus(s), true, String(s));
    for (const s of [400, 401, 403, 404, 405, 409, 410, 412, 413, 415, 422, 501, 505]) assert.equal(isRetryableStatus(s), false, String(s));
  });
  it("retries 409 only as idempotency_in_progress or S3's ConditionalRequestConflict", () => {
    assert.equal(isRetryableStatus(409, "idempotency_in_progress"), true);
    assert.equal(isRetryableStatus(409, "ConditionalRequestConflict"), true);
    assert.equal(isRetryableStatus(409, "conflict"), false);
    assert.equal(isRetryableStatus(422, "idempotency_in_progress"), false);
    assert.equal(isRetryableStatus(503, "ConditionalRequestConflict"), true, "a retryable status stays so");
  });
  it("retries every 429 but too_many_uploads", () => {
    assert.equal(isRetryableStatus(429), true);
    assert.equal(isRetryableStatus(429, "slow_down"), true);
    assert.equal(isRetryableStatus(429, "too_many_uploads"), false);
    assert.equal(isRetryableStatus(503, "too_many_uploads"), true, "the code is final only with 429");
  });
});

describe("retry", () => {
  it("retries transient failures with full-jitter backoff, then succeeds", async () => {
    const clock = new FakeClock();
    const infos: RetryInfo[] = [];
    let calls = 0;
    const out = await retry(
      async () => {
        if (++calls < 4) throw transient();
        return "ok";
      },
      { clock, random: () => 0.5, policy: { baseDelayMs: 100, maxDelayMs: 1000 }, onRetry: (i) => infos.push(i) },
    );
    assert.equal(out, "ok");
    assert.equal(calls, 4);
    assert.deepEqual(clock.sleeps, [50, 100, 200]);
    assert.deepEqual(
      infos.map((i) => [i.attempt, i.delayMs, i.fromRetryAfter]),
      [
        [1, 50, false],
        [2, 100, false],
        [3, 200, false],
      ],
    );
  });

  it("honours Retry-After instead of the backoff, capped", async () => {
    const clock = new FakeClock();
    let calls = 0;
    await retry(
      async () => {
        calls++;
        if (calls === 1) throw transient(503, 2_000);
        if (calls === 2) throw transient(429, 3_600_000);
        return "ok";
      },
      { clock, random: () => 0.5, policy: { maxRetryAfterMs: 20_000, retryBudgetMs: 60_000 } },
    );
    assert.deepEqual(clock.sleeps, [2_000, 20_000]);
  });

  it("never retries other client errors", async () => {
    for (const [status, code] of [
      [400, "invalid_request"],
      [401, "unauthenticated"],
      [409, "conflict"],
      [413, "file_too_large"],
      [422, "idempotency_key_reuse"],
    ] as const) {
      const clock = new FakeClock();
      let calls = 0;
      const err = await retry(
        async () => {
          calls++;
          throw new UploadError({ kind: "api", status, code, message: "no", retryable: isRetryableStatus(status, code) });
        },
        { clock },
      ).catch((e: unknown) => e);
      assert.ok(err instanceof UploadError);
      assert.equal(err.code, code);
      assert.equal(err.attempts, 1);
      assert.equal(calls, 1, `${status} ${code} was retried`);
      assert.deepEqual(clock.sleeps, []);
    }
  });

  it("retries 409 idempotency_in_progress after its Retry-After", async () => {
    const clock = new FakeClock();
    let calls = 0;
    await retry(
      async () => {
        if (++calls === 1) {
          throw new UploadError({ kind: "api", status: 409, code: "idempotency_in_progress", message: "busy", retryable: isRetryableStatus(409, "idempotency_in_progress"), retryAfterMs: 1_000 });
        }
      },
      { clock },
    );
    assert.equal(calls, 2);
    assert.deepEqual(clock.sleeps, [1_000]);
  });

  it("does not retry errors it does not know", async () => {
    let calls = 0;
    await assert.rejects(
      retry(
        async () => {
          calls++;
          throw new RangeError("bug");
        },
        { clock: new FakeClock() },
      ),
      RangeError,
    );
    assert.equal(calls, 1);
  });

  it("stops at maxAttempts with the last error and its attempt count", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const err = await retry(
      async () => {
        calls++;
        throw transient();
      },
      { clock, random: () => 0, policy: { maxAttempts: 4 } },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "api");
    assert.equal(err.attempts, 4);
    assert.equal(calls, 4);
  });

  it("gives up before a wait would cross the overall deadline", async () => {
    const clock = new FakeClock();
    const start = clock.now();
    let calls = 0;
    const err = await retry(
      async () => {
        calls++;
        clock.t += 100; // each attempt takes 100 ms
        throw transient();
      },
      { clock, random: () => 0.999, policy: { baseDelayMs: 500, maxDelayMs: 2_000, retryBudgetMs: 5_000 } },
    ).catch((e: unknown) => e);
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "deadline");
    assert.equal(err.retryable, true);
    assert.equal(err.status, 503);
    assert.equal(err.attempts, calls);
    assert.ok(clock.now() - start <= 5_000, `ran ${clock.now() - start} ms past a 5 s deadline`);
    assert.ok(calls >= 3 && calls < 10, `${calls} attempts`);
    assert.ok(err.cause instanceof UploadError);
  });

  it("gives each attempt what is left of the budget, which starts when the first attempt ends", async () => {
    const clock = new FakeClock();
    const limits: number[] = [];
    await retry(
      async (ctx) => {
        limits.push(ctx.timeoutMs);
        clock.t += 4_000;
        if (ctx.attempt < 4) throw transient(503, 0);
      },
      { clock, policy: { attemptTimeoutMs: 5_000, retryBudgetMs: 10_000 } },
    );
    // The budget ends at 4 s + 10 s: the fourth attempt, at 12 s, has 2 s.
    assert.deepEqual(limits, [5_000, 5_000, 5_000, 2_000]);
  });

  it("retries a first attempt that ran longer than the budget (a long upload cut by the network)", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const out = await retry(
      async () => {
        calls++;
        if (calls === 1) {
          clock.t += 20_000;
          throw transient(0, 0);
        }
        return "sent";
      },
      { clock, random: () => 0.5, policy: { attemptTimeoutMs: 60_000, retryBudgetMs: 10_000 } },
    );
    assert.equal(out, "sent");
    assert.equal(calls, 2);
  });

  it("stops at once when aborted before or between attempts", async () => {
    const ctrl = new AbortController();
    ctrl.abort();
    let calls = 0;
    const err = await retry(async () => void calls++, { clock: new FakeClock(), signal: ctrl.signal }).catch((e: unknown) => e);
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "aborted");
    assert.equal(calls, 0);
  });

  it("stops a real backoff sleep when aborted (mock timers)", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const ctrl = new AbortController();
    let calls = 0;
    const p = retry(
      async () => {
        calls++;
        throw transient();
      },
      { clock: systemClock, random: () => 0.5, policy: { baseDelayMs: 10_000, maxDelayMs: 10_000, retryBudgetMs: Infinity }, signal: ctrl.signal },
    );
    const settled = p.then(
      () => "resolved",
      (e: unknown) => e,
    );
    await new Promise<void>((r) => queueMicrotask(r));
    await Promise.resolve();
    t.mock.timers.tick(4_999); // not yet time for the second attempt
    assert.equal(calls, 1);
    ctrl.abort();
    const err = await settled;
    assert.ok(err instanceof UploadError);
    assert.equal(err.kind, "aborted");
    assert.equal(calls, 1);
  });

  it("waits for real with systemClock (mock timers)", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    let calls = 0;
    const p = retry(
      async () => {
        if (++calls === 1) throw transient(503, 7_000);
        return calls;
      },
      { clock: systemClock, policy: { retryBudgetMs: Infinity } },
    );
    for (let i = 0; i < 5; i++) await Promise.resolve();
    t.mock.timers.tick(6_999);
    for (let i = 0; i < 5; i++) await Promise.resolve();
    assert.equal(calls, 1);
    t.mock.timers.tick(1);
    assert.equal(await p, 2);
  });
});
