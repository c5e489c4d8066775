import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { apiError } from "../src/api.js";
import { UploadError, describeError } from "../src/errors.js";
import { storageError } from "../src/transport.js";

const s3 = (code: string, message?: string) => `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code>${message ? `<Message>${message}</Message>` : ""}</Error>`;

describe("describeError: one status per sentence", () => {
  for (const c of [
    { name: "S3's error without a message", err: storageError({ status: 403, text: s3("AccessDenied"), etag: null }), want: "Storage refused the upload: AccessDenied (HTTP 403)" },
    { name: "S3's error with a message", err: storageError({ status: 403, text: s3("AccessDenied", "Access Denied."), etag: null }), want: "Storage refused the upload: Access Denied. (AccessDenied, HTTP 403)" },
    { name: "S3's answer without a body", err: storageError({ status: 403, text: "", etag: null }), want: "Storage refused the upload (HTTP 403)." },
    {
      name: "the API's error without a message or status text",
      err: apiError(new Response(JSON.stringify({ error: "unauthenticated" }), { status: 401, statusText: "" }), JSON.stringify({ error: "unauthenticated" }), 0),
      want: "unauthenticated (HTTP 401)",
    },
    {
      name: "the API's error with a message",
      err: apiError(new Response("", { status: 422 }), JSON.stringify({ error: "idempotency_key_reuse", message: "this key was used with another request" }), 0),
      want: "this key was used with another request (idempotency_key_reuse, HTTP 422)",
    },
    { name: "an answer without code or text", err: new UploadError({ kind: "api", status: 500, message: "HTTP 500" }), want: "HTTP 500" },
    { name: "an answer without code, with text", err: new UploadError({ kind: "api", status: 500, message: "Internal Server Error" }), want: "Internal Server Error (HTTP 500)" },
  ]) {
    it(c.name, () => {
      const got = describeError(c.err);
      assert.equal(got, c.want);
      assert.equal(got.match(/HTTP \d{3}/g)?.length, 1, `one status in ${JSON.stringify(got)}`);
    });
  }
});
