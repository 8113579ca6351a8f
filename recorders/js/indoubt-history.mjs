// indoubt-history.mjs: record what a program asked its database and what it was told,
// as an indoubt history. One file, no dependencies, Node 18 or later (ESM; types in
// indoubt-history.d.ts): copy it next to your program. The format is
// docs/history-format.md in the indoubt repository; `indoubt exec` runs your program
// with INDOUBT_HISTORY set to the file to append to.
//
//   import { History, localAddress, values } from './indoubt-history.mjs';
//
//   const history = new History({ model: 'exactly-once', workload: 'payments' });
//   const op = history.invoke('apply', { opId: 'p-1', conn: localAddress(client.connection.stream) });
//   try {
//     await client.query('INSERT INTO payments (tag) VALUES ($1)', ['p-1']);
//     op.ok();
//   } catch (e) {
//     if (e.code) op.fail(e.message);   // the server refused it (an SQLSTATE)
//     else op.info(e.message);          // the connection was lost: outcome unknown
//   }
//
// Every operation is an invocation (history.invoke) and then one completion: ok (it
// took effect), fail (it certainly did not) or info (the outcome is not known).
// Attempts that failed before a retry are recorded with op.failedAttempt; the last
// attempt of an operation that ends in fail or info is recorded by fail() and info().
//
// Processes are handed out for you: an operation takes the lowest process that has no
// operation open, gives it back when it completes ok or fail, and retires it after
// info (a process whose operation ended unknown never invokes again), so concurrent
// async operations never share one. Every method is synchronous (fs.writeSync of one
// whole line to a file opened for appending): lines never interleave, and a crash
// loses at most the line being written. One History per file: worker threads and
// other processes must not append to the same file; send their events to one.

import fs from 'node:fs';

export const FORMAT = 'indoubt-history/1';

// The wall clock at a known reading of the monotonic one, since the proxy's events are
// joined to the history by time. Date.now() ticks to the next millisecond at a moment
// between two of its readings, and the monotonic clock read before the first and after
// the second bounds that moment. A tick whose bounds are wide (the process was
// descheduled between the readings, as on a loaded machine) could put every time of the
// history a millisecond or more early, so such ticks are passed over: the narrowest of
// up to 50 is kept, and the first under 20 microseconds ends the search.
const anchor = (() => {
  let best;
  let width = -1n;
  for (let ticks = 0; ticks < 50 && (width < 0n || width > 20000n); ticks++) {
    let a = process.hrtime.bigint();
    const first = Date.now();
    let ms = first;
    let prev = a;
    let b = a;
    while (ms === first) {
      prev = a;
      a = process.hrtime.bigint();
      ms = Date.now();
      b = process.hrtime.bigint();
    }
    const w = b - prev;
    if (width < 0n || w < width) {
      width = w;
      best = BigInt(ms) * 1000000n - (prev + b) / 2n;
    }
  }
  return best;
})();

/** The time as indoubt histories record it: Unix nanoseconds, as a BigInt. */
export function now() {
  return anchor + process.hrtime.bigint();
}

/**
 * A connection's local address as "host:port" (what the proxy sees), or undefined.
 * socket is a net.Socket (node-postgres: client.connection.stream); conn is optional
 * in a history.
 */
export function localAddress(socket) {
  if (!socket || socket.localAddress === undefined || socket.localPort === undefined) return undefined;
  let host = socket.localAddress;
  if (host.startsWith('::ffff:') && host.includes('.')) host = host.slice(7);
  return host.includes(':') ? `[${host}]:${socket.localPort}` : `${host}:${socket.localPort}`;
}

/** The values of each model's operations (docs/history-format.md). */
export const values = {
  /** budget: an ok decrement; applied false means rejected (nothing was left). */
  decrement: (applied, balance) => (balance === undefined ? { applied: !!applied } : { applied: !!applied, balance }),
  /** budget: an ok read of the balance. */
  balance: (n) => ({ balance: n }),
  /**
   * budget: the argument of a decrement that takes n units (n >= 1); a decrement
   * invoked with no value takes 1. A history with amounts declares them in its header:
   * params { budget: B, amounts: true }.
   */
  amount: (n) => {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`values.amount: ${n} is not an integer of 1 or more`);
    return { amount: n };
  },
  /**
   * bank with a transfer log (params { accounts, log: true }): an ok read of every
   * balance and of the log, each transfer's op id with how many times it was logged.
   */
  bankLog: (balances, log) => ({ balances, log }),
  /**
   * models: one part of a history held to several models at once, for the header's
   * params { models: [values.part(...), ...] }. functions maps the program's function
   * names to the model's ({ reserve: 'apply' }); a value that is an object keyed by
   * part names gives each part its member.
   */
  part: (name, model, params, functions) => {
    const p = { name: String(name), model: String(model) };
    if (params !== undefined) p.params = params;
    if (functions !== undefined) p.functions = functions;
    return p;
  },
  /** counter: an ok increment, the value it wrote (and read first, if it did). */
  increment: (wrote, read) => (read === undefined ? { wrote } : { read, wrote }),
  /** counter: an ok read of the counter's value. */
  counter: (n) => ({ value: n }),
  /** register (cas-register model): a cas's argument, and its ok value. */
  cas: (from, to) => [from, to],
  /** bank: a transfer's argument. */
  transfer: (from, to, amount) => ({ from: String(from), to: String(to), amount }),
  /** exactly-once: an ok apply whose retry found its effect already there. */
  replayed: () => ({ replayed: true }),
  // list-append and rw-register: a transaction is the array of its micro-ops, in the
  // order the program runs them, recorded as the value of a "txn" operation: invoked
  // with its reads not yet known (null), completed ok with each read filled in
  // (tx[i] = values.read(key, seen)). Every value appended or written to a key must be
  // unique.
  /** list-append: append value to the list at key. */
  append: (key, value) => ['append', key, value],
  /** rw-register: write value to the register at key. */
  write: (key, value) => ['w', key, value],
  /**
   * list-append, rw-register: read key; seen is what it saw once run (the whole list,
   * [] for a list never appended to; a register's value, null if never written).
   */
  read: (key, seen = null) => ['r', key, seen],
};

const CLASSES = new Set(['unknown', 'definite', 'conflict']);

// JSON with BigInts (the times) written as JSON integers. It walks the value itself
// rather than marking BigInts inside strings, which a string of the user's could
// imitate; it follows JSON.stringify otherwise (toJSON, properties that are undefined
// left out, undefined in an array written as null).
function encode(v) {
  const s = encodeValue(v, '');
  return s === undefined ? 'nothing' : s;
}

function encodeValue(x, key) {
  if (x !== null && typeof x === 'object' && typeof x.toJSON === 'function') x = x.toJSON(key);
  switch (typeof x) {
    case 'bigint':
      return x.toString();
    case 'number':
      if (!Number.isFinite(x)) throw new Error(`${x} has no JSON form`);
      return JSON.stringify(x);
    case 'object':
      if (x === null) return 'null';
      if (Array.isArray(x)) return `[${x.map((e, i) => encodeValue(e, String(i)) ?? 'null').join(',')}]`;
      return `{${Object.keys(x).flatMap((k) => {
        const e = encodeValue(x[k], k);
        return e === undefined ? [] : [`${JSON.stringify(k)}:${e}`];
      }).join(',')}}`;
    default:
      return JSON.stringify(x); // a string or boolean; undefined, a function or a symbol: undefined
  }
}

// checkValue refuses at the call a value JSON cannot hold: NaN and infinities (which
// JSON.stringify would quietly write as null), and what encode cannot walk (a cycle).
function checkValue(value, what) {
  if (value === undefined) return;
  try {
    encode(value);
  } catch (e) {
    throw new Error(`${what}: the value has no JSON form (${e.message}): record a number, or a string such as "NaN"`);
  }
}

function deepEqual(a, b) {
  return encode(sortKeys(a)) === encode(sortKeys(b));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

/**
 * An indoubt history file, open for appending. path defaults to
 * process.env.INDOUBT_HISTORY. A new or empty file gets the header: model (required
 * then), workload (default: the model), store, seed and params (what the model's
 * checker needs, e.g. { budget: 100 }). A file that already holds a header (written
 * by `indoubt exec --model`, or an earlier History) is appended to; a model or params
 * given here must agree with it, or an Error is thrown.
 */
export class History {
  constructor({ path, model, workload, store, seed = 0, params } = {}) {
    path = path || process.env.INDOUBT_HISTORY;
    if (!path) throw new Error('no history file: give path, or run under indoubt exec (INDOUBT_HISTORY)');
    this.path = path;
    this._index = 0;
    this._nextProcess = 0;
    this._free = [];
    this._seq = 0;
    this._fd = fs.openSync(path, 'a', 0o644);
    try {
      const header = this._scan();
      if (header === undefined && this._index === 0) {
        if (!model) {
          throw new Error(`${path} has no header: give model (one of budget, counter, register, cas-register, exactly-once, bank)`);
        }
        const h = { format: FORMAT, workload: workload || model, model, seed };
        if (store) h.store = store;
        if (params) h.params = params;
        this._write({ header: h });
      } else if (header !== undefined) {
        if (model && header.model !== model) throw new Error(`${path} says model ${JSON.stringify(header.model)}, not ${JSON.stringify(model)}`);
        if (params && !deepEqual(header.params, params)) throw new Error(`${path} says params ${encode(header.params)}, not ${encode(params)}`);
      }
    } catch (e) {
      fs.closeSync(this._fd);
      throw e;
    }
  }

  // _scan reads what the file holds: its header, and where indexes and processes go on.
  _scan() {
    let header;
    const text = fs.readFileSync(this.path, 'utf8');
    text.split('\n').forEach((line, n) => {
      if (!line.trim()) return;
      let e;
      try {
        e = JSON.parse(line);
      } catch {
        throw new Error(`${this.path} line ${n + 1} is not JSON: not a history to append to`);
      }
      if (n === 0 && e.header) {
        header = e.header;
        return;
      }
      this._index = Math.max(this._index, (e.index ?? -1) + 1);
      this._nextProcess = Math.max(this._nextProcess, (e.process ?? -1) + 1);
    });
    return header;
  }

  _write(v) {
    if (this._fd < 0) throw new Error(`${this.path}: the history is closed`);
    fs.writeSync(this._fd, encode(v) + '\n');
  }

  // _event writes one event with its index and time, and returns the time.
  _event(process, type, f, fields) {
    const t = now();
    const e = { index: this._index, time: t, process, type, f };
    // null is a value (a register read as absent); other fields it leaves out.
    for (const [k, v] of Object.entries(fields)) if (v !== undefined && (v !== null || k === 'value')) e[k] = v;
    this._write(e);
    this._index++;
    return t;
  }

  /** The time on the history's clock: Unix nanoseconds (BigInt). */
  now() {
    return now();
  }

  /**
   * Record that operation f is about to be sent, and return it as an Operation.
   * value: what it asks; opId: names the logical operation across its retries
   * (exactly-once: the effect's identity; default "PROCESS-N"); conn: the local
   * address of the connection its first attempt uses (localAddress); key: an
   * independent register.
   */
  invoke(f, { value, opId, conn, key, fresh = false } = {}) {
    checkValue(value, `invoke of ${f}`);
    let process;
    if (this._free.length && !fresh) {
      process = Math.min(...this._free);
      this._free.splice(this._free.indexOf(process), 1);
    } else {
      process = this._nextProcess++;
    }
    if (opId === undefined) opId = `${process}-${this._seq}`;
    this._seq++;
    const t = this._event(process, 'invoke', f, { key, value, op_id: opId, conn });
    return new Operation(this, process, f, opId, key, conn, t);
  }

  /**
   * Record the final state as an ok read by a process of its own, after every other
   * operation: the exactly-once state { opId: count }, the bank's balances,
   * values.balance(n) or values.counter(n). key names the object read, for a model of
   * several (budgets: one final read per account).
   */
  finalRead(value, f = 'read', key = undefined) {
    this.invoke(f, { opId: key === undefined ? 'final' : `final-${key}`, key, fresh: true }).ok(value);
  }

  /** Close the file. Operations still open stay open: the checker counts them unknown. */
  close() {
    if (this._fd >= 0) {
      fs.closeSync(this._fd);
      this._fd = -1;
    }
  }
}

/** One operation between its invocation and its completion. */
export class Operation {
  constructor(history, process, f, opId, key, conn, invoked) {
    this._h = history;
    this.process = process;
    this.f = f;
    this.opId = opId;
    this.key = key;
    this.conn = conn;
    this._attemptStart = invoked;
    this._failed = [];
    this._done = false;
    this._lastError = undefined;
    this._hasLast = false;
  }

  /**
   * Record an attempt that ended in error and will be retried. conn: the attempt's
   * connection (default: the operation's last one); start, end: its times (default:
   * from the end of the previous attempt, or the invocation, to now); cls: "unknown"
   * (the request may have applied: a lost connection, a timeout), "definite" (it did
   * not) or "conflict" (it did not; a retry is reasonable).
   */
  failedAttempt(error, { conn, start, end, cls = 'unknown' } = {}) {
    if (!CLASSES.has(cls)) throw new Error(`cls must be unknown, definite or conflict, not ${JSON.stringify(cls)}`);
    end = end ?? now();
    const a = { start: start ?? this._attemptStart, end, error: String(error?.message ?? error), class: cls };
    conn = conn || this.conn;
    if (conn) {
      a.conn = conn;
      this.conn = conn;
    }
    this._failed.push(a);
    this._attemptStart = end;
    this._lastError = error;
    this._hasLast = true;
  }

  // _lastAttempt: error is the one the last failed attempt recorded, on the same
  // connection: the code gives up with the error it just reported, and that attempt is
  // already recorded (recording it again would add an attempt that never ran).
  _lastAttempt(error, conn) {
    return this._hasLast && error === this._lastError && (!conn || conn === this._failed[this._failed.length - 1].conn);
  }

  /**
   * Record that the operation took effect, with what it answered (value). A value JSON
   * cannot hold (NaN, an infinity, a cycle) throws, and nothing is recorded.
   */
  ok(value, { conn } = {}) {
    checkValue(value, `ok of operation ${this.opId}`);
    this._complete('ok', value, undefined, conn, this._failed.length + 1);
  }

  /**
   * Record that the last attempt certainly did not take effect (the server refused it);
   * it is recorded as a failed attempt of class definite. The operation's outcome is the
   * worst of its attempts: after an attempt whose outcome was unknown (a lost
   * connection), that one may have applied, so the operation is recorded as info, not
   * fail. Pass { noneApplied: true } when the code knows that no attempt applied (it
   * read its idempotency record and found none). Giving the error object just passed to
   * failedAttempt adds no attempt.
   */
  fail(error, { conn, noneApplied = false } = {}) {
    if (!this._lastAttempt(error, conn)) this.failedAttempt(error, { conn, cls: 'definite' });
    const type = !noneApplied && this._failed.some((a) => a.class === 'unknown') ? 'info' : 'fail';
    this._complete(type, undefined, error, conn, this._failed.length);
  }

  /**
   * Record that the outcome is not known; the last attempt is recorded as unknown
   * (unless error is the object just passed to failedAttempt) and the process retired.
   */
  info(error, { conn } = {}) {
    if (!this._lastAttempt(error, conn)) this.failedAttempt(error, { conn, cls: 'unknown' });
    this._complete('info', undefined, error, conn, this._failed.length);
  }

  _complete(type, value, error, conn, attempts) {
    if (this._done) throw new Error(`operation ${this.opId} already completed`);
    this._done = true;
    const h = this._h;
    h._event(this.process, type, this.f, {
      key: this.key, value, op_id: this.opId, conn: conn || this.conn,
      error: error === undefined ? undefined : String(error?.message ?? error),
      attempt: attempts, failed_attempts: this._failed.length ? this._failed : undefined,
    });
    if (type !== 'info') h._free.push(this.process);
  }
}
