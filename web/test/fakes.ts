// Test doubles: a virtual clock, and a small simulation of the API and the
// bucket with the contract's idempotency semantics, whose faults are
// scripted per request.
import { createHash } from "node:crypto";
import { UploadError, abortError } from "../src/errors.js";
import type { Clock, Network } from "../src/retry.js";
import type { PutRequest, PutResponse } from "../src/transport.js";

/** Virtual time: sleep records the wait and moves the clock at once. */
export class FakeClock implements Clock {
  sleeps: number[] = [];
  constructor(public t = Date.UTC(2026, 0, 15, 9, 0, 0)) {}
  now(): number {
    return this.t;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortError(signal);
    this.sleeps.push(ms);
    this.t += ms;
    await Promise.resolve();
    if (signal?.aborted) throw abortError(signal);
  }
}

/** The device's network, switched by the test: going offline aborts what listens, going online wakes the waiters. */
export class FakeNetwork implements Network {
  private online = true;
  private readonly offlineListeners = new Set<() => void>();
  private waiters: (() => void)[] = [];
  /** Each waitOnline call, for assertions. */
  waits = 0;

  isOnline(): boolean {
    return this.online;
  }
  onOffline(fn: () => void): () => void {
    this.offlineListeners.add(fn);
    return () => this.offlineListeners.delete(fn);
  }
  waitOnline(signal?: AbortSignal): Promise<void> {
    this.waits++;
    if (this.online) return Promise.resolve();
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      signal?.addEventListener("abort", () => reject(abortError(signal)), { once: true });
      this.waiters.push(resolve);
    });
  }
  set(online: boolean): void {
    if (online === this.online) return;
    this.online = online;
    if (!online) for (const fn of [...this.offlineListeners]) fn();
    else for (const w of this.waiters.splice(0)) w();
  }
}

/** A scripted fault for the next request of a kind. */
export type Fault =
  | "network" // fails before reaching the server
  | "lose-response" // the server does the work, the client sees a network error
  | "hang" // never answers (until aborted)
  | "drop" // a PUT's connection is cut after some of its bytes were sent: nothing stored, no answer
  | { status: number; body?: string; headers?: Record<string, string> };

/**
 * A fault of a single PUT: any fault, or "racer-stores": another PUT of the
 * same upload (the same URL and bytes) wins the race at S3, storing the
 * object, and this one gets 409 ConditionalRequestConflict.
 */
export type PutFault = Fault | "racer-stores";

interface Claim {
  key: string;
  fingerprint: string;
  uploadId: string;
  filename: string;
  contentType: string;
  size: number;
  /** The whole file's SHA-256: a single PUT's always; a multipart upload's if its create, or its complete, gave one. */
  sha256?: string;
  expiresAt: number;
  url: string;
  /** The URL signs If-None-Match: * (the server's default): it only ever creates its object. */
  ifNoneMatch: boolean;
  partSize?: number;
  state: "pending" | "completed" | "aborted";
  /** S3's checksum of a completed multipart object: base64(SHA-256 of the parts' digests) "-" count. */
  compositeSha256?: string;
}

/** A multipart upload as the bucket holds it. */
interface Multipart {
  parts: Map<number, { size: number; sha256: string; bytes: Buffer }>;
  /** Signed part URLs: the part and the SHA-256 (hex) each is bound to. */
  urls: Map<string, { partNumber: number; sha256: string; expiresAt: number }>;
}

/** A PUT as the bucket saw it, with its answer (status 0: none, a network fault). */
export interface SeenPut {
  url: string;
  headers: Record<string, string>;
  size: number;
  fault?: PutFault;
  partNumber?: number;
  /** What the bucket answered, also when the client never heard it ("lose-response"). */
  status?: number;
}

export interface SeenRequest {
  method: string;
  path: string;
  key?: string;
  body?: string;
  fault?: Fault;
}

/**
 * The API (POST /uploads, GET /uploads/{id}) and the bucket, in memory.
 * Creates are idempotent per key; a PUT stores an object only with the
 * signed headers and the exact bytes, before the URL expires.
 */
export class FakeServer {
  readonly requests: SeenRequest[] = [];
  readonly puts: SeenPut[] = [];
  readonly createFaults: Fault[] = [];
  /** Faults of single PUTs. */
  readonly putFaults: PutFault[] = [];
  readonly getFaults: Fault[] = [];
  /** Faults of the PUTs of each part, by part number. */
  readonly partFaults = new Map<number, Fault[]>();
  readonly urlFaults: Fault[] = [];
  readonly listFaults: Fault[] = [];
  readonly completeFaults: Fault[] = [];
  readonly deleteFaults: Fault[] = [];
  /** Lifetime of part URLs (default 15 min). */
  partUrlTtl = 15 * 60_000;
  /** Part PUTs in flight now, and the most seen at once. */
  partsInFlight = 0;
  maxPartsInFlight = 0;
  /** Called when a part PUT starts, before its bytes are stored (a test can act "mid-upload"). */
  onPartPut?: (partNumber: number) => void | Promise<void>;
  /** Multipart uploads the bucket holds (an aborted or completed one is removed), by upload id. */
  readonly multiparts = new Map<string, Multipart>();
  /** Lifetimes of the URLs of the next first-time creates and refreshes (default 15 min). */
  readonly ttls: number[] = [];
  /** Status polls that still answer pending (a late S3 event). */
  pendingPolls = 0;
  /** Whether single-PUT URLs sign If-None-Match: * (as the server does); false: an older server, whose URLs overwrite. */
  signIfNoneMatch = true;
  readonly claims = new Map<string, Claim>();
  readonly objects = new Map<string, { sha256: string; size: number; contentType: string; multipart?: boolean }>();
  private seq = 0;

  constructor(private readonly clock: Clock) {}

  get creates(): SeenRequest[] {
    return this.requests.filter((r) => r.method === "POST" && r.path.endsWith("/uploads"));
  }

  fetch: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const method = init?.method ?? "GET";
    const headers = new Headers(init?.headers);
    const signal = init?.signal ?? undefined;
    const seen: SeenRequest = { method, path: url.pathname, key: headers.get("Idempotency-Key") ?? undefined, body: init?.body as string | undefined };
    this.requests.push(seen);
    if (method === "POST" && url.pathname.endsWith("/uploads")) {
      return this.withFault(this.createFaults.shift(), seen, signal, () => this.create(seen.key, seen.body ?? ""));
    }
    const m = /\/uploads\/([^/]+)$/.exec(url.pathname);
    if (method === "GET" && m) return this.withFault(this.getFaults.shift(), seen, signal, () => this.status(m[1]));
    if (method === "DELETE" && m) return this.withFault(this.deleteFaults.shift(), seen, signal, () => this.abort(m[1]));
    const sub = /\/uploads\/([^/]+)\/(parts|complete)$/.exec(url.pathname);
    if (sub && method === "POST" && sub[2] === "parts") return this.withFault(this.urlFaults.shift(), seen, signal, () => this.partUrls(sub[1], seen.body ?? ""));
    if (sub && method === "GET" && sub[2] === "parts") return this.withFault(this.listFaults.shift(), seen, signal, () => this.listParts(sub[1]));
    if (sub && method === "POST" && sub[2] === "complete") return this.withFault(this.completeFaults.shift(), seen, signal, () => this.complete(sub[1], seen.body));
    return json(404, { error: "not_found", message: "no route" });
  };

  /** Requests to a route: "POST parts", "GET parts", "POST complete", "DELETE", … */
  requestsTo(method: string, suffix: string): SeenRequest[] {
    return this.requests.filter((r) => r.method === method && (suffix === "" ? /\/uploads\/[^/]+$/.test(r.path) : r.path.endsWith(suffix)));
  }

  /** Bytes of part PUTs sent so far, all attempts counted. */
  get partBytesSent(): number {
    return this.puts.filter((p) => p.partNumber !== undefined).reduce((n, p) => n + p.size, 0);
  }

  transport = async (req: PutRequest): Promise<PutResponse> => {
    if (new URL(req.url).searchParams.has("partNumber")) return this.partTransport(req);
    const size = req.body.size;
    const fault = this.putFaults.shift();
    const seen: SeenPut = { url: req.url, headers: { ...req.headers }, size, fault };
    this.puts.push(seen);
    if (fault === "network") throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
    if (fault === "drop") {
      req.onProgress?.(Math.floor(size / 2), size);
      throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
    }
    if (fault === "hang") {
      return new Promise((_, reject) => req.signal?.addEventListener("abort", () => reject(abortError(req.signal)), { once: true }));
    }
    if (fault === "racer-stores") {
      await this.put(req); // the other PUT: the same URL, the same bytes
      seen.status = 409;
      return s3Error(409, "ConditionalRequestConflict", "A conflicting conditional operation is currently in progress against this resource. Please try again.");
    }
    if (fault && fault !== "lose-response") {
      seen.status = fault.status;
      return { status: fault.status, text: fault.body ?? "", etag: null };
    }
    req.onProgress?.(Math.floor(size / 2), size);
    const res = await this.put(req);
    seen.status = res.status;
    req.onProgress?.(size, size);
    if (fault === "lose-response") throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
    return res;
  };

  private async partTransport(req: PutRequest): Promise<PutResponse> {
    const size = req.body.size;
    const partNumber = Number(new URL(req.url).searchParams.get("partNumber"));
    const fault = this.partFaults.get(partNumber)?.shift();
    this.puts.push({ url: req.url, headers: { ...req.headers }, size, fault, partNumber });
    this.partsInFlight++;
    this.maxPartsInFlight = Math.max(this.maxPartsInFlight, this.partsInFlight);
    try {
      if (req.signal?.aborted) throw abortError(req.signal);
      if (fault === "network") throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
      if (fault === "drop") {
        req.onProgress?.(Math.floor(size / 2), size);
        throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
      }
      if (fault === "hang") {
        return await new Promise((_, reject) => req.signal?.addEventListener("abort", () => reject(abortError(req.signal)), { once: true }));
      }
      if (fault && fault !== "lose-response") return { status: fault.status, text: fault.body ?? "", etag: null };
      req.onProgress?.(Math.floor(size / 2), size);
      await this.onPartPut?.(partNumber);
      if (req.signal?.aborted) throw abortError(req.signal);
      const res = await this.putPart(req, partNumber);
      req.onProgress?.(size, size);
      if (fault === "lose-response") throw new UploadError({ kind: "network", message: "PUT: connection reset", retryable: true });
      return res;
    } finally {
      this.partsInFlight--;
    }
  }

  private async putPart(req: PutRequest, partNumber: number): Promise<PutResponse> {
    const u = new URL(req.url);
    const uploadId = u.pathname.split("/").pop() ?? "";
    const mp = this.multiparts.get(uploadId);
    const signed = mp?.urls.get(req.url);
    if (!mp || !signed) return s3Error(404, "NoSuchUpload", "The specified multipart upload does not exist.");
    if (this.clock.now() >= signed.expiresAt) return s3Error(403, "AccessDenied", "Request has expired");
    const bytes = Buffer.from(await req.body.arrayBuffer());
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    if (Buffer.from(signed.sha256, "hex").toString("base64") !== req.headers["x-amz-checksum-sha256"]) return s3Error(403, "SignatureDoesNotMatch", "signed headers differ");
    if (sha256 !== signed.sha256) return s3Error(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.");
    mp.parts.set(partNumber, { size: bytes.length, sha256, bytes });
    return { status: 200, text: "", etag: `"etag-${partNumber}"` };
  }

  private claimById(uploadId: string): Claim | undefined {
    return [...this.claims.values()].find((x) => x.uploadId === uploadId);
  }

  private partUrls(uploadId: string, body: string): Response {
    const c = this.claimById(uploadId);
    const mp = this.multiparts.get(uploadId);
    if (!c || !c.partSize) return json(404, { error: "not_found", message: "no such multipart upload" });
    if (c.state !== "pending" || !mp) return json(409, { error: "upload_not_pending", message: `the upload is ${c.state}` });
    const { parts } = JSON.parse(body) as { parts: { partNumber: number; sha256: string }[] };
    if (parts.length < 1 || parts.length > 100) return json(400, { error: "invalid_request", message: "1 to 100 parts" });
    const expiresAt = this.clock.now() + this.partUrlTtl;
    return json(200, {
      parts: parts.map((p) => {
        const url = `https://bucket.test/uploads/${uploadId}?partNumber=${p.partNumber}&exp=${expiresAt}&sig=${++this.seq}`;
        mp.urls.set(url, { partNumber: p.partNumber, sha256: p.sha256, expiresAt });
        return {
          partNumber: p.partNumber,
          method: "PUT",
          url,
          headers: { "x-amz-checksum-sha256": Buffer.from(p.sha256, "hex").toString("base64") },
          expiresAt: new Date(expiresAt).toISOString(),
        };
      }),
    });
  }

  private listParts(uploadId: string): Response {
    const c = this.claimById(uploadId);
    if (!c || !c.partSize) return json(404, { error: "not_found", message: "no such multipart upload" });
    const mp = this.multiparts.get(uploadId);
    if (c.state !== "pending" || !mp) return json(409, { error: "upload_not_pending", message: `the upload is ${c.state}` });
    const parts = [...mp.parts.entries()].sort(([a], [b]) => a - b).map(([partNumber, p]) => ({ partNumber, size: p.size, sha256: p.sha256, etag: `"etag-${partNumber}"` }));
    return json(200, { parts });
  }

  /**
   * POST /uploads/{id}/complete, with its optional declaration: every
   * part's SHA-256 (compared with the parts held: 409 parts_mismatch, nothing
   * stored) and the whole file's. Parts missing come first (409 parts_missing).
   */
  private complete(uploadId: string, body?: string): Response {
    const c = this.claimById(uploadId);
    if (!c || !c.partSize) return json(404, { error: "not_found", message: "no such multipart upload" });
    if (c.state === "completed") return json(200, this.body(c));
    const mp = this.multiparts.get(uploadId);
    if (c.state !== "pending" || !mp) return json(409, { error: "upload_not_pending", message: `the upload is ${c.state}` });
    const count = Math.ceil(c.size / c.partSize);
    const req = (body ? JSON.parse(body) : {}) as { parts?: { partNumber: number; sha256: string }[]; sha256?: string };
    if (req.parts !== undefined) {
      const numbers = req.parts.map((p) => p.partNumber).sort((a, b) => a - b);
      if (numbers.length !== count || numbers.some((n, i) => n !== i + 1) || req.parts.some((p) => !/^[0-9a-f]{64}$/i.test(p.sha256))) {
        return json(400, { error: "invalid_request", message: `parts must name every part 1..${count} exactly once, each with its sha256` });
      }
    }
    for (let n = 1; n <= count; n++) {
      const want = Math.min(c.partSize, c.size - (n - 1) * c.partSize);
      if (mp.parts.get(n)?.size !== want) return json(409, { error: "parts_missing", message: `part ${n} is missing` });
    }
    const differ = (req.parts ?? []).filter((p) => mp.parts.get(p.partNumber)?.sha256 !== p.sha256.toLowerCase()).map((p) => p.partNumber);
    if (differ.length > 0) return json(409, { error: "parts_mismatch", message: `parts whose SHA-256 differs from the declared one: ${differ.join(", ")}` });
    if (req.sha256 !== undefined && c.sha256 !== undefined && req.sha256.toLowerCase() !== c.sha256) {
      return json(400, { error: "invalid_request", message: "sha256 differs from the create's" });
    }
    const held = [...mp.parts.entries()].sort(([a], [b]) => a - b).map(([, p]) => p);
    const bytes = Buffer.concat(held.map((p) => p.bytes));
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    // S3 cannot check a whole file's SHA-256 against parts; the fake can, and does (a declared one that is wrong is a test's bug).
    if (c.sha256 !== undefined && sha256 !== c.sha256) return json(409, { error: "parts_missing", message: "the parts do not make the file" });
    if (c.sha256 === undefined && req.sha256 !== undefined) c.sha256 = req.sha256.toLowerCase();
    const digests = Buffer.concat(held.map((p) => Buffer.from(p.sha256, "hex")));
    c.compositeSha256 = `${createHash("sha256").update(digests).digest("base64")}-${held.length}`;
    this.objects.set(c.uploadId, { sha256, size: bytes.length, contentType: c.contentType, multipart: true });
    this.multiparts.delete(uploadId);
    c.state = "completed";
    return json(200, this.body(c));
  }

  /** The complete requests' declarations, in order (undefined: no body). */
  completeBodies(): ({ parts?: { partNumber: number; sha256: string }[]; sha256?: string } | undefined)[] {
    return this.requestsTo("POST", "/complete").map((r) => (r.body ? (JSON.parse(r.body) as { parts?: { partNumber: number; sha256: string }[]; sha256?: string }) : undefined));
  }

  private abort(uploadId: string): Response {
    const c = this.claimById(uploadId);
    if (!c) return json(404, { error: "not_found", message: "no such upload" });
    if (c.state === "completed") return json(409, { error: "upload_completed", message: "the upload is completed" });
    this.multiparts.delete(uploadId);
    c.state = "aborted";
    return json(200, this.body(c));
  }

  private async withFault(fault: Fault | undefined, seen: SeenRequest, signal: AbortSignal | undefined, handle: () => Response | Promise<Response>): Promise<Response> {
    seen.fault = fault;
    if (signal?.aborted) throw signal.reason;
    if (fault === "network" || fault === "drop") throw new TypeError("Failed to fetch");
    if (fault === "hang") {
      return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
    if (fault === "lose-response") {
      await handle();
      throw new TypeError("Failed to fetch");
    }
    if (fault) return new Response(fault.body ?? "", { status: fault.status, headers: fault.headers });
    return handle();
  }

  private sign(c: Claim): void {
    c.expiresAt = this.clock.now() + (this.ttls.shift() ?? 15 * 60_000);
    c.url = `https://bucket.test/uploads/${c.uploadId}?exp=${c.expiresAt}&sig=${++this.seq}`;
  }

  private create(key: string | undefined, body: string): Response {
    if (!key) return json(400, { error: "idempotency_key_required", message: "Idempotency-Key is required" });
    const req = JSON.parse(body) as { filename: string; contentType: string; size: number; sha256?: string; partSize?: number };
    // A multipart create may leave the whole file's SHA-256 out; a single PUT's needs it (S3 checks it).
    if (req.sha256 === undefined && req.partSize === undefined) return json(400, { error: "invalid_request", message: "sha256 is required for a single PUT (without partSize)" });
    if (req.sha256 !== undefined && !/^[0-9a-f]{64}$/i.test(req.sha256)) return json(400, { error: "invalid_request", message: "sha256 must be 64 hex characters" });
    const fingerprint = JSON.stringify([req.filename, req.contentType, req.size, req.sha256?.toLowerCase() ?? null, req.partSize]);
    if (req.partSize !== undefined && Math.ceil(req.size / req.partSize) > 10_000) return json(400, { error: "invalid_request", message: "over 10,000 parts" });
    let c = this.claims.get(key);
    if (c && c.fingerprint !== fingerprint) return json(422, { error: "idempotency_key_reuse", message: "this key was used with another request" });
    const replay = !!c;
    if (!c) {
      c = {
        key,
        fingerprint,
        uploadId: `u${++this.seq}`.padEnd(16, "0"),
        ...req,
        sha256: req.sha256?.toLowerCase(),
        expiresAt: 0,
        url: "",
        ifNoneMatch: this.signIfNoneMatch,
        state: "pending",
      };
      this.sign(c);
      this.claims.set(key, c);
      if (c.partSize) this.multiparts.set(c.uploadId, { parts: new Map(), urls: new Map() });
    } else if (c.expiresAt <= this.clock.now()) {
      this.sign(c);
    }
    return json(201, this.body(c), replay ? { "Idempotent-Replay": "true" } : {});
  }

  private status(uploadId: string): Response {
    const c = this.claimById(uploadId);
    if (!c) return json(404, { error: "not_found", message: "no such upload" });
    if (this.pendingPolls > 0) {
      this.pendingPolls--;
      return json(200, this.body(c, true));
    }
    return json(200, this.body(c));
  }

  private body(c: Claim, stillPending = false) {
    // sha256 only where there is one (a multipart upload created without it has none, unless its complete gave one).
    const base = { uploadId: c.uploadId, storageKey: `uploads/${c.uploadId}`, filename: c.filename, contentType: c.contentType, bytes: c.size, ...(c.sha256 ? { sha256: c.sha256 } : {}) };
    if (c.state === "aborted") return { ...base, status: "aborted" };
    if (c.partSize) {
      const multipart = { partSize: c.partSize, partCount: Math.ceil(c.size / c.partSize) };
      if (c.state === "completed") {
        return { ...base, status: "completed", etag: '"etag-mp"', completedAt: new Date(this.clock.now()).toISOString(), multipart, compositeSha256: c.compositeSha256 };
      }
      return { ...base, status: "pending", multipart };
    }
    if (this.objects.has(c.uploadId) && !stillPending) return { ...base, status: "completed", etag: '"etag"', completedAt: new Date(this.clock.now()).toISOString() };
    const checksum = Buffer.from(c.sha256!, "hex").toString("base64");
    const headers: Record<string, string> = { "Content-Type": c.contentType, "x-amz-checksum-sha256": checksum };
    if (c.ifNoneMatch) headers["If-None-Match"] = "*";
    return { ...base, status: "pending", upload: { method: "PUT", url: c.url, headers, expiresAt: new Date(c.expiresAt).toISOString() } };
  }

  private async put(req: PutRequest): Promise<PutResponse> {
    const c = [...this.claims.values()].find((x) => x.url === req.url);
    if (!c) return s3Error(403, "AccessDenied", "signature does not match");
    if (this.clock.now() >= c.expiresAt) return s3Error(403, "AccessDenied", "Request has expired");
    if (req.headers["Content-Type"] !== c.contentType || req.body.size !== c.size) return s3Error(403, "SignatureDoesNotMatch", "signed headers differ");
    const ifNoneMatch = Object.entries(req.headers).find(([k]) => k.toLowerCase() === "if-none-match")?.[1];
    if (c.ifNoneMatch !== (ifNoneMatch === "*")) return s3Error(403, "SignatureDoesNotMatch", "signed headers differ");
    // The URL only ever creates its object: S3 checks the condition once the bytes arrived.
    if (c.ifNoneMatch && this.objects.has(c.uploadId)) {
      return s3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
    }
    const bytes = Buffer.from(await req.body.arrayBuffer());
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    if (Buffer.from(sha256, "hex").toString("base64") !== req.headers["x-amz-checksum-sha256"] || sha256 !== c.sha256) {
      return s3Error(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.");
    }
    this.objects.set(c.uploadId, { sha256, size: bytes.length, contentType: c.contentType });
    return { status: 200, text: "", etag: '"etag"' };
  }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

/** The body of a POST /uploads for a single PUT (as the Go client's policy test makes it)… */
export const createMeta = { filename: "a.txt", contentType: "text/plain", size: 3, sha256: "a".repeat(64) };
/** …and the API's 201 to it. */
export const created = {
  uploadId: "u1",
  status: "pending",
  storageKey: "uploads/u1",
  filename: "a.txt",
  contentType: "text/plain",
  bytes: 3,
  sha256: "a".repeat(64),
  upload: { method: "PUT", url: "https://s3.test/u1", headers: { "Content-Type": "text/plain" }, expiresAt: "2026-01-15T09:15:00Z" },
};

function s3Error(status: number, code: string, message: string): PutResponse {
  return { status, text: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`, etag: null };
}

export function sha256hex(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** A File with deterministic content. */
export function makeFile(name: string, size: number, type = "application/octet-stream", seed = 1): File {
  const bytes = new Uint8Array(size);
  let x = seed;
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return new File([bytes], name, { type, lastModified: 1_700_000_000_000 });
}

/** Counts the calls of crypto.subtle.digest (which it still makes) until restore(), for a test's finally. */
export function countNativeDigests(): { calls(): number; reset(): void; restore(): void } {
  const subtle = globalThis.crypto.subtle;
  const own = Object.getOwnPropertyDescriptor(subtle, "digest");
  const digest = subtle.digest.bind(subtle);
  let n = 0;
  subtle.digest = (algorithm: AlgorithmIdentifier, data: BufferSource) => {
    n++;
    return digest(algorithm, data);
  };
  return {
    calls: () => n,
    reset: () => {
      n = 0;
    },
    restore: () => {
      if (own) Object.defineProperty(subtle, "digest", own);
      else delete (subtle as { digest?: unknown }).digest;
    },
  };
}
