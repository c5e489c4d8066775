import assert from "node:assert/strict";
import { once } from "node:events";
import { type AddressInfo, createServer } from "node:net";
import { describe, it } from "node:test";
import { Api, classifyAnswer, firstChars, parseUpload } from "../src/api.js";
import { UploadError, describeError, isNotOnceupload } from "../src/errors.js";
import { retry } from "../src/retry.js";
import { sendableHeaders, storageError, urlNoLongerWorks } from "../src/transport.js";
import { FakeClock, FakeNetwork, createMeta, created, json } from "./fakes.js";

const meta = createMeta;
const pending = created;

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
      // API Gateway's own answers: {"message": …}, no code.
      [json(500, { message: "Internal Server Error" }), { kind: "api", status: 500, code: undefined, message: "Internal Server Error", retryable: true }],
      [json(401, { message: "Unauthorized" }), { kind: "api", status: 401, code: undefined, message: "Unauthorized", retryable: false }],
      [json(504, { message: "Endpoint request timed out" }), { kind: "api", status: 504, retryable: true }],
      // A code a newer server may add, with its message.
      [json(409, { error: "some_new_conflict", message: "x" }), { kind: "api", status: 409, code: "some_new_conflict", message: "x", retryable: false }],
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

describe("not a onceupload API (as pkg/client/foreign.go)", () => {
  const s3412 = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`;
  const cases: { name: string; res: () => Response; inAnswer: string[] }[] = [
    { name: "nginx 404", res: () => new Response("<html><head><title>404 Not Found</title></head></html>", { status: 404, statusText: "Not Found", headers: { Server: "nginx/1.27", "Content-Type": "text/html" } }), inAnswer: ["404 Not Found", "nginx/1.27", "text/html", "<html>"] },
    { name: "S3 412", res: () => new Response(s3412, { status: 412, headers: { Server: "AmazonS3", "Content-Type": "application/xml" } }), inAnswer: ["412", "AmazonS3", "PreconditionFailed"] },
    { name: "plain 404", res: () => new Response("404 page not found\n", { status: 404 }), inAnswer: ["404", "404 page not found"] },
    { name: "HTTP API unknown route", res: () => json(404, { message: "Not Found" }), inAnswer: ["404", "Not Found"] },
    { name: "200 web page", res: () => new Response("<!doctype html><p>welcome</p>", { status: 200, headers: { "Content-Type": "text/html" } }), inAnswer: ["200", "welcome"] },
    { name: "JSON without a code", res: () => json(400, { error: "Bad Request" }), inAnswer: ["400", "Bad Request"] },
    { name: "a proxy's 502 page", res: () => new Response("<html>Bad Gateway</html>", { status: 502, statusText: "Bad Gateway" }), inAnswer: ["502 Bad Gateway", "<html>Bad Gateway</html>"] },
    { name: "an empty 503", res: () => new Response("", { status: 503 }), inAnswer: ["503"] },
  ];
  for (const c of cases) {
    // A 5xx page may be a proxy's while the API is briefly away: retried (as
    // the Go client does), until the attempts run out; any other foreign
    // answer is final at once.
    const transient = c.res().status >= 500;
    it(`${c.name}: a typed error with the URL, the status and the first bytes, ${transient ? "retried" : "never retried"}`, async () => {
      const { calls, f } = fakeFetch(() => c.res());
      const clock = new FakeClock();
      const api = new Api({ baseUrl: "https://api.test/prod", fetch: f, now: () => clock.now() });
      const err = await failure(retry((ctx) => api.create("k".repeat(16), meta, ctx), { clock, network: new FakeNetwork(), policy: { maxAttempts: 3 } }));
      assert.equal(calls.length, transient ? 3 : 1, transient ? "retried until the attempts ran out" : "never retried");
      assert.ok(isNotOnceupload(err));
      assert.deepEqual([err.kind, err.status, err.retryable, err.url], ["foreign", c.res().status, transient, "https://api.test/prod/uploads"]);
      assert.match(err.message, /^not a onceupload API: https:\/\/api\.test\/prod\/uploads answered /);
      for (const want of c.inAnswer) {
        assert.ok(err.answer?.includes(want), `answer ${err.answer} lacks ${want}`);
        assert.ok(err.message.includes(want), `message ${err.message} lacks ${want}`);
      }
      assert.ok(!err.message.includes("\n"), "one line");
      assert.match(describeError(err), /not a onceupload API: https:\/\/api\.test\/prod\/uploads answered/);
      // Kept across a reload (IndexedDB keeps toJSON()).
      const back = UploadError.fromJSON(err.toJSON());
      assert.deepEqual([back.kind, back.url, back.answer], [err.kind, err.url, err.answer]);
    });
  }

  it("tells the API's and API Gateway's answers from foreign ones", () => {
    const cases: [number, unknown, string][] = [
      [401, { message: "Unauthorized" }, "gateway"],
      [403, { message: "Forbidden" }, "gateway"],
      [429, { message: "Too Many Requests" }, "gateway"],
      [504, { message: "Endpoint request timed out" }, "gateway"],
      [404, { message: "Not Found" }, "foreign"],
      [401, { error: "unauthenticated", message: "no principal" }, "api"],
      [404, { error: "not_found" }, "api"],
      [409, { error: "some_new_conflict", message: "x" }, "api"],
      [409, { error: "some_new_conflict" }, "foreign"],
      [400, { error: "Bad Request" }, "foreign"],
      [500, [1, 2], "foreign"],
    ];
    for (const [status, body, from] of cases) assert.equal(classifyAnswer(status, JSON.stringify(body)).from, from, `${status} ${JSON.stringify(body)}`);
    assert.equal(classifyAnswer(502, "<html>").from, "foreign");
  });

  it("cuts a long answer to its first 80 characters, on one line, between code points", () => {
    assert.equal(firstChars("a\n\n  b", 80), "a b");
    assert.equal(firstChars("é".repeat(100), 40), "é".repeat(40) + "…");
    assert.equal(firstChars("😀".repeat(3), 2), "😀😀…");
  });

  it("reads S3's answers to a PUT as S3's, not as a foreign API", () => {
    const e = storageError({ status: 403, text: "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", etag: null });
    assert.deepEqual([e.kind, e.code], ["storage", "AccessDenied"]);
  });
});

describe("no answer from the API", () => {
  it("names the URL that fails and how (node's fetch says why: a connection refused)", async () => {
    // A port on the loopback where nothing listens any more.
    const srv = createServer().listen(0, "127.0.0.1");
    await once(srv, "listening");
    const port = (srv.address() as AddressInfo).port;
    srv.close();
    await once(srv, "close");
    const base = `http://127.0.0.1:${port}`;
    const err = await failure(new Api({ baseUrl: base }).create("k".repeat(16), meta));
    assert.deepEqual([err.kind, err.retryable, err.url], ["network", true, `${base}/uploads`]);
    assert.ok(err.message.startsWith(`no answer from ${base}/uploads: connection refused`), err.message);
  });

  it("names the URL that fails with what the browser says (it does not say why)", async () => {
    for (const [thrown, want] of [
      [new TypeError("Failed to fetch"), /^no answer from https:\/\/api\.test\/uploads\/u1: Failed to fetch \(connection refused, unknown host, TLS or CORS failure/],
      [new TypeError("fetch failed", { cause: Object.assign(new Error("getaddrinfo ENOTFOUND api.test"), { code: "ENOTFOUND" }) }), /^no answer from https:\/\/api\.test\/uploads\/u1: unknown host \(getaddrinfo ENOTFOUND api\.test\)$/],
    ] as const) {
      const f: typeof fetch = async () => {
        throw thrown;
      };
      const err = await failure(new Api({ baseUrl: "https://api.test", fetch: f }).get("u1"));
      assert.deepEqual([err.kind, err.retryable, err.url], ["network", true, "https://api.test/uploads/u1"]);
      assert.match(err.message, want);
      assert.match(describeError(err), /https:\/\/api\.test\/uploads\/u1/);
    }
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

describe("Api.complete and a multipart create", () => {
  const multipart = { uploadId: "u1", storageKey: "uploads/u1", filename: "big.bin", contentType: "application/octet-stream", bytes: 10 << 20 };
  const parts = [
    { partNumber: 1, sha256: "1".repeat(64) },
    { partNumber: 2, sha256: "2".repeat(64) },
  ];

  it("creates an upload in parts without sha256 when none is given, and reads its answer without one", async () => {
    const { calls, f } = fakeFetch(() => json(201, { ...multipart, status: "pending", multipart: { partSize: 5 << 20, partCount: 2 } }));
    const ans = await new Api({ baseUrl: "https://api.test", fetch: f }).create("k".repeat(16), { filename: "big.bin", contentType: "application/octet-stream", size: 10 << 20, partSize: 5 << 20 });
    assert.deepEqual(JSON.parse(calls[0].init.body as string), { filename: "big.bin", contentType: "application/octet-stream", size: 10 << 20, partSize: 5 << 20 });
    assert.equal(ans.body.sha256, undefined);
  });

  it("POSTs every part's SHA-256 as JSON, or no body at all; reads compositeSha256", async () => {
    const done = { ...multipart, status: "completed", etag: '"e-2"', completedAt: "2026-01-15T09:00:01Z", multipart: { partSize: 5 << 20, partCount: 2 }, compositeSha256: "abc=-2" };
    const { calls, f } = fakeFetch(() => json(200, done));
    const api = new Api({ baseUrl: "https://api.test", fetch: f });
    const ans = await api.complete("u1", { parts });
    assert.equal(calls[0].url, "https://api.test/uploads/u1/complete");
    assert.equal(calls[0].init.method, "POST");
    assert.equal(new Headers(calls[0].init.headers).get("Content-Type"), "application/json");
    assert.deepEqual(JSON.parse(calls[0].init.body as string), { parts });
    assert.equal(ans.body.status === "completed" && ans.body.compositeSha256, "abc=-2");
    assert.equal(ans.body.sha256, undefined);
    await api.complete("u1");
    assert.equal(calls[1].init.body, undefined);
  });

  it("reads 409 parts_mismatch as the API's final error", async () => {
    const { f } = fakeFetch(() => json(409, { error: "parts_mismatch", message: "parts whose SHA-256 differs from the declared one: 2" }));
    const err = await failure(new Api({ baseUrl: "https://api.test", fetch: f }).complete("u1", { parts }));
    assert.deepEqual([err.kind, err.status, err.code, err.retryable], ["api", 409, "parts_mismatch", false]);
    assert.equal(classifyAnswer(409, JSON.stringify({ error: "parts_mismatch", message: "x" })).from, "api");
  });
});

describe("parseUpload", () => {
  it("refuses answers that are not uploads", () => {
    for (const text of ["", "[]", "null", JSON.stringify({ ...pending, status: "weird" }), JSON.stringify({ ...pending, upload: undefined }), JSON.stringify({ ...pending, uploadId: 7 })]) {
      assert.throws(() => parseUpload(text, 201), (e: unknown) => e instanceof UploadError && e.kind === "protocol" && !e.retryable, text);
    }
  });

  it("takes a multipart upload without sha256, not a single PUT without one", () => {
    const noSum = { ...pending, sha256: undefined };
    assert.throws(() => parseUpload(JSON.stringify(noSum), 201), (e: unknown) => e instanceof UploadError && e.kind === "protocol");
    const mp = { ...noSum, upload: undefined, multipart: { partSize: 5 << 20, partCount: 1 } };
    assert.equal(parseUpload(JSON.stringify(mp), 201).sha256, undefined);
    assert.throws(() => parseUpload(JSON.stringify({ ...mp, sha256: "" }), 201), (e: unknown) => e instanceof UploadError && e.kind === "protocol");
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
