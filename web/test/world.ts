// A page of the demo in miniature: UploadClients over one fake server,
// virtual clock, network and IndexedDB, so that a second client is the
// same page after a reload.
import assert from "node:assert/strict";
import { setImmediate as tick } from "node:timers/promises";
import { IDBFactory } from "fake-indexeddb";
import { UploadClient, type UploadClientOptions, type UploadEvent } from "../src/client.js";
import { UploadError } from "../src/errors.js";
import { IndexedDBStore } from "../src/store.js";
import { FakeClock, FakeNetwork, FakeServer } from "./fakes.js";

export const API = "https://api.test";

/** A page: a client over a shared server, clock and IndexedDB (a reload is a second page). */
export function world() {
  const clock = new FakeClock();
  const server = new FakeServer(clock);
  const factory = new IDBFactory();
  const network = new FakeNetwork();
  let minted = 0;
  // The no-cors probe of the storage: unreachable unless a test says (a rejected probe proves nothing).
  const storage = { reachable: false, probes: 0 };
  const page = (over: Partial<UploadClientOptions> = {}) => {
    const events: UploadEvent[] = [];
    const client = new UploadClient({
      apiBase: API,
      store: new IndexedDBStore({ indexedDB: factory }),
      fetch: server.fetch,
      transport: server.transport,
      probeStorage: async () => {
        storage.probes++;
        if (!storage.reachable) throw new TypeError("Failed to fetch");
      },
      clock,
      network,
      random: () => 0.5,
      newKey: () => `key-${++minted}-${"0".repeat(16)}`,
      locks: null,
      ...over,
    });
    const onEvent = (e: UploadEvent) => events.push(e);
    return { client, events, onEvent };
  };
  return { clock, server, factory, network, storage, page, minted: () => minted };
}

export async function failure(p: Promise<unknown>): Promise<UploadError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  assert.ok(e instanceof UploadError, `want an UploadError, got ${String(e)}`);
  return e;
}

/**
 * Waits (real event-loop turns; the world's clock does not move) until cond
 * holds: at least 500 turns, and up to 5 s of them, since some steps run
 * off the loop (node's crypto.subtle and Blob reads, on its thread pool)
 * and take longer, in turns, on a loaded machine.
 */
export async function until(cond: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (let i = 0; i < 500 || Date.now() < deadline; i++) {
    if (await cond()) return;
    await tick();
  }
  assert.fail(`never happened: ${what}`);
}

