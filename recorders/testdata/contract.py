"""Runs the recorders' contract (contract.json) with indoubt_history: one history per
case, written as OUT/N.jsonl for the Go test to compare with the history the case
says every recorder must write.

    python3 contract.py contract.json OUT
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from indoubt_history import History  # noqa: E402

contract, out = sys.argv[1], sys.argv[2]
with open(contract) as f:
    cases = json.load(f)["cases"]

for n, case in enumerate(cases):
    h = History(os.path.join(out, "%d.jsonl" % n), model="exactly-once")
    op, conn, last, last_cls = None, None, None, None
    for step in case["steps"]:
        verb, args = step[0], step[1:]
        if verb == "invoke":
            op = h.invoke(args[0], *args[1:])
            conn = None  # a new operation has no connection until the code names one
        elif verb == "conn":
            conn = args[0]
        elif verb == "retried":
            last, last_cls = Exception(args[0]), args[1]
            op.failed_attempt(last, conn=conn, cls=last_cls)
        elif verb == "ok":
            op.ok(*args, conn=conn)
        elif verb in ("done", "done-same"):
            err, cls = (Exception(args[0]), args[1]) if verb == "done" else (last, last_cls)
            if cls == "unknown":
                op.info(err, conn=conn)
            else:
                op.fail(err, conn=conn)
        elif verb == "fail-known":
            op.fail(Exception(args[0]), conn=conn, none_applied=True)
        else:
            raise ValueError("unknown step %r" % verb)
    h.close()
