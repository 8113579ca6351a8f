"""A payments client in Python (standard library only), recording its history for
indoubt exec: it POSTs N payments to $INDOUBT_BASE_URL/payments, each with the
Idempotency-Key p-<i>, and retries every attempt whose connection was lost, with the
same key and body. Whether a retry pays twice is up to the service.

    indoubt exec --store http --upstream 127.0.0.1:8080 --fault response-cut:0.3 \\
        --model exactly-once --final-cmd 'curl -s http://127.0.0.1:8080/paid' \\
        -- python3 client.py 20
"""

import http.client
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.environ["INDOUBT_RECORDERS"])
from indoubt_history import History, local_address  # noqa: E402

MAX_ATTEMPTS = 10


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    base = urllib.parse.urlsplit(os.environ["INDOUBT_BASE_URL"])
    history = History(model="exactly-once")
    for i in range(1, n + 1):
        key = "p-%d" % i
        body = json.dumps({"amount": 5})
        op = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
            addr = None
            try:
                conn.connect()
                addr = local_address(conn.sock)
                if op is None:
                    op = history.invoke("apply", op_id=key, conn=addr)
                conn.request("POST", "/payments", body,
                             {"Content-Type": "application/json", "Idempotency-Key": key})
                resp = conn.getresponse()
                data = resp.read()
                if resp.status == 201:
                    replayed = resp.getheader("Idempotent-Replayed") == "true"
                    op.ok({"payment": json.loads(data)["id"], "replayed": replayed}, conn=addr)
                    break
                if resp.status < 500:
                    op.fail("%d %s" % (resp.status, data.decode(errors="replace")), conn=addr)
                    break
                raise OSError("%d from the service" % resp.status)
            except (OSError, http.client.HTTPException) as e:
                # The connection was lost, or the service failed: the payment may or
                # may not have been made.
                if op is None:
                    op = history.invoke("apply", op_id=key, conn=addr)
                if attempt == MAX_ATTEMPTS:
                    op.info(e, conn=addr)
                else:
                    op.failed_attempt(e, conn=addr)
            finally:
                conn.close()
    history.close()


if __name__ == "__main__":
    main()
