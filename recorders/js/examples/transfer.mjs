// A transfer client for Node with node-postgres (pg): explicit transactions, recorded
// for indoubt exec, final read included.
//
// It makes N transfers (default 20), each under its own id t-1 .. t-N, each one explicit
// transaction: BEGIN; UPDATE the source; UPDATE the destination; INSERT the transfer
// into a log; COMMIT. It retries every attempt whose connection was lost. Naive, a
// retry transfers again; with --idempotent the transfer is logged first under its id
// (INSERT ... ON CONFLICT DO NOTHING), and a retry that finds it there moves nothing.
// The proxy reads the tags the server answers inside each transaction, so a cut COMMIT
// is proven to have changed rows (UPDATE 1, UPDATE 1, INSERT 0 1) or nothing
// (INSERT 0 0).
//
//   npm install pg
//   indoubt exec --fault commit-cut:0.3 -- node transfer.mjs 20                 # exit 1
//   indoubt exec --fault commit-cut:0.3 -- node transfer.mjs --idempotent 20    # exit 0

import { History } from '../indoubt-history.mjs';
import { applyAll, direct, ids } from './pg-retry.mjs';

const args = process.argv.slice(2);
const idempotent = args.includes('--idempotent');
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 20);

// Directly on the server: no fault may touch the tables being made.
await direct(async (c) => {
  await c.query('DROP TABLE IF EXISTS accounts, transfers');
  await c.query('CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)');
  await c.query('INSERT INTO accounts VALUES (1, 1000), (2, 1000)');
  await c.query(`CREATE TABLE transfers (op_id text NOT NULL${idempotent ? ' PRIMARY KEY' : ''})`);
});

// transfer makes one attempt; it returns true when the transfer was already made (a
// replay). A lost connection rejects it: the caller drops the client.
async function transfer(client, id) {
  await client.query('BEGIN');
  try {
    if (idempotent) {
      const res = await client.query('INSERT INTO transfers (op_id) VALUES ($1) ON CONFLICT (op_id) DO NOTHING', [id]);
      if (res.rowCount === 0) {
        await client.query('COMMIT');
        return true;
      }
    }
    await client.query('UPDATE accounts SET balance = balance - 5 WHERE id = 1');
    await client.query('UPDATE accounts SET balance = balance + 5 WHERE id = 2');
    if (!idempotent) await client.query('INSERT INTO transfers (op_id) VALUES ($1)', [id]);
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
  await client.query('COMMIT');
  return false;
}

const history = new History({ model: 'exactly-once', workload: 'transfers', store: 'postgres' });
await applyAll(history, ids('t', n), transfer);

const rows = await direct((c) => c.query('SELECT op_id, count(*)::int AS n FROM transfers GROUP BY op_id'));
history.finalRead(Object.fromEntries(rows.rows.map((r) => [r.op_id, r.n])));
history.close();
