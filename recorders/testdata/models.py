"""Writes one small history per model with indoubt_history, into the directory given:
the Go test holds each to the history schema and to indoubt's checker (the verdict
is in the file's name: MODEL.valid.jsonl, MODEL.invalid.jsonl)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from indoubt_history import History, values  # noqa: E402

out = sys.argv[1]


def history(name, **kw):
    return History(os.path.join(out, name + ".jsonl"), **kw)


h = history("budget.valid", model="budget", params={"budget": 2})
h.invoke("decrement", conn="127.0.0.1:1").ok(values.decrement(True, 1))
op = h.invoke("decrement", conn="127.0.0.1:1")
op.failed_attempt("connection lost")
op.ok(values.decrement(True, 0), conn="127.0.0.1:2")
h.invoke("decrement").ok(values.decrement(False, 0))
h.final_read(values.balance(0))
h.close()

h = history("counter.valid", model="counter", params={"before": 0})
a, b = h.invoke("increment"), h.invoke("increment")
a.ok(values.increment(1))
b.ok(values.increment(2, read=1))
h.invoke("increment").info("timeout")
h.final_read(values.counter(3))
h.close()

h = history("register.valid", model="register", params={"initial": None})
h.invoke("read", key="r1").ok(None)
h.invoke("write", 1, key="r1").ok(1)
h.invoke("read", key="r1").ok(1)
h.close()

h = history("cas-register.valid", model="cas-register", params={"initial": 0})
h.invoke("cas", values.cas(0, 1)).ok(values.cas(0, 1))
h.invoke("cas", values.cas(0, 5)).fail("compare failed")
h.invoke("read").ok(1)
h.close()

h = history("exactly-once.valid", model="exactly-once", workload="payments")
op = h.invoke("apply", op_id="p-1", conn="127.0.0.1:1")
op.failed_attempt("server closed the connection unexpectedly")
op.ok(values.replayed(), conn="127.0.0.1:2")
h.invoke("apply", op_id="p-2").info("connection lost")
h.invoke("apply", op_id="p-3").fail("duplicate key")
h.final_read({"p-1": 1})
h.close()

h = history("exactly-once.invalid", model="exactly-once")
h.invoke("apply", op_id="p-1").ok()
h.final_read({"p-1": 2})
h.close()

h = history("bank.valid", model="bank", params={"accounts": {"a": 10, "b": 0}})
h.invoke("transfer", values.transfer("a", "b", 3)).ok()
h.invoke("transfer", values.transfer("b", "a", 1)).info("conn closed")
h.final_read({"a": 8, "b": 2})
h.close()

# Transactions: invoked with the reads unknown, completed with what they saw.
for name, first_read in (("list-append.valid", []), ("list-append.invalid", [1])):
    h = history(name, model="list-append", params={"consistency_models": ["serializable"]})
    t1 = [values.append("x", 1), values.read("y")]
    a = h.invoke("txn", t1)
    t1[1] = values.read("y", [])
    a.ok(t1)
    # Valid: a second transaction read y after the first... invalid: it saw 1 in y,
    # which nobody appended to y.
    t2 = [values.read("y"), values.append("y", 2)]
    b = h.invoke("txn", t2)
    t2[0] = values.read("y", first_read)
    b.ok(t2)
    h.close()

h = history("rw-register.valid", model="rw-register")
t = [values.write("x", 1), values.read("x")]
op = h.invoke("txn", t)
t[1] = values.read("x", 1)
op.ok(t)
t = [values.read("x"), values.write("x", 2)]
op = h.invoke("txn", t)
t[0] = values.read("x", 1)
op.ok(t)
h.close()

# A budget with amounts: reservations of 3 and 4 units of a stock of 10, the second
# unknown; the final balance 3 says it took its units. Invalid: a balance no choice
# of the unknown ones gives.
for name, final in (("budget.valid", 3), ("budget.invalid", 5)):
    h = history("amounts-" + name, model="budget", params={"budget": 10, "amounts": True})
    h.invoke("decrement", values.amount(3)).ok(values.decrement(True))
    h.invoke("decrement", values.amount(4)).info("conn closed")
    h.final_read(values.balance(final))
    h.close()

# A bank with a transfer log: t-2 failed, yet the log holds its id (invalid).
for name, log in (("bank.valid", {"t-1": 1}), ("bank.invalid", {"t-1": 1, "t-2": 1})):
    h = history("log-" + name, model="bank", params={"accounts": {"a": 10, "b": 0}, "log": True})
    h.invoke("transfer", values.transfer("a", "b", 3), op_id="t-1").ok()
    h.invoke("transfer", values.transfer("a", "b", 30), op_id="t-2").fail("insufficient funds")
    h.final_read(values.bank_log({"a": 7, "b": 3}, log))
    h.close()

# One reservation held to two models: the stock it takes and the reservation it makes.
# Invalid: the reservation is there twice.
parts = [values.part("stock", "budget", {"budget": 10, "amounts": True}, {"reserve": "decrement", "read": "read"}),
         values.part("reservations", "exactly-once", functions={"reserve": "apply", "read": "read"})]
for name, count in (("models.valid", 1), ("models.invalid", 2)):
    h = history(name, model="models", params={"models": parts})
    h.invoke("reserve", values.amount(3), op_id="r-1").ok(values.decrement(True))
    h.final_read({"stock": values.balance(7), "reservations": {"r-1": count}})
    h.close()

# Several budgets, one per key, each its own total, with amounts. Invalid: sku-2 had 4
# and gave 5.
for name, second in (("budgets.valid", 3), ("budgets.invalid", 5)):
    h = history(name, model="budgets", params={"budgets": {"sku-1": 10, "sku-2": 4}, "amounts": True})
    h.invoke("decrement", values.amount(6), key="sku-1").ok(values.decrement(True))
    h.invoke("decrement", values.amount(second), key="sku-2").ok(values.decrement(True))
    h.final_read(values.balance(4), key="sku-1")
    h.final_read(values.balance(max(0, 4 - second)), key="sku-2")
    h.close()
