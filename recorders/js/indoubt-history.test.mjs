// Tests of indoubt-history.mjs under node --test: the lines it writes, the processes
// it hands out, appending to a file that has a header, and concurrent async
// operations. The Go test in recorders/ runs these, and holds what the recorder writes
// to the history schema and to indoubt's own reader and checker.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { History, localAddress, now, values } from './indoubt-history.mjs';

function tmp() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'indoubt-history-'));
  test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'h.jsonl');
}

// lines parses the file, with times kept exact as BigInt.
function lines(p) {
  return fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.trim()).map((l) =>
    JSON.parse(l.replace(/"(time|start|end)":(\d+)/g, '"$1":"$2"'), (k, v) => (['time', 'start', 'end'].includes(k) ? BigInt(v) : v)));
}

test('header then one line per event', () => {
  const p = tmp();
  const h = new History({ path: p, model: 'budget', params: { budget: 2 }, store: 'postgres' });
  const op = h.invoke('decrement', { conn: '127.0.0.1:5000' });
  op.ok(values.decrement(true, 1));
  h.close();
  const [hdr, inv, ok] = lines(p);
  assert.deepEqual(hdr, { header: { format: 'indoubt-history/1', workload: 'budget', model: 'budget', seed: 0, store: 'postgres', params: { budget: 2 } } });
  assert.deepEqual([inv.index, inv.type, inv.f, inv.process, inv.conn], [0, 'invoke', 'decrement', 0, '127.0.0.1:5000']);
  assert.deepEqual([ok.index, ok.type, ok.op_id, ok.attempt], [1, 'ok', inv.op_id, 1]);
  assert.deepEqual(ok.value, { applied: true, balance: 1 });
  assert.equal(ok.failed_attempts, undefined);
  assert.ok(inv.time > 10n ** 18n && ok.time >= inv.time, 'Unix nanoseconds, in order');
});

// The clocks agree (the recorder's is anchored on Date.now when the module loads); the
// margin is for a loaded machine, not a measure of speed.
test('now is Unix nanoseconds, agreeing with Date.now', () => {
  const a = BigInt(Date.now() - 50) * 1000000n;
  const t = now();
  const b = BigInt(Date.now() + 50) * 1000000n;
  assert.ok(a <= t && t <= b, `${a} <= ${t} <= ${b}`);
});

test('a new file needs a model; a header written by exec names it', () => {
  const p = tmp();
  assert.throws(() => new History({ path: p }), /no header/);
  fs.writeFileSync(p, '{"header":{"format":"indoubt-history/1","workload":"payments","model":"exactly-once","seed":7}}\n');
  const saved = process.env.INDOUBT_HISTORY;
  process.env.INDOUBT_HISTORY = p;
  try {
    const h = new History();
    h.invoke('apply', { opId: 'p-1' }).ok();
    h.close();
  } finally {
    if (saved === undefined) delete process.env.INDOUBT_HISTORY;
    else process.env.INDOUBT_HISTORY = saved;
  }
  assert.equal(lines(p).length, 3);
  assert.throws(() => new History({ path: p, model: 'budget' }), /model/);
  assert.throws(() => new History({ path: p, params: { budget: 1 } }), /params/);
});

test('appending goes on with indexes and fresh processes', () => {
  const p = tmp();
  let h = new History({ path: p, model: 'exactly-once' });
  h.invoke('apply', { opId: 'a' }); // left open: a crash
  h.close();
  h = new History({ path: p });
  h.invoke('apply', { opId: 'b' }).ok();
  h.close();
  const got = lines(p).slice(1);
  assert.deepEqual(got.map((e) => e.index), [0, 1, 2]);
  assert.equal(got[1].process, 1, "an open operation's process must not be reused");
});

test('processes pooled, retired after info; null is a value', () => {
  const h = new History({ path: tmp(), model: 'register' });
  const a = h.invoke('write', { value: 1 });
  const b = h.invoke('write', { value: 2 });
  assert.deepEqual([a.process, b.process], [0, 1]);
  a.ok(1);
  const c = h.invoke('read');
  assert.equal(c.process, 0);
  b.info('conn closed');
  c.ok(null);
  const d = h.invoke('read');
  const e = h.invoke('read');
  assert.deepEqual([d.process, e.process], [0, 2], 'after info the process never invokes again');
  d.ok(1);
  e.ok(1);
  assert.throws(() => e.ok(1), /already completed/);
  h.close();
  const got = lines(h.path);
  assert.ok('value' in got[6] && got[6].value === null, 'a read of an absent register keeps its null');
  assert.ok(!('value' in got[5]), 'an info carries no value');
});

test('failed attempts and the last attempt', () => {
  const p = tmp();
  const h = new History({ path: p, model: 'exactly-once' });
  const op = h.invoke('apply', { opId: 'p-1', conn: '127.0.0.1:1' });
  op.failedAttempt(new Error('Connection terminated unexpectedly'));
  op.failedAttempt('could not serialize access', { conn: '127.0.0.1:2', cls: 'conflict' });
  op.ok(values.replayed(), { conn: '127.0.0.1:3' });
  const lost = h.invoke('apply', { opId: 'p-2', conn: '127.0.0.1:3' });
  lost.info('timeout', { conn: '127.0.0.1:4' });
  h.invoke('apply', { opId: 'p-3' }).fail('duplicate key value violates unique constraint');
  h.finalRead({ 'p-1': 1 });
  assert.throws(() => h.invoke('apply').failedAttempt('e', { cls: 'maybe' }), /cls/);
  h.close();
  const got = lines(p);
  const ok = got[2];
  assert.equal(ok.attempt, 3);
  assert.deepEqual(ok.failed_attempts.map((a) => [a.conn, a.class, a.error]),
    [['127.0.0.1:1', 'unknown', 'Connection terminated unexpectedly'], ['127.0.0.1:2', 'conflict', 'could not serialize access']]);
  const [f0, f1] = ok.failed_attempts;
  assert.ok(f0.start === got[1].time && f0.end <= f1.start && f1.end <= ok.time);
  assert.deepEqual([got[4].type, got[4].attempt, got[4].failed_attempts[0].conn], ['info', 1, '127.0.0.1:4']);
  assert.deepEqual([got[6].type, got[6].failed_attempts[0].class], ['fail', 'definite']);
  const [finv, fok] = [got[7], got[8]];
  assert.equal(finv.op_id, 'final');
  assert.ok(!got.slice(1, 7).some((e) => e.process === finv.process), 'the final read has a process of its own');
  assert.deepEqual(fok.value, { 'p-1': 1 });
});

test('concurrent async operations never share a process', async () => {
  const p = tmp();
  const h = new History({ path: p, model: 'counter' });
  const worker = async () => {
    for (let i = 0; i < 100; i++) {
      const op = h.invoke('increment');
      await new Promise((r) => setImmediate(r));
      op.ok(values.increment(1));
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  h.close();
  const got = lines(p).slice(1);
  assert.deepEqual(got.map((e) => e.index), [...Array(1600).keys()]);
  const open = new Map();
  for (const e of got) {
    if (e.type === 'invoke') {
      assert.ok(!open.has(e.process), 'two operations open on one process');
      open.set(e.process, e.op_id);
    } else {
      assert.equal(open.get(e.process), e.op_id);
      open.delete(e.process);
    }
  }
  for (let i = 1; i < got.length; i++) assert.ok(got[i].time >= got[i - 1].time);
});

test('localAddress of a socket', async () => {
  const srv = net.createServer((s) => s.end());
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const c = net.connect(srv.address().port, '127.0.0.1');
  await new Promise((r) => c.on('connect', r));
  assert.equal(localAddress(c), `127.0.0.1:${c.localPort}`);
  c.destroy();
  srv.close();
  assert.equal(localAddress(undefined), undefined);
  assert.equal(localAddress({ localAddress: '::1', localPort: 5 }), '[::1]:5');
  assert.equal(localAddress({ localAddress: '::ffff:127.0.0.1', localPort: 5 }), '127.0.0.1:5');
});

// BigInts are written as JSON integers, and no string of the user's can pass for one or
// break the line; values JSON cannot hold are refused at the call, leaving nothing.
test('BigInts written as integers; NaN and Infinity refused', () => {
  const p = tmp();
  const h = new History({ path: p, model: 'register' });
  const tricky = ['"\u00001\u0000', '\u00002\u0000', 'a\\u0000', { toJSON: () => 'x' }];
  h.invoke('write', { value: { n: 12345678901234567890n, tricky, gone: undefined, list: [undefined, 1n] } }).ok();
  for (const bad of [NaN, Infinity, [1, -Infinity], { x: NaN }]) {
    assert.throws(() => h.invoke('write', { value: bad }), /has no JSON form/);
  }
  const op = h.invoke('read');
  assert.throws(() => op.ok(NaN), /ok of operation .*has no JSON form/);
  op.ok(3);
  h.close();
  const text = fs.readFileSync(p, 'utf8');
  const events = text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)); // every line is JSON
  assert.match(text, /"n":12345678901234567890[,}]/);
  assert.deepEqual(events[1].value.tricky, ['"\u00001\u0000', '\u00002\u0000', 'a\\u0000', 'x']);
  assert.deepEqual(events[1].value.list, [null, 1]);
  assert.equal('gone' in events[1].value, false);
  assert.deepEqual(events.slice(1).map((e) => e.type), ['invoke', 'ok', 'invoke', 'ok']);
});

test('amount is an integer of 1 or more; parts and the bank log', () => {
  assert.deepEqual(values.amount(3), { amount: 3 });
  for (const bad of [0, -1, 2.5, NaN, Infinity, '3', null, undefined]) {
    assert.throws(() => values.amount(bad), RangeError);
  }
  assert.deepEqual(values.part('stock', 'budget', { budget: 10 }, { reserve: 'decrement' }),
    { name: 'stock', model: 'budget', params: { budget: 10 }, functions: { reserve: 'decrement' } });
  assert.deepEqual(values.part('r', 'exactly-once'), { name: 'r', model: 'exactly-once' });
  assert.deepEqual(values.bankLog({ a: 1 }, { t: 1 }), { balances: { a: 1 }, log: { t: 1 } });
});
