// Runs the recorders' contract (contract.json) with indoubt-history.mjs: one history
// per case, written as OUT/N.jsonl for the Go test to compare with the history the case
// says every recorder must write.
//
//   node contract.mjs contract.json OUT

import fs from 'node:fs';
import path from 'node:path';

import { History } from '../js/indoubt-history.mjs';

const [contract, out] = process.argv.slice(2);
const { cases } = JSON.parse(fs.readFileSync(contract, 'utf8'));

cases.forEach((c, n) => {
  const h = new History({ path: path.join(out, `${n}.jsonl`), model: 'exactly-once' });
  let op;
  let conn;
  let last;
  let lastCls;
  for (const [verb, ...args] of c.steps) {
    switch (verb) {
      case 'invoke':
        op = h.invoke(args[0], args.length > 1 ? { value: args[1] } : {});
        conn = undefined; // a new operation has no connection until the code names one
        break;
      case 'conn':
        conn = args[0];
        break;
      case 'retried':
        [last, lastCls] = [new Error(args[0]), args[1]];
        op.failedAttempt(last, { conn, cls: lastCls });
        break;
      case 'ok':
        op.ok(args[0], { conn });
        break;
      case 'done':
      case 'done-same': {
        const [err, cls] = verb === 'done' ? [new Error(args[0]), args[1]] : [last, lastCls];
        if (cls === 'unknown') op.info(err, { conn });
        else op.fail(err, { conn });
        break;
      }
      case 'fail-known':
        op.fail(new Error(args[0]), { conn, noneApplied: true });
        break;
      default:
        throw new Error(`unknown step ${verb}`);
    }
  }
  h.close();
});
