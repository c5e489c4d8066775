// Benchmark peer only (never shipped): uploads one file to a tus server with
// tus-js-client, the reference tus client, as it comes (one PATCH stream,
// its default options), and prints {"url": ..., "bytes": N} once the
// server has answered the last PATCH (tusd's S3 store completes the S3
// multipart upload before it answers).
//
//   node tus-upload.mjs ENDPOINT FILE
import { createReadStream, statSync } from "node:fs";
import { basename } from "node:path";
import { Upload } from "tus-js-client";

const [endpoint, path] = process.argv.slice(2);
if (!endpoint || !path) {
  console.error("usage: node tus-upload.mjs ENDPOINT FILE");
  process.exit(2);
}
const bytes = statSync(path).size;
/** @type {import("tus-js-client").Upload} */
let upload;
await new Promise((resolve, reject) => {
  upload = new Upload(createReadStream(path), {
    endpoint,
    metadata: { filename: basename(path), filetype: "application/octet-stream" },
    onError: reject,
    onSuccess: resolve,
  });
  upload.start();
  process.on("SIGTERM", () => upload.abort().finally(() => process.exit(143)));
}).then(
  () => process.stdout.write(JSON.stringify({ url: upload.url, bytes }) + "\n"),
  (err) => {
    console.error("tus upload failed:", err);
    process.exit(1);
  },
);
