"""What the payments and transfer examples share: the loop that applies each operation
through the proxy, retrying every attempt whose connection was lost, and records it once
with its attempts."""

import os
import sys

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from indoubt_history import local_address, values  # noqa: E402

MAX_ATTEMPTS = 10


def apply_all(history, ids, attempt):
    """Applies the operations named ids in order, through the proxy (DATABASE_URL), each
    recorded in history as one "apply" under its id.

    attempt(conn, id) makes one attempt and returns True when it found the operation
    already made (the retry of an idempotent client: a replay). A lost connection
    (psycopg.OperationalError) may or may not have made it: it is tried again on a new
    connection, and left unknown (info) after MAX_ATTEMPTS. Any other psycopg.Error is
    the server's refusal, certainly not made: the operation fails.
    """
    conn = None
    for oid in ids:
        op = None
        for i in range(1, MAX_ATTEMPTS + 1):
            addr = None
            try:
                if conn is None:
                    conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
                addr = local_address(conn.pgconn.socket)
                if op is None:
                    op = history.invoke("apply", op_id=oid, conn=addr)
                if attempt(conn, oid):
                    op.ok(values.replayed(), conn=addr)
                else:
                    op.ok(conn=addr)
                break
            except psycopg.OperationalError as e:
                if op is None:
                    op = history.invoke("apply", op_id=oid, conn=addr)
                if conn is not None:
                    conn.close()
                    conn = None
                if i == MAX_ATTEMPTS:
                    op.info(e, conn=addr)
                else:
                    op.failed_attempt(e, conn=addr)
            except psycopg.Error as e:
                op.fail(e, conn=addr)
                break
    if conn is not None:
        conn.close()


def ids(prefix, n):
    """prefix-1 .. prefix-n."""
    return ["%s-%d" % (prefix, i) for i in range(1, n + 1)]
