// Your own transactions checked for isolation, in Node with node-postgres (pg): the
// list-append model.
//
// Five clients, each its own connection, run N transactions each (default 20) at the
// isolation level given (--isolation read-committed, the default, or serializable):
// every transaction 2 to 4 micro-ops over 3 keys, an append being an upsert that
// extends the key's array, a read a SELECT of it. Each is recorded as a "txn"
// operation, invoked with its micro-ops and completed with what its reads saw;
// indoubt's checker then looks for the cycles of dependencies serializability forbids,
// as Jepsen's Elle does. A serialization failure or a deadlock (SQLSTATE 40001,
// 40P01) is retried and recorded as a failed attempt of class conflict.
//
//   npm install pg
//   indoubt exec -- node list-append.mjs                            # exit 1: anomalies named
//   indoubt exec -- node list-append.mjs --isolation serializable   # exit 0

import pg from 'pg';

import { History, localAddress, values } from '../indoubt-history.mjs';

const CLIENTS = 5;
const LEVELS = { 'read-committed': 'READ COMMITTED', serializable: 'SERIALIZABLE' };

const args = process.argv.slice(2);
const level = LEVELS[args.includes('--isolation') ? args[args.indexOf('--isolation') + 1] : 'read-committed'];
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 20);

async function connect(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

// Directly on the server: no fault may touch the table being made.
const setup = await connect(process.env.INDOUBT_DIRECT_URL);
await setup.query('DROP TABLE IF EXISTS lists');
await setup.query('CREATE TABLE lists (k text PRIMARY KEY, vals bigint[] NOT NULL)');
await setup.end();

const history = new History({ model: 'list-append', store: 'postgres', params: { consistency_models: ['serializable'] } });
let counter = 0;

// run runs tx's micro-ops in one transaction, filling in what its reads saw.
async function run(client, tx) {
  await client.query(`BEGIN ISOLATION LEVEL ${level}`);
  try {
    for (const [i, [f, key, v]] of tx.entries()) {
      if (f === 'append') {
        await client.query('INSERT INTO lists (k, vals) VALUES ($1, ARRAY[$2::bigint]) ' +
          'ON CONFLICT (k) DO UPDATE SET vals = lists.vals || $2::bigint', [key, v]);
      } else {
        const res = await client.query('SELECT vals FROM lists WHERE k = $1', [key]);
        tx[i] = values.read(key, res.rows.length ? res.rows[0].vals.map(Number) : []);
      }
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

async function worker(seed) {
  // A small seeded generator, so that each client's transactions are the same run after run.
  let s = seed + 1;
  const rand = (m) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return Math.floor((s / 2147483648) * m); // the high bits: an LCG's low bits cycle
  };
  const client = await connect(process.env.DATABASE_URL);
  const conn = localAddress(client.connection.stream);
  for (let t = 0; t < n; t++) {
    const tx = [];
    for (let j = 2 + rand(3); j > 0; j--) {
      const key = `k${rand(3)}`;
      tx.push(rand(2) === 0 ? values.append(key, ++counter) : values.read(key));
    }
    const op = history.invoke('txn', { value: tx.map((m) => [...m]), conn });
    for (let attempt = 0; ; attempt++) {
      try {
        await run(client, tx);
        op.ok(tx, { conn });
        break;
      } catch (e) {
        // A serialization failure or a deadlock aborted the transaction: retry it.
        if ((e.code !== '40001' && e.code !== '40P01') || attempt === 9) {
          op.fail(e, { conn });
          break;
        }
        op.failedAttempt(e, { conn, cls: 'conflict' });
      }
    }
  }
  await client.end();
}

await Promise.all(Array.from({ length: CLIENTS }, (_, i) => worker(i)));
history.close();
