"""A payments client in Python with psycopg, recording its history for indoubt exec.

It applies N payments (default 20), each under its own id p-1 .. p-N, retrying every
attempt whose connection was lost. Naive, a retry inserts the payment again; with
--idempotent the payment id goes into an idempotency-key table in the same statement,
and a retry that finds it changes nothing. Run it under indoubt exec, which gives it
DATABASE_URL (through the fault proxy), INDOUBT_DIRECT_URL (the server itself, for
setup) and INDOUBT_HISTORY, and reads the final state with --final-sql:

    indoubt exec --fault commit-cut:0.3 --model exactly-once \\
        --final-sql 'SELECT tag, count(*) FROM payments GROUP BY tag' \\
        -- python3 payments.py 20            # exit 1: duplicates
    ... -- python3 payments.py --idempotent 20   # exit 0
"""

import os
import sys

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from indoubt_history import History, local_address, values  # noqa: E402

NAIVE = "INSERT INTO payments (tag, amount) VALUES (%s, 1)"
IDEMPOTENT = ("WITH k AS (INSERT INTO payment_keys (key) VALUES (%s) ON CONFLICT DO NOTHING RETURNING key) "
              "INSERT INTO payments (tag, amount) SELECT key, 1 FROM k")
MAX_ATTEMPTS = 10


def setup():
    # Directly on the server: no fault may touch the tables being made.
    with psycopg.connect(os.environ["INDOUBT_DIRECT_URL"], autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS payments (tag text NOT NULL, amount int NOT NULL)")
        c.execute("CREATE TABLE IF NOT EXISTS payment_keys (key text PRIMARY KEY)")
        c.execute("TRUNCATE payments, payment_keys")


def main():
    idempotent = "--idempotent" in sys.argv
    n = int(next((a for a in sys.argv[1:] if a.isdigit()), "20"))
    sql = IDEMPOTENT if idempotent else NAIVE
    setup()
    history = History(model="exactly-once", workload="payments", store="postgres")
    conn = None
    for i in range(1, n + 1):
        pid = "p-%d" % i
        op = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            addr = None
            try:
                if conn is None:
                    conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
                addr = local_address(conn.pgconn.socket)
                if op is None:
                    op = history.invoke("apply", op_id=pid, conn=addr)
                cur = conn.execute(sql, (pid,))
                if cur.rowcount == 0:
                    op.ok(values.replayed(), conn=addr)  # the retry found its key
                else:
                    op.ok(conn=addr)
                break
            except psycopg.OperationalError as e:
                # The connection was lost: the payment may or may not have been made.
                if op is None:
                    op = history.invoke("apply", op_id=pid, conn=addr)
                if conn is not None:
                    conn.close()
                    conn = None
                if attempt == MAX_ATTEMPTS:
                    op.info(e, conn=addr)
                else:
                    op.failed_attempt(e, conn=addr)
            except psycopg.Error as e:
                # The server refused it: certainly not made.
                op.fail(e, conn=addr)
                break
    if conn is not None:
        conn.close()
    history.close()


if __name__ == "__main__":
    main()
