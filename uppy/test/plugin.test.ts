/**
 * The plugin in the real @uppy/core (6.3.1, from npm), against a fake
 * client (test/fakes.ts): which of the client's calls each of Uppy's
 * actions makes, and which of Uppy's events each outcome emits. The real
 * client, the real Dashboard and Golden Retriever, in Chromium against the
 * local stack: browser_test.go.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import Uppy, { type UppyFile } from "@uppy/core";
import { UploadError, describeError } from "@onceupload/web";
import OnceUpload, { type KeyStore, MemoryKeyStore, WebStorageKeyStore } from "../src/index.js";
import { type Behaviour, FakeClient, failWith, holdUntilAborted } from "./fakes.js";

type Meta = Record<string, unknown>;
type Body = Record<string, unknown>;

interface Page {
  uppy: Uppy<Meta, Body>;
  successes: { id: string; body: Body | undefined }[];
  errors: { id: string; message: string; error: unknown }[];
  progress: { id: string; bytesUploaded: number; bytesTotal: number | null }[];
}

/** A page: an Uppy with the plugin, its events counted. */
function page(client: FakeClient, keys: KeyStore): Page {
  // infoTimeout: the notice of a failed upload is hidden at once, not after 5 s that keep node running.
  const uppy = new Uppy<Meta, Body>({ infoTimeout: 1 });
  uppy.use(OnceUpload, { client, keys });
  const p: Page = { uppy, successes: [], errors: [], progress: [] };
  uppy.on("upload-success", (f, r) => p.successes.push({ id: f?.id ?? "", body: r.body }));
  uppy.on("upload-error", (f, e) => p.errors.push({ id: f?.id ?? "", message: e.message, error: e }));
  uppy.on("upload-progress", (f, pr) => p.progress.push({ id: f?.id ?? "", bytesUploaded: pr.bytesUploaded, bytesTotal: pr.bytesTotal }));
  return p;
}

function addFile(uppy: Uppy<Meta, Body>, name = "photo.jpg", size = 2): string {
  return uppy.addFile({ name, type: "image/jpeg", data: new File([new Uint8Array(size)], name, { type: "image/jpeg", lastModified: 1_700_000_000_000 }) });
}

const file = (uppy: Uppy<Meta, Body>, id: string): UppyFile<Meta, Body> => uppy.getFile(id);

/** Lets the plugin's promise chains run (the fake client answers at once). */
const settle = () => new Promise((r) => setTimeout(r, 5));

/** An upload() that waits for release(): then progresses and completes. */
function gate(): { behaviour: Behaviour; release: () => void; started: Promise<void> } {
  let release!: () => void;
  let started!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const startedP = new Promise<void>((r) => (started = r));
  return {
    release,
    started: startedP,
    behaviour: async (call, complete) => {
      started();
      await released;
      call.emit({ type: "upload-progress", loaded: 2, total: 2 });
      return complete();
    },
  };
}

describe("OnceUpload: an upload", () => {
  it("adds the file (one key), uploads it, reports progress and one upload-success with the completed upload", async () => {
    const client = new FakeClient();
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    const res = await p.uppy.upload();
    assert.equal(client.adds.length, 1);
    assert.deepEqual(
      client.uploads.map((u) => u.key),
      [client.adds[0]],
    );
    assert.equal(p.successes.length, 1);
    assert.equal(p.successes[0].body?.idempotencyKey, client.adds[0]);
    assert.equal(p.successes[0].body?.status, "completed");
    assert.deepEqual(p.progress[0], { id, bytesUploaded: 1, bytesTotal: 2 });
    assert.equal(file(p.uppy, id).progress.uploadComplete, true);
    assert.equal(res?.successful?.length, 1);
    assert.equal(p.errors.length, 0);
  });

  it("shows the client's hashing as Uppy's preprocessing, ended when the bytes go", async () => {
    const client = new FakeClient();
    client.behaviours = [
      async (call, complete) => {
        call.emit({ type: "hash-progress", loaded: 1, total: 4 });
        call.emit({ type: "upload-progress", loaded: 1, total: 2 });
        return complete();
      },
    ];
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    const seen: string[] = [];
    p.uppy.on("preprocess-progress", (_f, pr) => seen.push(`${pr.message} ${pr.value}`));
    p.uppy.on("preprocess-complete", () => seen.push("complete"));
    p.uppy.on("upload-progress", (_f, pr) => seen.push(`uploaded ${pr.bytesUploaded}`));
    await p.uppy.upload();
    assert.deepEqual(seen, ["Hashing 0.25", "complete", "uploaded 1"]);
    assert.equal(file(p.uppy, id).progress.preprocess, undefined);
  });

  it("links the key as soon as the client stored it, before the upload finishes", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const g = gate();
    client.behaviours = [g.behaviour];
    const p = page(client, keys);
    const id = addFile(p.uppy);
    const done = p.uppy.upload();
    await g.started;
    assert.equal(keys.get(id)?.key, client.adds[0]);
    assert.equal(keys.get(id)?.result, undefined);
    g.release();
    await done;
    assert.equal(keys.get(id)?.result?.status, "completed", "the completed result is kept with the link");
  });
});

describe("OnceUpload: the links", () => {
  it("a completion the client reported is linked in that event: a run that dies after it is answered from the link", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    client.behaviours = [
      async (_call, complete) => {
        complete(); // the "completed" event, the record deleted
        throw new UploadError({ kind: "state", message: "the page went away" });
      },
    ];
    const p = page(client, keys);
    const id = addFile(p.uppy);
    await p.uppy.upload();
    assert.equal(keys.get(id)?.result?.status, "completed");
    await p.uppy.retryUpload(id);
    assert.equal(client.uploads.length, 1, "not sent again");
    assert.equal(p.successes.length, 1);
  });

  it("drops the links of completed uploads older than rememberCompletedMs when installed, and keeps the others", () => {
    const keys = new MemoryKeyStore();
    const done = { uploadId: "u", status: "completed" as const, storageKey: "s", filename: "f", contentType: "t", bytes: 1, etag: "e", completedAt: "c" };
    keys.set("old-done", { key: "k1", at: Date.now() - 2 * 60_000, result: done });
    keys.set("new-done", { key: "k2", at: Date.now(), result: done });
    keys.set("old-pending", { key: "k3", at: Date.now() - 2 * 60_000 });
    new Uppy().use(OnceUpload, { client: new FakeClient(), keys, rememberCompletedMs: 60_000 });
    assert.deepEqual(keys.entries().map(([id]) => id).sort(), ["new-done", "old-pending"]);
  });
});

describe("OnceUpload: after a reload", () => {
  it("the same file added again resumes with its key (no second add)", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const first = page(client, keys);
    addFile(first.uppy);
    client.behaviours = [failWith(new UploadError({ kind: "network", retryable: true, message: "no answer" }))];
    await first.uppy.upload();
    assert.equal(first.errors.length, 1);

    client.reload(false);
    const second = page(client, keys);
    addFile(second.uppy);
    await second.uppy.upload();
    assert.equal(client.adds.length, 1, "one key for the file");
    assert.deepEqual(
      client.uploads.map((u) => u.key),
      [client.adds[0], client.adds[0]],
    );
    assert.ok(client.uploads[1].file, "the file picked again is given to the client, which checks it");
    assert.equal(second.successes.length, 1);
  });

  it("a file whose upload completed is answered with that upload, not sent again", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const first = page(client, keys);
    addFile(first.uppy);
    await first.uppy.upload();
    const second = page(client, keys);
    addFile(second.uppy);
    await second.uppy.upload();
    assert.equal(client.uploads.length, 1, "no second upload");
    assert.equal(second.successes.length, 1);
    assert.equal(second.successes[0].body?.uploadId, first.successes[0].body?.uploadId);
  });

  it("a restored file without data (a ghost) whose bytes the client kept resumes without them", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const g = gate();
    client.behaviours = [holdUntilAborted];
    const first = page(client, keys);
    const id = addFile(first.uppy);
    const running = first.uppy.upload();
    await settle();
    first.uppy.pauseResume(id);
    await settle();
    void running;

    client.reload(true);
    client.behaviours = [g.behaviour];
    const second = page(client, keys);
    const again = addFile(second.uppy);
    second.uppy.setFileState(again, { data: undefined, isGhost: true });
    const done = second.uppy.upload();
    g.release();
    await done;
    assert.equal(client.adds.length, 1);
    assert.equal(client.uploads.at(-1)?.file, undefined);
    assert.equal(second.successes.length, 1);
  });

  it("a restored file without data and nothing kept fails with a clear error, then resumes when picked again", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const p = page(client, keys);
    const id = addFile(p.uppy);
    p.uppy.setFileState(id, { data: undefined, isGhost: true });
    await p.uppy.upload();
    assert.equal(p.errors.length, 1);
    assert.match(p.errors[0].message, /Choose "photo\.jpg" again/);
    assert.equal(client.adds.length, 0);

    // Picked again: Uppy puts the bytes back into the ghost, and the retry uploads.
    p.uppy.setFileState(id, { data: new File([new Uint8Array(2)], "photo.jpg", { type: "image/jpeg", lastModified: 1_700_000_000_000 }), isGhost: false });
    await p.uppy.retryUpload(id);
    assert.equal(p.successes.length, 1);
  });
});

describe("OnceUpload: files already complete", () => {
  it("are skipped when Uppy runs their upload again (Golden Retriever restores a batch whole)", async () => {
    const client = new FakeClient();
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    await p.uppy.upload();
    assert.equal(p.successes.length, 1);
    p.uppy.setState({ currentUploads: { restored: { fileIDs: [id], step: 0, result: {} } } });
    await p.uppy.restore("restored");
    assert.equal(client.uploads.length, 1, "no second upload");
    assert.equal(p.successes.length, 1, "no second upload-success");
    assert.equal(file(p.uppy, id).progress.uploadComplete, true, "not started again (upload-start would reset its progress)");
  });

  it("one upload-success when the uploader is called twice for a file under way", async () => {
    const client = new FakeClient();
    const g = gate();
    client.behaviours = [g.behaviour];
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    const first = p.uppy.upload();
    await g.started;
    p.uppy.setState({ currentUploads: { ...p.uppy.getState().currentUploads, again: { fileIDs: [id], step: 0, result: {} } } });
    const second = p.uppy.restore("again");
    g.release();
    await Promise.all([first, second]);
    assert.equal(client.uploads.length, 1);
    assert.equal(p.successes.length, 1);
    assert.deepEqual(p.errors, [], "no second run (the client would refuse it: busy)");
  });
});

describe("OnceUpload: pause, resume, retry, cancel", () => {
  it("pause aborts the client's run (no error); resume runs the same key again", async () => {
    const client = new FakeClient();
    client.behaviours = [holdUntilAborted];
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    const done = p.uppy.upload();
    await settle();
    assert.equal(p.uppy.pauseResume(id), true);
    await settle();
    assert.equal(client.uploads[0].signal?.aborted, true);
    assert.equal(p.errors.length, 0);
    assert.equal(p.uppy.pauseResume(id), false);
    await done;
    assert.deepEqual(
      client.uploads.map((u) => u.key),
      [client.adds[0], client.adds[0]],
    );
    assert.equal(p.successes.length, 1);
  });

  it("pause-all and resume-all", async () => {
    const client = new FakeClient();
    client.behaviours = [holdUntilAborted, holdUntilAborted];
    const p = page(client, new MemoryKeyStore());
    addFile(p.uppy, "a.jpg");
    addFile(p.uppy, "b.jpg");
    const done = p.uppy.upload();
    await settle();
    p.uppy.pauseAll();
    await settle();
    assert.ok(client.uploads.every((u) => u.signal?.aborted));
    p.uppy.resumeAll();
    await done;
    assert.equal(client.uploads.length, 4);
    assert.equal(p.successes.length, 2);
  });

  it("cancel (removing the file) stops the run, then discards the upload; nothing is emitted", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    client.behaviours = [holdUntilAborted];
    const p = page(client, keys);
    const id = addFile(p.uppy);
    const done = p.uppy.upload();
    await settle();
    p.uppy.removeFile(id);
    await done;
    await settle();
    assert.deepEqual(client.discards, [client.adds[0]]);
    assert.equal(keys.get(id), undefined, "the link is forgotten");
    assert.equal(p.successes.length + p.errors.length, 0);
  });

  it("cancelAll discards a failed file's upload too", async () => {
    const client = new FakeClient();
    client.behaviours = [failWith(new UploadError({ kind: "network", retryable: true, message: "no answer" }))];
    const p = page(client, new MemoryKeyStore());
    addFile(p.uppy);
    await p.uppy.upload();
    p.uppy.cancelAll();
    await settle();
    assert.deepEqual(client.discards, [client.adds[0]]);
  });

  it("a non-retryable error is upload-error with the client's sentence; retry resumes the same key", async () => {
    const client = new FakeClient();
    const err = new UploadError({ kind: "api", status: 422, code: "idempotency_key_reuse", message: "This key was used for another request" });
    client.behaviours = [failWith(err)];
    const p = page(client, new MemoryKeyStore());
    const id = addFile(p.uppy);
    await p.uppy.upload();
    assert.equal(p.errors.length, 1);
    assert.equal(p.errors[0].message, describeError(err));
    assert.equal((p.errors[0].error as Error).cause, err);
    assert.equal(file(p.uppy, id).error, describeError(err));
    assert.equal(p.successes.length, 0);

    await p.uppy.retryUpload(id);
    assert.equal(client.adds.length, 1);
    assert.equal(client.uploads.length, 2);
    assert.equal(client.uploads[1].key, client.adds[0]);
    assert.equal(p.successes.length, 1);
  });
});

describe("OnceUpload: limit", () => {
  it("sends at most limit files at once; a file still waiting is cancelled at once", async () => {
    const client = new FakeClient();
    const keys = new MemoryKeyStore();
    const g = gate();
    client.behaviours = [g.behaviour];
    const uppy = new Uppy<Meta, Body>({ infoTimeout: 1 });
    uppy.use(OnceUpload, { client, keys, limit: 1 });
    const successes: string[] = [];
    uppy.on("upload-success", (f) => successes.push(f?.name ?? ""));
    addFile(uppy, "a.jpg");
    const b = addFile(uppy, "b.jpg");
    const c = addFile(uppy, "c.jpg");
    // c's upload was started in an earlier page: its key is linked.
    const earlier = await client.add(new File([new Uint8Array(2)], "c.jpg"));
    keys.set(c, { key: earlier.key, at: Date.now() });
    const done = uppy.upload();
    await g.started;
    await settle();
    assert.equal(client.uploads.length, 1, "one file at a time");
    uppy.removeFile(c);
    await settle();
    assert.deepEqual(client.discards, [earlier.key], "discarded without waiting for a place");
    assert.equal(client.uploads.length, 1, "the cancelled file was never sent");
    g.release();
    await done;
    assert.deepEqual(successes.sort(), ["a.jpg", "b.jpg"]);
    assert.equal(keys.get(b)?.result?.status, "completed");
    assert.equal(keys.get(c), undefined);
  });
});

describe("OnceUpload.VERSION", () => {
  it("is package.json's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    assert.equal(OnceUpload.VERSION, pkg.version);
  });
});

describe("WebStorageKeyStore", () => {
  it("keeps one item per file under the API's prefix, and lists only those", () => {
    const items = new Map<string, string>();
    const storage: Storage = {
      get length() {
        return items.size;
      },
      key: (i) => [...items.keys()][i] ?? null,
      getItem: (k) => items.get(k) ?? null,
      setItem: (k, v) => void items.set(k, v),
      removeItem: (k) => void items.delete(k),
      clear: () => items.clear(),
    };
    const a = new WebStorageKeyStore("http://127.0.0.1:3000", storage);
    const b = new WebStorageKeyStore("http://127.0.0.1:4000", storage);
    a.set("uppy-x", { key: "k1", at: 1 });
    b.set("uppy-x", { key: "k2", at: 2 });
    items.set("onceupload-uppy:http://127.0.0.1:3000:broken", "{");
    assert.deepEqual(a.get("uppy-x"), { key: "k1", at: 1 });
    assert.equal(a.get("broken"), undefined);
    assert.deepEqual(a.entries(), [["uppy-x", { key: "k1", at: 1 }]]);
    a.delete("uppy-x");
    assert.equal(a.get("uppy-x"), undefined);
    assert.deepEqual(b.get("uppy-x"), { key: "k2", at: 2 });
  });
});
