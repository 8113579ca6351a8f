"""A transfer client in Python with psycopg: explicit transactions, recorded for indoubt exec.

It makes N transfers (default 20), each under its own id t-1 .. t-N, each one explicit
transaction: BEGIN; UPDATE the source; UPDATE the destination; INSERT the transfer into
a log; COMMIT. It retries every attempt whose connection was lost. Naive, a retry
transfers again; with --idempotent the transfer is logged first under its id
(INSERT ... ON CONFLICT DO NOTHING), and a retry that finds it there moves nothing. The
proxy reads the tags the server answers inside each transaction, so a cut COMMIT is
proven to have changed rows (UPDATE 1, UPDATE 1, INSERT 0 1) or nothing (INSERT 0 0):

    indoubt exec --fault commit-cut:0.3 --model exactly-once \\
        --final-sql 'SELECT op_id, count(*) FROM transfers GROUP BY op_id' \\
        -- python3 transfer.py 20                # exit 1: transfers made twice
    ... -- python3 transfer.py --idempotent 20   # exit 0
"""

import os
import sys

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from indoubt_history import History  # noqa: E402
from pg_retry import apply_all, ids  # noqa: E402


def setup(idempotent):
    # Directly on the server: no fault may touch the tables being made.
    with psycopg.connect(os.environ["INDOUBT_DIRECT_URL"], autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS accounts, transfers")
        c.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
        c.execute("INSERT INTO accounts VALUES (1, 1000), (2, 1000)")
        c.execute("CREATE TABLE transfers (op_id text NOT NULL%s)" % (" PRIMARY KEY" if idempotent else ""))


def transfer(conn, tid, idempotent):
    """One attempt; returns True when the transfer was already made (a replay)."""
    with conn.transaction():
        if idempotent:
            cur = conn.execute("INSERT INTO transfers (op_id) VALUES (%s) ON CONFLICT (op_id) DO NOTHING", (tid,))
            if cur.rowcount == 0:
                return True
        conn.execute("UPDATE accounts SET balance = balance - 5 WHERE id = 1")
        conn.execute("UPDATE accounts SET balance = balance + 5 WHERE id = 2")
        if not idempotent:
            conn.execute("INSERT INTO transfers (op_id) VALUES (%s)", (tid,))
    return False


def main():
    idempotent = "--idempotent" in sys.argv
    n = int(next((a for a in sys.argv[1:] if a.isdigit()), "20"))
    setup(idempotent)
    history = History(model="exactly-once", workload="transfers", store="postgres")
    apply_all(history, ids("t", n), lambda conn, tid: transfer(conn, tid, idempotent))
    history.close()


if __name__ == "__main__":
    main()
