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
