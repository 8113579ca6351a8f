// Writes one small history per model with indoubt-history.mjs, into the directory
// given: the Go test holds each to the history schema and to indoubt's checker (the
// verdict is in the file's name: MODEL.valid.jsonl, MODEL.invalid.jsonl).

import path from 'node:path';

import { History, values } from '../js/indoubt-history.mjs';

const out = process.argv[2];
const history = (name, opts) => new History({ path: path.join(out, `${name}.jsonl`), ...opts });

let h = history('budget.valid', { model: 'budget', params: { budget: 2 } });
h.invoke('decrement', { conn: '127.0.0.1:1' }).ok(values.decrement(true, 1));
let op = h.invoke('decrement', { conn: '127.0.0.1:1' });
op.failedAttempt('connection lost');
op.ok(values.decrement(true, 0), { conn: '127.0.0.1:2' });
h.invoke('decrement').ok(values.decrement(false, 0));
h.finalRead(values.balance(0));
h.close();

h = history('counter.valid', { model: 'counter', params: { before: 0 } });
const a = h.invoke('increment');
const b = h.invoke('increment');
a.ok(values.increment(1));
b.ok(values.increment(2, 1));
h.invoke('increment').info('timeout');
h.finalRead(values.counter(3));
h.close();

h = history('register.valid', { model: 'register', params: { initial: null } });
h.invoke('read', { key: 'r1' }).ok(null);
h.invoke('write', { value: 1, key: 'r1' }).ok(1);
h.invoke('read', { key: 'r1' }).ok(1);
h.close();

h = history('cas-register.valid', { model: 'cas-register', params: { initial: 0 } });
h.invoke('cas', { value: values.cas(0, 1) }).ok(values.cas(0, 1));
h.invoke('cas', { value: values.cas(0, 5) }).fail('compare failed');
h.invoke('read').ok(1);
h.close();

h = history('exactly-once.valid', { model: 'exactly-once', workload: 'payments' });
op = h.invoke('apply', { opId: 'p-1', conn: '127.0.0.1:1' });
op.failedAttempt(new Error('Connection terminated unexpectedly'));
op.ok(values.replayed(), { conn: '127.0.0.1:2' });
h.invoke('apply', { opId: 'p-2' }).info('connection lost');
h.invoke('apply', { opId: 'p-3' }).fail('duplicate key');
h.finalRead({ 'p-1': 1 });
h.close();

h = history('exactly-once.invalid', { model: 'exactly-once' });
h.invoke('apply', { opId: 'p-1' }).ok();
h.finalRead({ 'p-1': 2 });
h.close();

h = history('bank.valid', { model: 'bank', params: { accounts: { a: 10, b: 0 } } });
h.invoke('transfer', { value: values.transfer('a', 'b', 3) }).ok();
h.invoke('transfer', { value: values.transfer('b', 'a', 1) }).info('conn closed');
h.finalRead({ a: 8, b: 2 });
h.close();

// Transactions: invoked with the reads unknown, completed with what they saw.
for (const [name, firstRead] of [['list-append.valid', []], ['list-append.invalid', [1]]]) {
  h = history(name, { model: 'list-append', params: { consistency_models: ['serializable'] } });
  const t1 = [values.append('x', 1), values.read('y')];
  const a = h.invoke('txn', { value: t1 });
  t1[1] = values.read('y', []);
  a.ok(t1);
  // Valid: a second transaction read y after the first; invalid: it saw 1 in y, which
  // nobody appended to y.
  const t2 = [values.read('y'), values.append('y', 2)];
  const b = h.invoke('txn', { value: t2 });
  t2[0] = values.read('y', firstRead);
  b.ok(t2);
  h.close();
}

h = history('rw-register.valid', { model: 'rw-register' });
{
  let t = [values.write('x', 1), values.read('x')];
  let o = h.invoke('txn', { value: t });
  t[1] = values.read('x', 1);
  o.ok(t);
  t = [values.read('x'), values.write('x', 2)];
  o = h.invoke('txn', { value: t });
  t[0] = values.read('x', 1);
  o.ok(t);
}
h.close();

// A budget with amounts: reservations of 3 and 4 units of a stock of 10, the second
// unknown; the final balance 3 says it took its units. Invalid: a balance no choice
// of the unknown ones gives.
for (const [name, final] of [['budget.valid', 3], ['budget.invalid', 5]]) {
  const h = history('amounts-' + name, { model: 'budget', params: { budget: 10, amounts: true } });
  h.invoke('decrement', { value: values.amount(3) }).ok(values.decrement(true));
  h.invoke('decrement', { value: values.amount(4) }).info('conn closed');
  h.finalRead(values.balance(final));
  h.close();
}

// A bank with a transfer log: t-2 failed, yet the log holds its id (invalid).
for (const [name, log] of [['bank.valid', { 't-1': 1 }], ['bank.invalid', { 't-1': 1, 't-2': 1 }]]) {
  const h = history('log-' + name, { model: 'bank', params: { accounts: { a: 10, b: 0 }, log: true } });
  h.invoke('transfer', { value: values.transfer('a', 'b', 3), opId: 't-1' }).ok();
  h.invoke('transfer', { value: values.transfer('a', 'b', 30), opId: 't-2' }).fail('insufficient funds');
  h.finalRead(values.bankLog({ a: 7, b: 3 }, log));
  h.close();
}

// One reservation held to two models: the stock it takes and the reservation it makes.
// Invalid: the reservation is there twice.
const parts = [
  values.part('stock', 'budget', { budget: 10, amounts: true }, { reserve: 'decrement', read: 'read' }),
  values.part('reservations', 'exactly-once', undefined, { reserve: 'apply', read: 'read' }),
];
for (const [name, count] of [['models.valid', 1], ['models.invalid', 2]]) {
  const h = history(name, { model: 'models', params: { models: parts } });
  h.invoke('reserve', { value: values.amount(3), opId: 'r-1' }).ok(values.decrement(true));
  h.finalRead({ stock: values.balance(7), reservations: { 'r-1': count } });
  h.close();
}

// Several budgets, one per key, each its own total, with amounts. Invalid: sku-2 had 4
// and gave 5.
for (const [name, second] of [['budgets.valid', 3], ['budgets.invalid', 5]]) {
  const h = history(name, { model: 'budgets', params: { budgets: { 'sku-1': 10, 'sku-2': 4 }, amounts: true } });
  h.invoke('decrement', { value: values.amount(6), key: 'sku-1' }).ok(values.decrement(true));
  h.invoke('decrement', { value: values.amount(second), key: 'sku-2' }).ok(values.decrement(true));
  h.finalRead(values.balance(4), 'read', 'sku-1');
  h.finalRead(values.balance(Math.max(0, 4 - second)), 'read', 'sku-2');
  h.close();
}
