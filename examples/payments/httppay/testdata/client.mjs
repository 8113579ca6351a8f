// A payments client for Node (its http module only), recording its history for indoubt
// exec: it POSTs N payments to $INDOUBT_BASE_URL/payments, each with the
// Idempotency-Key p-<i>, and retries every attempt whose connection was lost, with the
// same key and body. Whether a retry pays twice is up to the service.
//
//   indoubt exec --store http --upstream 127.0.0.1:8080 --fault response-cut:0.3 \
//       --model exactly-once --final-cmd 'curl -s http://127.0.0.1:8080/paid' \
//       -- node client.mjs 20

import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const { History, localAddress } = await import(pathToFileURL(path.join(process.env.INDOUBT_RECORDERS, 'indoubt-history.mjs')));

const MAX_ATTEMPTS = 10;
const base = new URL(process.env.INDOUBT_BASE_URL);

// post sends one attempt on a connection of its own and resolves with the status, the
// body, whether it was a replay and the connection's local address; it rejects with
// the error and that address when the connection is lost.
function post(key, body) {
  return new Promise((resolve, reject) => {
    let conn;
    const req = http.request({
      host: base.hostname, port: base.port, path: '/payments', method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(), replayed: res.headers['idempotent-replayed'] === 'true', conn }));
      res.on('error', (err) => reject(Object.assign(err, { conn })));
    });
    req.on('socket', (s) => s.on('connect', () => { conn = localAddress(s); }));
    req.on('error', (err) => reject(Object.assign(err, { conn })));
    req.end(body);
  });
}

const n = Number(process.argv[2] ?? 20);
const history = new History({ model: 'exactly-once' });
for (let i = 1; i <= n; i++) {
  const key = `p-${i}`;
  const body = JSON.stringify({ amount: 5 });
  let op;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    // Invoked before the first attempt is sent; each attempt names its connection
    // when it ends (ok, fail, or a failed attempt).
    op ??= history.invoke('apply', { opId: key });
    try {
      const r = await post(key, body);
      if (r.status === 201) {
        op.ok({ payment: JSON.parse(r.body).id, replayed: r.replayed }, { conn: r.conn });
        break;
      }
      if (r.status < 500) {
        op.fail(`${r.status} ${r.body}`, { conn: r.conn });
        break;
      }
      throw Object.assign(new Error(`${r.status} from the service`), { conn: r.conn });
    } catch (err) {
      // The connection was lost, or the service failed: the payment may or may not
      // have been made.
      if (attempt === MAX_ATTEMPTS) {
        op.info(err, { conn: err.conn });
      } else {
        op.failedAttempt(err, { conn: err.conn });
      }
    }
  }
}
history.close();
