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
from indoubt_history import History  # noqa: E402
from pg_retry import apply_all, ids  # noqa: E402

NAIVE = "INSERT INTO payments (tag, amount) VALUES (%s, 1)"
IDEMPOTENT = ("WITH k AS (INSERT INTO payment_keys (key) VALUES (%s) ON CONFLICT DO NOTHING RETURNING key) "
              "INSERT INTO payments (tag, amount) SELECT key, 1 FROM k")


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
    # A payment whose key is there already inserts no row: the retry found its key.
    apply_all(history, ids("p", n), lambda conn, pid: conn.execute(sql, (pid,)).rowcount == 0)
    history.close()


if __name__ == "__main__":
    main()
