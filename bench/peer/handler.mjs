// Benchmark peer, never shipped: POST /uploads written the way a typical team
// would with Powertools for AWS Lambda (TypeScript) idempotency and the AWS
// SDK for JavaScript v3. It takes an API Gateway HTTP API (payload v2) event
// and returns a v2 response, like ../../functions/api does.
//
// Where Powertools' semantics differ from ours (docs/api.md), it is said here:
//
// - Round trips. A fresh request costs 2 DynamoDB writes: a conditional
//   PutItem of an INPROGRESS record, then, after the handler returned, an
//   UpdateItem that stores the response (ours: one PutItem holding the whole
//   record, because presigning is computed before the claim). A replay is one
//   PutItem whose condition fails with ReturnValuesOnConditionCheckFailure =
//   ALL_OLD, like ours. A handler that throws costs a third call (DeleteItem).
// - In progress. Every fresh request has an INPROGRESS window (between the two
//   writes), so a concurrent duplicate gets 409 idempotency_in_progress where
//   ours replays the winner's 201 (ours only answers 409 while a claim's work
//   is genuinely mid-flight). The window is the Lambda's remaining time
//   (in_progress_expiration); if the UpdateItem fails the key stays claimed
//   until then (ours never leaves a key claimed on failure).
// - Tenant. Powertools keys only on what eventKeyJmesPath selects; it has no
//   tenant scoping. We add the authorizer's `sub` to the key expression, as
//   a careful team would, so two tenants never share a key.
// - Fingerprint. Powertools hashes (md5 by default) the raw JSON values that
//   payloadValidationJmesPath selects. Key order and whitespace do not count
//   (the selection is re-serialized), but values are not canonicalized:
//   an upper-case sha256 is a different payload (422 here, replay in ours),
//   and a quoted Idempotency-Key ("...") is a different key from the bare one.
// - Replay. The stored response is returned verbatim forever (within the
//   retention), even after its presigned URL expired (ours re-signs), and
//   nothing records completion: there is no finalize/status path here.
// - Expiry. Powertools enforces the retention in code (condition
//   `expiration < :now` and a client-side check), like ours; the table's TTL
//   attribute is `expiration`, ours `expires_at`.

import { randomUUID } from 'node:crypto';
import {
  IdempotencyAlreadyInProgressError,
  IdempotencyConfig,
  IdempotencyValidationError,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';

const TABLE_NAME = required('TABLE_NAME');
const BUCKET_NAME = required('BUCKET_NAME');
const UPLOAD_PREFIX = process.env.UPLOAD_PREFIX ?? 'uploads/';
const MAX_UPLOAD_BYTES = Number(process.env.MAX_UPLOAD_BYTES ?? 5368709120);
const PRESIGN_TTL_SECONDS = 15 * 60;
const IDEMPOTENCY_TTL_SECONDS = 24 * 60 * 60;
const MAX_BODY_BYTES = 16 << 10;

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
}

// Endpoints, region and credentials come from the SDK's standard variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY). Exported so the bench server can count attempts on
// the very client instance Powertools uses.
export const dynamodb = new DynamoDBClient({});
export const s3 = new S3Client({
  forcePathStyle: process.env.S3_FORCE_PATH_STYLE !== 'false',
});

const persistenceStore = new DynamoDBPersistenceLayer({
  tableName: TABLE_NAME,
  awsSdkV3Client: dynamodb,
});

const idempotencyConfig = new IdempotencyConfig({
  // Powertools has no tenant scoping: the tenant goes into the key.
  eventKeyJmesPath: '[requestContext.authorizer.jwt.claims.sub, headers."idempotency-key"]',
  // The canonical request fields; the body is a JSON string in a v2 event.
  payloadValidationJmesPath: 'powertools_json(body).[filename, contentType, size, sha256]',
  expiresAfterSeconds: IDEMPOTENCY_TTL_SECONDS,
  throwOnNoIdempotencyKey: true,
  // A replay returns the stored response; mark it like ours does.
  responseHook: (response, record) => {
    log('replayed', { idempotency_key: record.idempotencyKey });
    return { ...response, headers: { ...response.headers, 'Idempotent-Replay': 'true' } };
  },
});

// createUpload runs once per key: presign and build the 201. Powertools
// stores what it returns and replays it. The third argument is the request
// the outer handler already validated (Powertools passes extra arguments
// through; it hashes only the event).
const createUpload = async (_event, _context, request) => {
  const uploadId = randomUUID();
  const storageKey = UPLOAD_PREFIX + uploadId;
  const checksum = Buffer.from(request.sha256, 'hex').toString('base64');
  const signingDate = new Date(Math.floor(Date.now() / 1000) * 1000);
  const url = await getSignedUrl(
    s3,
    new PutObjectCommand({
      Bucket: BUCKET_NAME,
      Key: storageKey,
      ContentType: request.contentType,
      ContentLength: request.size,
      ChecksumAlgorithm: 'SHA256',
      ChecksumSHA256: checksum,
    }),
    {
      expiresIn: PRESIGN_TTL_SECONDS,
      signingDate,
      // The JS presigner leaves Content-Type unsigned and hoists x-amz-*
      // headers into the query (where S3 ignores the checksum) unless told.
      signableHeaders: new Set(['content-type', 'content-length']),
      unhoistableHeaders: new Set(['x-amz-checksum-sha256']),
    },
  );
  const body = {
    uploadId,
    status: 'pending',
    storageKey,
    filename: request.filename,
    contentType: request.contentType,
    bytes: request.size,
    sha256: request.sha256,
    upload: {
      method: 'PUT',
      url,
      headers: { 'Content-Type': request.contentType, 'x-amz-checksum-sha256': checksum },
      expiresAt: new Date(signingDate.getTime() + PRESIGN_TTL_SECONDS * 1000).toISOString(),
    },
  };
  log('claimed', { upload_id: uploadId });
  return {
    statusCode: 201,
    headers: {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-store',
      Location: `/uploads/${uploadId}`,
    },
    body: JSON.stringify(body),
  };
};

const idempotentCreate = makeIdempotent(createUpload, {
  persistenceStore,
  config: idempotencyConfig,
});

export const handler = async (event, context) => {
  const key = parseIdempotencyKey(event.headers?.['idempotency-key']);
  if (key instanceof HttpError) return errorResponse(key);
  const request = parseRequest(event);
  if (request instanceof HttpError) return errorResponse(request);
  try {
    return await idempotentCreate(event, context, request);
  } catch (err) {
    return errorResponse(mapError(err));
  }
};

class HttpError {
  constructor(status, code, message, headers = {}) {
    Object.assign(this, { status, code, message, headers });
  }
}

function mapError(err) {
  if (err instanceof IdempotencyValidationError) {
    log('key reused with a different request', {});
    return new HttpError(422, 'idempotency_key_reuse',
      'This Idempotency-Key was already used for a different request.');
  }
  if (err instanceof IdempotencyAlreadyInProgressError) {
    return new HttpError(409, 'idempotency_in_progress',
      'A request with this Idempotency-Key is in progress; retry later.', { 'Retry-After': '1' });
  }
  const cause = err?.cause ?? err;
  if (err?.name === 'IdempotencyInconsistentStateError' || isUnavailable(cause)) {
    log('store unavailable', { error: String(cause) }, 'WARN');
    return new HttpError(503, 'service_unavailable',
      'The service is busy; retry later with the same Idempotency-Key.', { 'Retry-After': '1' });
  }
  log('internal error', { error: String(err?.stack ?? err), cause: String(err?.cause ?? '') }, 'ERROR');
  return new HttpError(500, 'internal_error', 'Something went wrong on our side; retry later.');
}

const UNAVAILABLE = new Set([
  'ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded',
  'InternalServerError', 'ServiceUnavailable', 'TimeoutError',
]);

function isUnavailable(e) {
  if (!e || typeof e !== 'object') return false;
  const status = e.$metadata?.httpStatusCode;
  return UNAVAILABLE.has(e.name) || e.$retryable !== undefined || status === undefined || status >= 500;
}

function errorResponse(e) {
  return {
    statusCode: e.status,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...e.headers },
    body: JSON.stringify({ error: e.code, message: e.message }),
  };
}

function log(message, fields, level = 'INFO') {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields })}\n`);
}

// Validation mirrors internal/upload/request.go; it runs before the idempotency
// claim, so invalid requests cost no DynamoDB call (as in ours).

function parseIdempotencyKey(header) {
  let k = (header ?? '').replace(/^[ \t]+|[ \t]+$/g, '');
  if (k === '') return new HttpError(400, 'idempotency_key_required', 'The Idempotency-Key header is required.');
  const invalid = new HttpError(400, 'idempotency_key_invalid',
    'The Idempotency-Key header must be 16 to 255 visible ASCII characters.');
  if (k[0] === '"') {
    if (k.length < 2 || k[k.length - 1] !== '"') return invalid;
    k = k.slice(1, -1);
    if (/["\\]/.test(k)) return invalid;
  }
  if (k.length < 16 || k.length > 255 || !/^[\x21-\x7e]*$/.test(k)) return invalid;
  return k;
}

const FIELDS = ['filename', 'contentType', 'size', 'sha256'];
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"(?:[^"\\\\]|\\\\.)*"))*[ \\t]*$`);

function bad(message) {
  return new HttpError(400, 'invalid_request', `${message}.`);
}

function parseRequest(event) {
  let raw = event.body ?? '';
  let bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
  if (bytes.length > MAX_BODY_BYTES) {
    return new HttpError(413, 'request_too_large', `The request body is larger than ${MAX_BODY_BYTES} bytes.`);
  }
  if (event.isBase64Encoded) {
    try {
      raw = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return bad('the request body is not valid UTF-8');
    }
  }
  let w;
  try {
    w = JSON.parse(raw);
  } catch {
    return bad('the request body must be a JSON object');
  }
  if (w === null || typeof w !== 'object' || Array.isArray(w)) return bad('the request body must be a JSON object');
  for (const name of Object.keys(w)) {
    if (!FIELDS.includes(name)) return bad(`unknown field "${name}"`);
  }
  for (const name of FIELDS) {
    if (w[name] === undefined || w[name] === null) return bad(name, `${name} is required`);
  }
  const { filename, contentType, size, sha256 } = w;
  if (typeof filename !== 'string') return bad('filename has the wrong type');
  if (typeof contentType !== 'string') return bad('contentType has the wrong type');
  if (typeof sha256 !== 'string') return bad('sha256 has the wrong type');
  if (typeof size !== 'number' || !Number.isInteger(size)) return bad('size must be a whole number of bytes');

  if (filename === '') return bad('filename must not be empty');
  if (!filename.isWellFormed()) return bad('filename must be valid UTF-8');
  if (Buffer.byteLength(filename, 'utf8') > 255) return bad('filename must be at most 255 bytes');
  if (filename === '.' || filename === '..') return bad('filename must not be . or ..');
  if (/[/\\]/.test(filename)) return bad('filename must be a base name, without / or \\');
  if (/[\u0000-\u001f\u007f-\u009f]/.test(filename)) return bad('filename must not contain control characters');

  if (contentType === '' || contentType.length > 255) {
    return bad('contentType must be a media type of 1 to 255 characters');
  }
  if (!/^[\x20-\x7e]*$/.test(contentType)) return bad('contentType must be printable ASCII');
  if (!MEDIA_TYPE.test(contentType)) return bad('contentType must be a media type such as image/jpeg');

  if (size < 1) return bad('size must be at least 1');
  if (sha256.length !== 64 || !/^[0-9a-fA-F]*$/.test(sha256)) return bad('sha256 must be 64 hex characters');
  if (size > MAX_UPLOAD_BYTES) return new HttpError(413, 'file_too_large', 'size is larger than this deployment accepts.');
  return { filename, contentType, size, sha256: sha256.toLowerCase() };
}
