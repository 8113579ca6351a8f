// What the payments and transfer examples share: connections that survive the proxy's
// cuts, and the loop that applies each operation, retrying every attempt whose
// connection was lost, and records it once with its attempts.

import pg from 'pg';

import { localAddress, values } from '../indoubt-history.mjs';

const MAX_ATTEMPTS = 10;

// connect opens a connection to url.
export async function connect(url) {
  const client = new pg.Client({ connectionString: url });
  // A connection the proxy cuts while idle must not crash the program.
  client.on('error', () => {});
  await client.connect();
  return client;
}

// direct runs fn on a connection to the server itself (INDOUBT_DIRECT_URL), past the
// proxy: for the setup and the final read, which no fault may touch.
export async function direct(fn) {
  const c = await connect(process.env.INDOUBT_DIRECT_URL);
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

// applyAll applies the operations named ids in order, through the proxy
// (DATABASE_URL), each recorded in history as one "apply" under its id. attempt(client,
// id) makes one attempt and returns true when it found the operation already made (the
// retry of an idempotent client: a replay). An error with an SQLSTATE is the server's
// refusal, certainly not made: the operation fails. Any other lost the connection, and
// the operation may or may not have been made: it is tried again on a new connection,
// and left unknown (info) after MAX_ATTEMPTS.
export async function applyAll(history, ids, attempt) {
  let client;
  for (const id of ids) {
    let op;
    for (let i = 1; i <= MAX_ATTEMPTS; i++) {
      let conn;
      try {
        client ??= await connect(process.env.DATABASE_URL);
        conn = localAddress(client.connection.stream);
        op ??= history.invoke('apply', { opId: id, conn });
        if (await attempt(client, id)) op.ok(values.replayed(), { conn });
        else op.ok(undefined, { conn });
        break;
      } catch (e) {
        op ??= history.invoke('apply', { opId: id, conn });
        if (e.code) {
          op.fail(e, { conn });
          break;
        }
        client?.end().catch(() => {});
        client = undefined;
        if (i === MAX_ATTEMPTS) op.info(e, { conn });
        else op.failedAttempt(e, { conn });
      }
    }
  }
  await client?.end();
}

// ids returns prefix-1 .. prefix-n.
export function ids(prefix, n) {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`);
}
