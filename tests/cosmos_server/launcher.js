#!/usr/bin/env node
/*
 * Local Cosmos DB wire-protocol server for the test suite.
 *
 *   node launcher.js [--port N] [--no-ssl] [--exit-on-stdin-close]
 *
 * Starts @vercel/cosmosdb-server (pinned to exactly 1.0.1 in package.json: this file reaches into the
 * package's internal modules under lib/) on 127.0.0.1, port N (default 0 = a free port), and prints
 * one line `LISTENING <port>` on stdout once it accepts connections. Data lives in memory only.
 *
 * HTTPS by default (the package's built-in, long-expired self-signed cert): the Python SDK skips
 * certificate checks by itself for https://127.0.0.1 / https://localhost, and the account metadata
 * advertises https endpoints, so `CosmosClient("https://127.0.0.1:<port>", key)` works with no extra
 * arguments. (--no-ssl serves plain HTTP; the SDK then needs enable_endpoint_discovery=False.)
 *
 * What this launcher adds to the stock server, all at request time by wrapping the package's router:
 *   - HTTP keep-alive (the stock server answers `connection: close`: ~28 ms/op; kept alive ~2 ms/op).
 *   1. GET of a missing document (or with the wrong partition key) answers 404, not 500.
 *   2. Transactional batch (`execute_item_batch`): partition key taken from the request header,
 *      Create/Upsert/Replace/Delete/Read/Patch, all-or-nothing with rollback, answered like real
 *      Cosmos DB: 200 when all succeed, else 207 with the failing op's status and 424 for all others.
 *      More than 100 operations is refused with 400, as real Cosmos DB does.
 *   3. Queries sent with a partition key header (query_items(partition_key=...)) run over that
 *      partition's documents only; the WHERE clause need not name the partition key.
 *   4. POST .../colls/<c>/operations/partitionkeydelete (delete_all_items_by_partition_key).
 *
 * Known limits of the package (not fixed here): its SQL parser lacks OFFSET/LIMIT (use TOP),
 * DISTINCT, GROUP BY and JOIN with SELECT *; it does not enforce the 2 MB item size, request units /
 * 429 throttling, session tokens, TTL expiry, or hierarchical partition keys (only the first path
 * identifies an item). Batch ops ignore ifNoneMatch.
 *
 * Set COSMOS_SERVER_LOG=1 to log every request (method, path, status, client port) on stderr.
 */
"use strict";

const path = require("path");

const lib = path.join(path.dirname(require.resolve("@vercel/cosmosdb-server/package.json")), "lib");
const load = name => require(path.join(lib, name));
const { createHttpServer, createHttpsServer } = load("index");
const routes = load("routes");
const pathMatch = load("path-match").default;
const readBody = load("json").default;
const readItems = load("handler/_read-items").default;
const docOps = load("handler/_document-operations");
const { patchOperation } = load("handler/_patch-operations");
const getValue = load("utils/get-value").default;
const getPartitionHeader = load("utils/get-partition-from-header").default;
const isTrueHeader = load("true-header").default;

const NOT_FOUND = { code: "NotFound", message: "Entity with the specified id does not exist in the system." };
const MAX_BATCH_OPERATIONS = 100;

function notFound(res) {
  res.statusCode = 404;
  return { ...NOT_FOUND };
}

function badRequest(res, message) {
  res.statusCode = 400;
  return { code: "BadRequest", message };
}

/**
 * The partition key value named by the x-ms-documentdb-partitionkey header, as { value }, or null
 * when the request names no single partition. The SDK sends `["v"]`; `[{}]` means "no value"
 * (documents without the partition key field), which we match as undefined.
 */
function headerPartition(req) {
  const raw = getPartitionHeader(req);
  if (!raw) return null;
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    return null;
  }
  const value = Array.isArray(parsed) ? parsed[0] : parsed;
  if (value !== null && typeof value === "object") {
    return Object.keys(value).length === 0 ? { value: undefined } : null;
  }
  return { value };
}

/** Partition key value of a document in this collection (first path only, as the package does). */
function partitionOf(collection, doc) {
  return getValue(collection.documents._getPartitionKeyPath(), doc);
}

/** Fix 1: point read answers 404 for a missing document instead of crashing (500). */
function readDocument(account, req, res, { dbId, collId, docId }) {
  const collection = account.database(dbId).collection(collId);
  if (!collection.read()) return notFound(res);
  const partitionKey = getPartitionHeader(req);
  if (!partitionKey) return badRequest(res, "A partition key header is required for a point read.");
  const result = docOps.readOperation(collection, { partitionKey, id: docId });
  res.statusCode = result.statusCode;
  return result.statusCode === 404 ? { ...NOT_FOUND } : result.body;
}

/** Runs one batch operation with the package's own single-document operations. */
function runBatchOperation(collection, partitionKey, pkValue, op) {
  const input = { ...op, partitionKey };
  const body = op.resourceBody;
  const mismatch = { statusCode: 400, body: { code: "BadRequest", message: "PartitionKey mismatch" } };
  switch (op.operationType) {
    case "Create":
      if (body && partitionOf(collection, body) !== pkValue) return mismatch;
      return docOps.createOperation(collection, input);
    case "Upsert":
      if (body && partitionOf(collection, body) !== pkValue) return mismatch;
      return docOps.upsertOperation(collection, input);
    case "Replace":
      if (body && partitionOf(collection, body) !== pkValue) return mismatch;
      if (body && op.id !== undefined && body.id !== op.id) {
        return { statusCode: 400, body: { code: "BadRequest", message: "id mismatch" } };
      }
      return docOps.replaceOperation(collection, input);
    case "Delete":
      return docOps.deleteOperation(collection, input);
    case "Read":
      return docOps.readOperation(collection, input);
    case "Patch":
      return patchOperation(collection, {
        id: op.id,
        partitionKey,
        ifMatch: op.ifMatch,
        operations: (body && body.operations) || [],
        condition: body ? body.condition : undefined
      });
    default:
      return { statusCode: 400, body: { code: "BadRequest", message: `Unsupported operation ${op.operationType}` } };
  }
}

/**
 * Fix 2: transactional batch. Runs synchronously after the body is read, so no other request
 * interleaves; on the first failure the collection's maps are restored from a snapshot.
 */
async function batchDocuments(account, req, res, { dbId, collId }) {
  const ops = await readBody(req);
  const collection = account.database(dbId).collection(collId);
  if (!collection.read()) return notFound(res);
  if (!Array.isArray(ops) || ops.length === 0) return badRequest(res, "Batch request has no operations.");
  if (ops.length > MAX_BATCH_OPERATIONS) {
    return badRequest(res, `Batch request has more operations than what is supported (${MAX_BATCH_OPERATIONS}).`);
  }
  const partitionKey = getPartitionHeader(req);
  const pk = headerPartition(req);
  if (!partitionKey || !pk) return badRequest(res, "A transactional batch needs a partition key header.");

  const docs = collection.documents;
  const snapshot = { data: new Map(docs._data), index: new Map(docs._index), ridCount: docs._ridCount };
  const results = [];
  let failedAt = -1;
  for (let i = 0; i < ops.length; i += 1) {
    let result;
    try {
      result = runBatchOperation(collection, partitionKey, pk.value, ops[i] || {});
    } catch (err) {
      result = { statusCode: 400, body: { code: "BadRequest", message: err.message } };
    }
    if (result.statusCode >= 400) {
      failedAt = i;
      results.push(result);
      break;
    }
    results.push(result);
  }
  if (failedAt < 0) {
    res.statusCode = 200;
    return results.map(r => ({
      statusCode: r.statusCode,
      requestCharge: 1,
      eTag: r.body ? r.body._etag : undefined,
      resourceBody: r.body
    }));
  }
  // Roll back and answer like Cosmos DB: the failing op's status, 424 Failed Dependency for the others.
  docs._data = snapshot.data;
  docs._index = snapshot.index;
  docs._ridCount = snapshot.ridCount;
  res.statusCode = 207;
  return ops.map((_, i) =>
    i === failedAt
      ? { statusCode: results[i].statusCode, requestCharge: 1, resourceBody: results[i].body }
      : { statusCode: 424, requestCharge: 0 }
  );
}

/**
 * Fix 3: a query with a partition key header (and no cross-partition flag) runs over that
 * partition's documents only, by swapping in a filtered map for the (synchronous) query call.
 */
function queryDocuments(original) {
  return async (account, req, res, params) => {
    const pk = headerPartition(req);
    if (!pk || isTrueHeader(req, "x-ms-documentdb-query-enablecrosspartition")) {
      return original(account, req, res, params);
    }
    return readItems(req, res, "Documents", async ({ continuation, maxItemCount }) => {
      const body = await readBody(req);
      if (!body.query) return badRequest(res, "missing query");
      const collection = account.database(params.dbId).collection(params.collId);
      if (!collection.read()) return null; // -> 404
      const docs = collection.documents;
      const all = docs._data;
      docs._data = new Map([...all].filter(([, item]) => partitionOf(collection, item.read()) === pk.value));
      try {
        return docs.query(body, { continuation, maxItemCount });
      } catch (err) {
        if (err.badRequest) return badRequest(res, err.message);
        throw err;
      } finally {
        docs._data = all;
      }
    });
  };
}

/** Fix 4: delete_all_items_by_partition_key (the SDK posts to .../operations/partitionkeydelete). */
function deletePartition(account, req, res, { dbId, collId }) {
  const collection = account.database(dbId).collection(collId);
  if (!collection.read()) return notFound(res);
  const pk = headerPartition(req);
  if (!pk) return badRequest(res, "A partition key header is required.");
  const docs = collection.documents;
  const victims = [...docs._data.values()].map(item => item.read()).filter(d => partitionOf(collection, d) === pk.value);
  victims.forEach(doc => docs.delete(doc._rid, partitionOf(collection, doc)));
  res.statusCode = 200;
  return {};
}

// Replacement handlers keyed by the package's own handler functions.
const replacements = new Map([
  [load("handler/read-document").default, () => readDocument],
  [load("handler/batch-documents").default, () => batchDocuments],
  [load("handler/query-documents").default, queryDocuments]
]);
const wrapped = new Map([...replacements].map(([handler, make]) => [handler, make(handler)]));
const matchPartitionDelete = pathMatch("/dbs/:dbId/colls/:collId/operations/partitionkeydelete");

// index.js looks up `routes.default` on every request, so replacing it here takes effect.
const stockRouter = routes.default;
routes.default = req => {
  if (req.method === "POST") {
    const params = matchPartitionDelete(new URL(req.url, "http://x").pathname.replace(/^\/\//, "/"));
    if (params) return [params, deletePartition];
  }
  const route = stockRouter(req);
  if (!route) return route;
  const [params, handler] = route;
  return [params, wrapped.get(handler) || handler];
};

function main() {
  const args = process.argv.slice(2);
  const flag = name => args.includes(name);
  const portIndex = args.indexOf("--port");
  const port = portIndex >= 0 ? parseInt(args[portIndex + 1], 10) : 0;

  const create = flag("--no-ssl") ? createHttpServer : createHttpsServer;
  // keepAlive: the package then answers `connection: keep-alive` (and Node enables TCP keep-alive).
  const server = create({ keepAlive: true });
  // Never close idle client connections: a pooled Python connection closed by the server between
  // two tests would surface as a connection reset. The process is stopped by its PID anyway.
  server.keepAliveTimeout = 0;

  if (process.env.COSMOS_SERVER_LOG) {
    server.prependListener("request", (req, res) => {
      const client = req.socket.remotePort;
      res.on("finish", () => process.stderr.write(`${req.method} ${req.url} -> ${res.statusCode} (client port ${client})\n`));
    });
  }

  server.listen(port, "127.0.0.1", () => {
    process.stdout.write(`LISTENING ${server.address().port}\n`);
  });
  server.on("error", err => {
    process.stderr.write(`cosmos test server: ${err.message}\n`);
    process.exit(1);
  });

  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // The Python fixture keeps our stdin open; if it dies without stopping us, stdin closes.
  if (flag("--exit-on-stdin-close")) {
    process.stdin.on("end", stop);
    process.stdin.on("close", stop);
    process.stdin.resume();
  }
}

main();
