import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Api, parseUpload } from "../src/api.js";
import { UploadError } from "../src/errors.js";
import { sendableHeaders, storageError, urlNoLongerWorks } from "../src/transport.js";
import { json } from "./fakes.js";

const meta = { filename: "a.txt", contentType: "text/plain", size: 3, sha256: "a".repeat(64) };
const pending = {
  uploadId: "u1",
  status: "pending",
  storageKey: "uploads/u1",
  filename: "a.txt",
  contentType: "text/plain",
  bytes: 3,
  sha256: "a".repeat(64),
  upload: { method: "PUT", url: "https://s3.test/u1", headers: { "Content-Type": "text/plain" }, expiresAt: "2026-01-15T09:15:00Z" },
};

type Call = { url: string; init: RequestInit };

function fakeFetch(answer: (c: Call) => Response | Promise<Response>) {
  const calls: Call[] = [];
  const f: typeof fetch = async (input, init) => {
    const c = { url: input instanceof Request ? input.url : String(input), init: init ?? {} };
    calls.push(c);
    return answer(c);
  };
  return { calls, f };
}

async function failure(p: Promise<unknown>): Promise<UploadError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  assert.ok(e instanceof UploadError, `want an UploadError, got ${String(e)}`);
  return e;
}

describe("Api.create", () => {
  it("sends the key and the four fields as JSON to {base}/uploads", async () => {
    const { calls, f } = fakeFetch(() => json(201, pending));
    const api = new Api({ baseUrl: "https://api.test/prod", fetch: f });
    const ans = await api.create("key-0123456789abcdef", meta);
    assert.equal(calls[0].url, "https://api.test/prod/uploads");
    assert.equal(calls[0].init.method, "POST");
    const h = new Headers(calls[0].init.headers);
    assert.equal(h.get("Idempotency-Key"), "key-0123456789abcdef");
    assert.equal(h.get("Content-Type"), "application/json");
    assert.equal(h.get("Content-Length"), null);
    const body = calls[0].init.body;
    assert.ok(typeof body === "string", "a JSON body");
    assert.deepEqual(JSON.parse(body), meta);
    assert.equal(ans.body.uploadId, "u1");
    assert.equal(ans.replay, false);
  });

  it("reports Idempotent-Replay", async () => {
    const { f } = fakeFetch(() => json(201, pending, { "Idempotent-Replay": "true" }));
    const ans = await new Api({ baseUrl: "https://api.test/", fetch: f }).create("k".repeat(16), meta);
    assert.equal(ans.replay, true);
  });

  it("sends Authorization when given", async () => {
    const { calls, f } = fakeFetch(() => json(201, pending));
    await new Api({ baseUrl: "https://api.test", fetch: f, authorization: async () => "Bearer t0k" }).create("k".repeat(16), meta);
    assert.equal(new Headers(calls[0].init.headers).get("Authorization"), "Bearer t0k");
  });

  it("turns error bodies into typed errors", async () => {
    const now = Date.UTC(2026, 0, 15, 9, 0, 0);
    // The fields compared (an error's methods are not).
    type Fields = Pick<UploadError, "kind" | "status" | "code" | "message" | "retryable" | "retryAfterMs">;
    const cases: [Response, Partial<Fields>][] = [
      [json(422, { error: "idempotency_key_reuse", message: "key reused" }), { kind: "api", status: 422, code: "idempotency_key_reuse", message: "key reused", retryable: false }],
      [json(400, { error: "invalid_request", message: "sha256: want 64 hex" }), { status: 400, code: "invalid_request", retryable: false }],
      [json(409, { error: "idempotency_in_progress", message: "busy" }, { "Retry-After": "2" }), { status: 409, retryable: true, retryAfterMs: 2_000 }],
      [json(503, { error: "service_unavailable", message: "later" }, { "Retry-After": "Thu, 15 Jan 2026 09:00:04 GMT" }), { status: 503, retryable: true, retryAfterMs: 4_000 }],
      [new Response("<html>Bad Gateway</html>", { status: 502, statusText: "Bad Gateway" }), { status: 502, code: undefined, message: "Bad Gateway", retryable: true }],
      [json(500, { message: "Internal Server Error" }), { status: 500, code: undefined, retryable: true }],
      [json(501, { error: "x", message: "no" }), { status: 501, retryable: false }],
    ];
    for (const [res, want] of cases) {
      const err = await failure(new Api({ baseUrl: "https://api.test", fetch: async () => res.clone(), now: () => now }).create("k".repeat(16), meta));
      for (const [k, v] of Object.entries(want)) assert.deepEqual(err[k as keyof Fields], v, `${res.status} ${k}`);
    }
  });

  it("calls a network failure retryable", async () => {
    const err = await failure(
      new Api({
        baseUrl: "https://api.test",
        fetch: async () => {
          throw new TypeError("Failed to fetch");
        },
      }).create("k".repeat(16), meta),
    );
    assert.equal(err.kind, "network");
    assert.equal(err.retryable, true);
  });

  it("ends an attempt that takes too long as a retryable timeout (mock timers)", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const hang: typeof fetch = (_input, init) =>
      new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true }));
    const p = failure(new Api({ baseUrl: "https://api.test", fetch: hang }).create("k".repeat(16), meta, { timeoutMs: 5_000 }));
    await Promise.resolve();
    t.mock.timers.tick(5_000);
    const err = await p;
    assert.equal(err.kind, "timeout");
    assert.equal(err.retryable, true);
  });

  it("calls the caller's abort an abort, not a failure to retry", async () => {
    const ctrl = new AbortController();
    const hang: typeof fetch = (_input, init) =>
      new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true }));
    const p = failure(new Api({ baseUrl: "https://api.test", fetch: hang }).create("k".repeat(16), meta, { signal: ctrl.signal }));
    ctrl.abort();
    const err = await p;
    assert.equal(err.kind, "aborted");
    assert.equal(err.retryable, false);
  });
});

describe("Api.get", () => {
  it("GETs /uploads/{id} without caching", async () => {
    const { calls, f } = fakeFetch(() => json(200, { ...pending, status: "completed", upload: undefined, etag: '"e"', completedAt: "2026-01-15T09:00:01Z" }));
    const ans = await new Api({ baseUrl: "http://127.0.0.1:3000", fetch: f }).get("u1");
    assert.equal(calls[0].url, "http://127.0.0.1:3000/uploads/u1");
    assert.equal(calls[0].init.cache, "no-store");
    assert.equal(ans.body.status, "completed");
  });
});

describe("parseUpload", () => {
  it("refuses answers that are not uploads", () => {
    for (const text of ["", "[]", "null", JSON.stringify({ ...pending, status: "weird" }), JSON.stringify({ ...pending, upload: undefined }), JSON.stringify({ ...pending, uploadId: 7 })]) {
      assert.throws(() => parseUpload(text, 201), (e: unknown) => e instanceof UploadError && e.kind === "protocol" && !e.retryable, text);
    }
  });
});

describe("storage answers", () => {
  it("never sends Content-Length or other forbidden headers", () => {
    assert.deepEqual(sendableHeaders({ "Content-Type": "image/png", "content-length": "5", Host: "x", "x-amz-checksum-sha256": "abc=" }), {
      "Content-Type": "image/png",
      "x-amz-checksum-sha256": "abc=",
    });
  });
  it("reads S3's XML error code", () => {
    const e = storageError({ status: 403, text: "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", etag: null });
    assert.equal(e.kind, "storage");
    assert.equal(e.code, "AccessDenied");
    assert.equal(e.retryable, false);
    assert.equal(storageError({ status: 503, text: "<Error><Code>SlowDown</Code></Error>", etag: null }).retryable, true);
  });
  it("retries a stalled upload connection, and knows when a URL no longer works", () => {
    const stalled = storageError({ status: 400, text: "<Error><Code>RequestTimeout</Code></Error>", etag: null });
    assert.equal(stalled.retryable, true);
    assert.equal(urlNoLongerWorks(stalled), false);
    assert.equal(urlNoLongerWorks(storageError({ status: 403, text: "<Error><Code>AccessDenied</Code></Error>", etag: null })), true);
    assert.equal(urlNoLongerWorks(storageError({ status: 400, text: "<Error><Code>ExpiredToken</Code></Error>", etag: null })), true);
    assert.equal(urlNoLongerWorks(storageError({ status: 400, text: "<Error><Code>InvalidArgument</Code></Error>", etag: null })), false);
  });
  it("says the file changed when S3 refuses its checksum", () => {
    const e = storageError({ status: 400, text: "<Error><Code>BadDigest</Code></Error>", etag: null });
    assert.equal(e.kind, "file");
    assert.equal(e.retryable, false);
  });
});
