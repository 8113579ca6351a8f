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

import { History } from '../indoubt-history.mjs';
import { applyAll, direct, ids } from './pg-retry.mjs';

const NAIVE = 'INSERT INTO payments (tag, amount) VALUES ($1, 1)';
const IDEMPOTENT = 'WITH k AS (INSERT INTO payment_keys (key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING key) ' +
  'INSERT INTO payments (tag, amount) SELECT key, 1 FROM k';

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
// A payment whose key is there already inserts no row: the retry found its key.
await applyAll(history, ids('p', n), async (client, id) => (await client.query(sql, [id])).rowCount === 0);

const rows = await direct((c) => c.query('SELECT tag, count(*)::int AS n FROM payments GROUP BY tag'));
history.finalRead(Object.fromEntries(rows.rows.map((r) => [r.tag, r.n])));
history.close();
