// A payments client for Node with node-postgres (pg), recording its history for
// indoubt exec, final read included.
//
// It applies N payments (default 20), each under its own id p-1 .. p-N, retrying every
// attempt whose connection was lost. Naive, a retry inserts the payment again; with
// --idempotent the payment id goes into an idempotency-key table in the same statement,
// and a retry that finds it changes nothing. At the end it reads how many times each
// payment is present, on the server directly (INDOUBT_DIRECT_URL), and records that as
// the final read.
//
//   npm install pg
//   indoubt exec --fault commit-cut:0.3 -- node payments.mjs 20                 # exit 1
//   indoubt exec --fault commit-cut:0.3 -- node payments.mjs --idempotent 20    # exit 0

import pg from 'pg';

import { History, localAddress, values } from '../indoubt-history.mjs';

const NAIVE = 'INSERT INTO payments (tag, amount) VALUES ($1, 1)';
const IDEMPOTENT = 'WITH k AS (INSERT INTO payment_keys (key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING key) ' +
  'INSERT INTO payments (tag, amount) SELECT key, 1 FROM k';
const MAX_ATTEMPTS = 10;

async function connect(url) {
  const client = new pg.Client({ connectionString: url });
  // A connection the proxy cuts while idle must not crash the program.
  client.on('error', () => {});
  await client.connect();
  return client;
}

async function direct(fn) {
  const c = await connect(process.env.INDOUBT_DIRECT_URL);
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const args = process.argv.slice(2);
const idempotent = args.includes('--idempotent');
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 20);
const sql = idempotent ? IDEMPOTENT : NAIVE;

// Directly on the server: no fault may touch the tables being made.
await direct(async (c) => {
  await c.query('CREATE TABLE IF NOT EXISTS payments (tag text NOT NULL, amount int NOT NULL)');
  await c.query('CREATE TABLE IF NOT EXISTS payment_keys (key text PRIMARY KEY)');
  await c.query('TRUNCATE payments, payment_keys');
});

const history = new History({ model: 'exactly-once', workload: 'payments', store: 'postgres' });
let client;
for (let i = 1; i <= n; i++) {
  const id = `p-${i}`;
  let op;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    let conn;
    try {
      client ??= await connect(process.env.DATABASE_URL);
      conn = localAddress(client.connection.stream);
      op ??= history.invoke('apply', { opId: id, conn });
      const res = await client.query(sql, [id]);
      if (res.rowCount === 0) op.ok(values.replayed(), { conn }); // the retry found its key
      else op.ok(undefined, { conn });
      break;
    } catch (e) {
      op ??= history.invoke('apply', { opId: id, conn });
      if (e.code) {
        // An SQLSTATE: the server refused it, certainly not made.
        op.fail(e, { conn });
        break;
      }
      // The connection was lost: the payment may or may not have been made.
      client?.end().catch(() => {});
      client = undefined;
      if (attempt === MAX_ATTEMPTS) op.info(e, { conn });
      else op.failedAttempt(e, { conn });
    }
  }
}
await client?.end();

const rows = await direct((c) => c.query('SELECT tag, count(*)::int AS n FROM payments GROUP BY tag'));
history.finalRead(Object.fromEntries(rows.rows.map((r) => [r.tag, r.n])));
history.close();
