"""Your own transactions checked for isolation, in Python with psycopg: the list-append model.

Several threads, each with its own connection, run N transactions each (default 30) at
the isolation level given (--isolation read-committed, the default, or serializable):
every transaction 2 to 4 micro-ops over 3 keys, an append being an upsert that extends
the key's array, a read a SELECT of it. Each is recorded as a "txn" operation, invoked
with its micro-ops and completed with what its reads saw; indoubt's checker then looks
for the cycles of dependencies serializability forbids, as Jepsen's Elle does:

    indoubt exec -- python3 list_append.py                           # exit 1: anomalies named
    indoubt exec -- python3 list_append.py --isolation serializable  # exit 0

A serialization failure or a deadlock (SQLSTATE 40001, 40P01) is retried and recorded as
a failed attempt of class conflict.
"""

import os
import random
import sys
import threading

import psycopg
from psycopg import errors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from indoubt_history import History, local_address, values  # noqa: E402

THREADS = 5
LEVELS = {"read-committed": "READ COMMITTED", "serializable": "SERIALIZABLE"}


def run(conn, level, tx):
    """Run tx's micro-ops in one transaction, filling in what its reads saw."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL " + level)
        for i, (f, key, v) in enumerate(tx):
            if f == "append":
                conn.execute("INSERT INTO lists (k, vals) VALUES (%s, ARRAY[%s::bigint]) "
                             "ON CONFLICT (k) DO UPDATE SET vals = lists.vals || %s::bigint", (key, v, v))
            else:
                row = conn.execute("SELECT vals FROM lists WHERE k = %s", (key,)).fetchone()
                tx[i] = values.read(key, row[0] if row else [])


def worker(history, level, n, seed, counter, lock):
    rng = random.Random(seed)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        addr = local_address(conn.pgconn.socket)
        for _ in range(n):
            tx = []
            for _ in range(rng.randint(2, 4)):
                key = "k%d" % rng.randrange(3)
                if rng.random() < 0.5:
                    with lock:
                        counter[0] += 1
                        tx.append(values.append(key, counter[0]))
                else:
                    tx.append(values.read(key))
            op = history.invoke("txn", list(tx), conn=addr)
            for attempt in range(10):
                try:
                    run(conn, level, tx)
                    op.ok(tx, conn=addr)
                    break
                except (errors.SerializationFailure, errors.DeadlockDetected) as e:
                    if attempt == 9:
                        op.fail(e, conn=addr)
                    else:
                        op.failed_attempt(e, conn=addr, cls="conflict")


def main():
    args = sys.argv[1:]
    level = LEVELS[args[args.index("--isolation") + 1] if "--isolation" in args else "read-committed"]
    n = int(next((a for a in args if a.isdigit()), "30"))
    with psycopg.connect(os.environ["INDOUBT_DIRECT_URL"], autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS lists")
        c.execute("CREATE TABLE lists (k text PRIMARY KEY, vals bigint[] NOT NULL)")
    history = History(model="list-append", workload="list-append", store="postgres",
                      params={"consistency_models": ["serializable"]})
    counter, lock = [0], threading.Lock()
    threads = [threading.Thread(target=worker, args=(history, level, n, i, counter, lock)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history.close()


if __name__ == "__main__":
    main()
