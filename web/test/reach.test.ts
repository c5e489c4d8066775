// StorageReach on its own: when a storage request that fails with no
// answer may end a run as a CORS refusal (evidence: the storage reachable
// by a no-cors probe before and after a failed try), and when it must not.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PROBABLY_CORS, STORAGE_UNANSWERED } from "../src/codes.js";
import { UploadError } from "../src/errors.js";
import { Unretried } from "../src/retry.js";
import { PROBE_TIMEOUT_MS, type PutRequest, type PutResponse, type PutTransport, StorageReach, type StorageProbe, noCorsProbe } from "../src/transport.js";

const noAnswer = () => new UploadError({ kind: "network", message: "PUT to storage: no answer (network or CORS failure)", retryable: true });
const req = (signal?: AbortSignal): PutRequest => ({ url: "https://bucket.s3.test/key?X-Amz-Signature=abc", method: "PUT", headers: {}, body: new Blob(["x"]), signal });
const ok: PutResponse = { status: 200, text: "", etag: '"e"' };

/** What one try ended with: the answer, the error thrown as it is (retried), or an Unretried verdict. */
type Outcome = "ok" | "retried" | "hint" | "cors";

async function tryOnce(t: PutTransport, signal?: AbortSignal): Promise<Outcome> {
  try {
    await t(req(signal));
    return "ok";
  } catch (e) {
    if (e instanceof Unretried) {
      assert.equal(e.error.code, PROBABLY_CORS);
      return "cors";
    }
    assert.ok(e instanceof UploadError);
    return e.code === STORAGE_UNANSWERED ? "hint" : "retried";
  }
}

/** A transport that fails with no answer for each false of `answers`, and answers 200 for each true. */
function scripted(answers: boolean[]): PutTransport {
  return async (r) => {
    if (answers.shift()) {
      r.onProgress?.(1, 1);
      return ok;
    }
    throw noAnswer();
  };
}

/** A probe whose results are given in order (true: the storage answered); every call is counted, with its URL. */
function probe(results: boolean[]) {
  const urls: string[] = [];
  const fn: StorageProbe = async (url) => {
    urls.push(url);
    if (!results.shift()) throw new TypeError("Failed to fetch");
  };
  return { fn, urls };
}

describe("StorageReach", () => {
  for (const c of [
    {
      name: "the probe resolves before and after the third failed try: a verdict",
      tries: [false, false, false],
      probes: [true, true],
      want: ["retried", "retried", "cors"],
    },
    {
      name: "the probe rejects (the network is down, or the browser withholds the answer): no verdict, retried with the hint",
      tries: [false, false, false, false, false, true],
      probes: [false, false, false, false],
      want: ["retried", "retried", "hint", "hint", "hint", "ok"],
    },
    {
      // The case the old heuristic fired on: an outage right after the
      // create, the network back only once the tries have failed. One
      // probe that resolves after a failure proves the storage reachable
      // now, not that it refused a request while reachable.
      name: "the network comes back after the tries failed (reachable after the third, not before it): no verdict",
      tries: [false, false, false, true],
      probes: [false, true],
      want: ["retried", "retried", "hint", "ok"],
    },
    {
      name: "reachable, then an outage during the third try: no verdict until reachable around a failed try again",
      tries: [false, false, false, false, false],
      probes: [true, false, true, true],
      want: ["retried", "retried", "hint", "hint", "cors"],
    },
  ]) {
    it(c.name, async () => {
      const p = probe([...c.probes]);
      const t = new StorageReach(() => true, p.fn).watch(scripted([...c.tries]));
      const got: Outcome[] = [];
      for (let i = 0; i < c.tries.length; i++) got.push(await tryOnce(t));
      assert.deepEqual(got, c.want);
      assert.equal(p.urls.length, c.probes.length, "probed after each failure from the second, until an answer");
      for (const u of p.urls) assert.equal(u, "https://bucket.s3.test/", "the storage's origin, without the signed URL");
    });
  }

  it("never probes nor ends a run once a storage request of the run moved a byte or got an answer", async () => {
    const p = probe([true, true, true, true]);
    const reach = new StorageReach(() => true, p.fn);
    assert.equal(await tryOnce(reach.watch(scripted([true]))), "ok");
    const t = reach.watch(scripted([false, false, false, false]));
    for (let i = 0; i < 4; i++) assert.equal(await tryOnce(t), "retried");
    assert.equal(p.urls.length, 0);
  });

  it("neither probes nor counts a try made while the device is offline", async () => {
    let online = false;
    const p = probe([true, true, true, true]);
    const t = new StorageReach(() => online, p.fn).watch(scripted([false, false, false, false, false, false]));
    for (let i = 0; i < 3; i++) assert.equal(await tryOnce(t), "retried");
    assert.equal(p.urls.length, 0);
    online = true;
    assert.deepEqual([await tryOnce(t), await tryOnce(t), await tryOnce(t)], ["retried", "retried", "cors"]);
  });

  it("takes a probe that does not settle within its time limit for no evidence, and a Pause ends the probe", async () => {
    const ctrl = new AbortController();
    let probed = 0;
    const hanging: StorageProbe = (_url, signal) => {
      probed++;
      // Paused while the probe hangs.
      queueMicrotask(() => ctrl.abort());
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
    };
    const t = new StorageReach(() => true, hanging).watch(scripted([false, false]));
    assert.equal(await tryOnce(t), "retried");
    assert.equal(await tryOnce(t, ctrl.signal), "retried");
    assert.equal(probed, 1);
  });
  it("takes no evidence across a try made offline: reachable before it is not reachable before the next one", async () => {
    // Reachable after the second try; the third fails while offline (not
    // counted); the fourth, online again, fails between a stale "reachable"
    // and a fresh one: no verdict until reachable around a failed try again.
    let online = true;
    // Online when tries 1 and 2 fail; offline when try 3 fails; online after.
    const onlineAfter = [true, true, false, true, true];
    const p = probe([true, true, true]);
    const inner = scripted([false, false, false, false, false]);
    const t = new StorageReach(() => online, p.fn).watch(async (r) => {
      try {
        return await inner(r);
      } finally {
        online = onlineAfter.shift() ?? true;
      }
    });
    const got: Outcome[] = [];
    for (let i = 0; i < 5; i++) got.push(await tryOnce(t));
    assert.deepEqual(got, ["retried", "retried", "retried", "hint", "cors"]);
    assert.equal(p.urls.length, 3, "no probe after the try made offline");
  });

  it("takes no evidence across a try that timed out or was answered with an error", async () => {
    const p = probe([true, true, true]);
    const errs: (UploadError | "ok")[] = [
      noAnswer(),
      noAnswer(),
      new UploadError({ kind: "timeout", message: "no progress", retryable: true }),
      noAnswer(),
    ];
    const t = new StorageReach(() => true, p.fn).watch(async () => {
      const e = errs.shift();
      if (e === undefined || e === "ok") return ok;
      throw e;
    });
    const got: Outcome[] = [];
    for (let i = 0; i < 4; i++) got.push(await tryOnce(t));
    assert.deepEqual(got, ["retried", "retried", "retried", "hint"]);
  });

  it("ends a probe that ignores its signal at PROBE_TIMEOUT_MS, for no evidence (mock timers)", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    let called!: () => void;
    const probing = new Promise<void>((resolve) => (called = resolve));
    // Never settles, and never looks at its signal.
    const deaf: StorageProbe = () => {
      called();
      return new Promise(() => {});
    };
    const w = new StorageReach(() => true, deaf).watch(scripted([false, false]));
    assert.equal(await tryOnce(w), "retried");
    let settled = false;
    const second = tryOnce(w).finally(() => (settled = true));
    await probing;
    t.mock.timers.tick(PROBE_TIMEOUT_MS - 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(settled, false, "still probing before the time limit");
    t.mock.timers.tick(1);
    assert.equal(await second, "retried");
  });

  it("ends a probe that ignores its signal when the request is paused", async () => {
    const ctrl = new AbortController();
    const deaf: StorageProbe = () => {
      queueMicrotask(() => ctrl.abort());
      return new Promise(() => {});
    };
    const w = new StorageReach(() => true, deaf).watch(scripted([false, false]));
    assert.equal(await tryOnce(w), "retried");
    assert.equal(await tryOnce(w, ctrl.signal), "retried");
  });
});

describe("noCorsProbe", () => {
  for (const c of [
    { type: "opaque", proves: true },
    // A service worker that answers a failed fetch with its fallback page.
    { type: "basic", proves: false },
    { type: "default", proves: false },
  ]) {
    it(`${c.proves ? "takes" : "does not take"} a response of type ${c.type} for the storage's answer`, async (t) => {
      t.mock.method(globalThis, "fetch", async () => ({ type: c.type, status: 0 }) as Response);
      const got = noCorsProbe("https://bucket.s3.test/", new AbortController().signal).then(
        () => true,
        () => false,
      );
      assert.equal(await got, c.proves);
    });
  }
});
