// Types of indoubt-history.mjs, for TypeScript users: copy both files next to your
// program. The format is docs/history-format.md in the indoubt repository.

import type { Socket } from 'node:net';

/** The header's format: "indoubt-history/1". */
export declare const FORMAT: 'indoubt-history/1';

/** The checker's models. */
export type Model = 'budget' | 'counter' | 'register' | 'cas-register' | 'exactly-once' | 'bank' | (string & {});

/** How an attempt's error is judged: it may have applied, it did not, or it did not and a retry is reasonable. */
export type ErrorClass = 'unknown' | 'definite' | 'conflict';

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** The time as indoubt histories record it: Unix nanoseconds. */
export declare function now(): bigint;

/** A connection's local address as "host:port" (node-postgres: client.connection.stream), or undefined. */
export declare function localAddress(socket: Pick<Socket, 'localAddress' | 'localPort'> | undefined | null): string | undefined;

/** The values of each model's operations. */
export declare const values: {
  decrement(applied: boolean, balance?: number): { applied: boolean; balance?: number };
  balance(n: number): { balance: number };
  increment(wrote: number, read?: number): { wrote: number; read?: number };
  counter(n: number): { value: number };
  cas(from: number, to: number): [number, number];
  transfer(from: string, to: string, amount: number): { from: string; to: string; amount: number };
  /** budget: the argument of a decrement that takes n units (n >= 1). */
  amount(n: number): { amount: number };
  /** bank with a transfer log: an ok read of the balances and the log. */
  bankLog(balances: Record<string, number>, log: Record<string, number>): { balances: Record<string, number>; log: Record<string, number> };
  /** models: one part of a history held to several models, for params.models. */
  part(name: string, model: string, params?: Record<string, unknown>, functions?: Record<string, string>): {
    name: string; model: string; params?: Record<string, unknown>; functions?: Record<string, string>;
  };
  replayed(): { replayed: true };
  /** list-append: append value to the list at key (a micro-op of a "txn" operation's value). */
  append(key: string, value: number): ['append', string, number];
  /** rw-register: write value to the register at key. */
  write(key: string, value: number): ['w', string, number];
  /** list-append, rw-register: read key; seen is what it saw once run, null before. */
  read(key: string, seen?: number[] | number | null): ['r', string, number[] | number | null];
};

export interface HistoryOptions {
  /** The file to append to; default process.env.INDOUBT_HISTORY. */
  path?: string;
  /** Required for a new file; must agree with the header of an existing one. */
  model?: Model;
  workload?: string;
  store?: string;
  seed?: number;
  /** What the model's checker needs: { budget: n }, { before: n }, { initial: n }, { accounts: {...} }. */
  params?: { [key: string]: JSONValue };
}

export interface InvokeOptions {
  /** What the operation asks: a write's value, a transfer. undefined: no value; null is JSON null. */
  value?: JSONValue;
  /** The logical operation's identity across retries (exactly-once: the effect's); default "PROCESS-N". */
  opId?: string;
  /** The local address of the connection its first attempt uses. */
  conn?: string;
  /** An independent register's key. */
  key?: string;
  /** Take a process no operation has used (final reads). */
  fresh?: boolean;
}

export interface AttemptOptions {
  conn?: string;
  /** Unix nanoseconds; default: the end of the previous attempt, or the invocation. */
  start?: bigint;
  /** Unix nanoseconds; default: now. */
  end?: bigint;
  cls?: ErrorClass;
}

/** An indoubt history file, open for appending. Every method is synchronous. */
export declare class History {
  constructor(options?: HistoryOptions);
  readonly path: string;
  now(): bigint;
  invoke(f: string, options?: InvokeOptions): Operation;
  /** The final state as an ok read by a process of its own, after every other operation. */
  finalRead(value: JSONValue, f?: string, key?: string): void;
  close(): void;
}

/** One operation between its invocation and its completion: failed attempts, then one of ok, fail, info. */
export declare class Operation {
  readonly process: number;
  readonly f: string;
  readonly opId: string;
  readonly key: string | undefined;
  conn: string | undefined;
  failedAttempt(error: unknown, options?: AttemptOptions): void;
  ok(value?: JSONValue, options?: { conn?: string }): void;
  /**
   * The last attempt certainly did not take effect. After an attempt whose outcome was
   * unknown the operation is recorded as info (the worst of its attempts), unless
   * noneApplied says the code knows that no attempt applied.
   */
  fail(error: unknown, options?: { conn?: string; noneApplied?: boolean }): void;
  info(error: unknown, options?: { conn?: string }): void;
}
