// Bench-only front door for the peer: a tiny HTTP server on 127.0.0.1:$PORT
// that plays API Gateway HTTP API (payload v2) and Lambda in one process.
//
//   POST /uploads        -> handler.mjs, as API Gateway + Lambda would call it
//   GET  /__stats        -> {"dynamodbCalls": N, "s3Calls": N, "requests": M}
//   POST /__stats/reset  -> zero the counters
//
// dynamodbCalls counts every HTTP attempt (retries included) made by the
// DynamoDB client that Powertools uses; s3Calls the same for the S3 client
// (presigning makes none). On start it creates the Powertools table if it is
// missing, then prints `peer listening on http://127.0.0.1:PORT`.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';

const PORT = Number(process.env.PORT ?? 3100);
const FUNCTION_NAME = (process.env.AWS_LAMBDA_FUNCTION_NAME ??= 'onceupload-peer-presign');
const FUNCTION_TIMEOUT_MS = 10_000; // as the presign function in template.yaml
const MAX_REQUEST_BYTES = 1 << 20;

// Imported after AWS_LAMBDA_FUNCTION_NAME is set: Powertools prefixes keys with it.
const { handler, dynamodb, s3 } = await import('./handler.mjs');

const stats = { dynamodbCalls: 0, s3Calls: 0, requests: 0 };

function countAttempts(client, field) {
  // The deserialize step runs inside the retry loop: once per HTTP attempt.
  client.middlewareStack.add(
    (next) => async (args) => {
      stats[field]++;
      return next(args);
    },
    { step: 'deserialize', priority: 'low', name: `benchCount_${field}` },
  );
}
countAttempts(dynamodb, 'dynamodbCalls');
countAttempts(s3, 's3Calls');

await ensureTable(process.env.TABLE_NAME);

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname === '/__stats' && req.method === 'GET') {
      return send(res, 200, { 'Content-Type': 'application/json' }, JSON.stringify(stats));
    }
    if (url.pathname === '/__stats/reset' && req.method === 'POST') {
      stats.dynamodbCalls = stats.s3Calls = stats.requests = 0;
      req.resume();
      return send(res, 204, {}, '');
    }
    const body = await readBody(req);
    if (body === null) {
      return send(res, 413, { 'Content-Type': 'application/json' }, '{"message":"Request Entity Too Large"}');
    }
    if (url.pathname !== '/uploads' || req.method !== 'POST') {
      return send(res, 404, { 'Content-Type': 'application/json' }, '{"message":"Not Found"}');
    }
    stats.requests++;
    const result = await handler(toEvent(req, url, body), lambdaContext());
    const headers = { ...result.headers };
    const payload = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64') : result.body ?? '';
    return send(res, result.statusCode ?? 200, headers, payload);
  } catch (err) {
    process.stderr.write(`peer: ${err?.stack ?? err}\n`);
    return send(res, 500, { 'Content-Type': 'application/json' }, '{"message":"Internal Server Error"}');
  }
});
server.keepAliveTimeout = 60_000;

server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`peer listening on http://127.0.0.1:${PORT}\n`);
});

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

function send(res, status, headers, body) {
  res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.length;
      if (n <= MAX_REQUEST_BYTES) chunks.push(c);
    });
    req.on('end', () => resolve(n > MAX_REQUEST_BYTES ? null : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// toEvent builds what API Gateway HTTP API sends a Lambda (payload 2.0).
function toEvent(req, url, body) {
  const headers = {};
  const cookies = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i].toLowerCase();
    const value = req.rawHeaders[i + 1];
    if (name === 'cookie') cookies.push(...value.split(/;\s*/));
    else headers[name] = name in headers ? `${headers[name]},${value}` : value;
  }
  let text;
  let isBase64Encoded = false;
  try {
    text = utf8.decode(body);
  } catch {
    text = body.toString('base64');
    isBase64Encoded = true;
  }
  const now = new Date();
  const queryStringParameters = url.search ? Object.fromEntries(url.searchParams) : undefined;
  return {
    version: '2.0',
    routeKey: 'POST /uploads',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    ...(cookies.length ? { cookies } : {}),
    headers,
    ...(queryStringParameters ? { queryStringParameters } : {}),
    requestContext: {
      accountId: '000000000000',
      apiId: 'peer',
      authorizer: { jwt: { claims: { sub: 'bench' }, scopes: null } },
      domainName: `127.0.0.1:${PORT}`,
      domainPrefix: '127',
      http: {
        method: req.method,
        path: url.pathname,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: 'POST /uploads',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    body: text,
    isBase64Encoded,
  };
}

function lambdaContext() {
  const deadline = Date.now() + FUNCTION_TIMEOUT_MS;
  const awsRequestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: FUNCTION_NAME,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION ?? 'us-east-1'}:000000000000:function:${FUNCTION_NAME}`,
    memoryLimitInMB: '256',
    awsRequestId,
    logGroupName: `/aws/lambda/${FUNCTION_NAME}`,
    logStreamName: 'peer',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done() {},
    fail() {},
    succeed() {},
  };
}

// ensureTable creates the table Powertools expects (partition key `id`,
// on demand, TTL on `expiration`) when it is missing. It uses its own client
// so that setup is not counted.
async function ensureTable(tableName) {
  const admin = new DynamoDBClient({});
  try {
    await admin.send(new DescribeTableCommand({ TableName: tableName }));
    return;
  } catch (err) {
    if (err.name !== 'ResourceNotFoundException') throw err;
  }
  try {
    await admin.send(new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }));
  } catch (err) {
    if (err.name !== 'ResourceInUseException') throw err;
  }
  await waitUntilTableExists({ client: admin, maxWaitTime: 30, minDelay: 1, maxDelay: 2 }, { TableName: tableName });
  try {
    await admin.send(new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: 'expiration', Enabled: true },
    }));
  } catch {
    // TTL is housekeeping only: Powertools enforces expiry in code.
  }
  admin.destroy();
}
