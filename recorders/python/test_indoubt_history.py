"""Tests of indoubt_history under pytest: the lines it writes, the processes it hands
out, appending to a file that has a header, and many threads at once.

The Go test in recorders/ runs these, and holds what the recorder writes to the
history schema and to indoubt's own reader and checker.
"""

import json
import os
import socket
import threading

import pytest

from indoubt_history import History, local_address, values


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def test_header_then_one_line_per_event(tmp_path):
    p = tmp_path / "h.jsonl"
    h = History(str(p), model="budget", params={"budget": 2}, store="postgres")
    op = h.invoke("decrement", conn="127.0.0.1:5000")
    op.ok(values.decrement(True, 1))
    h.close()
    got = lines(p)
    assert got[0] == {"header": {"format": "indoubt-history/1", "workload": "budget", "model": "budget",
                                 "seed": 0, "store": "postgres", "params": {"budget": 2}}}
    inv, ok = got[1], got[2]
    assert (inv["index"], inv["type"], inv["f"], inv["process"], inv["conn"]) == (0, "invoke", "decrement", 0, "127.0.0.1:5000")
    assert (ok["index"], ok["type"], ok["op_id"], ok["attempt"]) == (1, "ok", inv["op_id"], 1)
    assert ok["value"] == {"applied": True, "balance": 1}
    assert "failed_attempts" not in ok
    # Unix nanoseconds, in order.
    assert inv["time"] > 10**18 and ok["time"] >= inv["time"]


def test_without_model_a_new_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no header"):
        History(str(tmp_path / "h.jsonl"))


def test_no_path_is_refused(monkeypatch):
    monkeypatch.delenv("INDOUBT_HISTORY", raising=False)
    with pytest.raises(ValueError, match="INDOUBT_HISTORY"):
        History(model="budget")


def test_path_from_the_environment_and_a_header_written_by_exec(tmp_path, monkeypatch):
    p = tmp_path / "h.jsonl"
    p.write_text('{"header":{"format":"indoubt-history/1","workload":"payments","model":"exactly-once","seed":7}}\n')
    monkeypatch.setenv("INDOUBT_HISTORY", str(p))
    h = History()  # the header exec wrote names the model
    h.invoke("apply", op_id="p-1").ok()
    h.close()
    got = lines(p)
    assert len(got) == 3 and got[0]["header"]["seed"] == 7
    assert History(str(p), model="exactly-once") is not None
    with pytest.raises(ValueError, match="model"):
        History(str(p), model="budget")


def test_appending_goes_on_with_indexes_and_fresh_processes(tmp_path):
    p = str(tmp_path / "h.jsonl")
    h = History(p, model="exactly-once")
    h.invoke("apply", op_id="a")  # left open: a crash
    h.close()
    h = History(p)
    op = h.invoke("apply", op_id="b")
    op.ok()
    h.close()
    got = lines(p)
    assert [e["index"] for e in got[1:]] == [0, 1, 2]
    assert got[2]["process"] == 1, "an open operation's process must not be reused"


def test_processes_pooled_and_retired_after_info(tmp_path):
    p = str(tmp_path / "h.jsonl")
    h = History(p, model="register")
    a = h.invoke("write", 1)
    b = h.invoke("write", 2)
    assert (a.process, b.process) == (0, 1)
    a.ok(1)
    c = h.invoke("read")
    assert c.process == 0, "a process free again is reused"
    b.info("conn closed")
    c.ok(None)
    d = h.invoke("read")
    e = h.invoke("read")
    assert (d.process, e.process) == (0, 2), "after info the process never invokes again"
    d.ok(1)
    e.ok(1)
    with pytest.raises(RuntimeError):
        e.ok(1)
    h.close()
    got = lines(p)
    assert "value" in got[6] and got[6]["value"] is None, "a read of an absent register keeps its null"
    assert "value" not in got[5], "an info carries no value"


def test_failed_attempts_and_the_last_attempt(tmp_path):
    p = str(tmp_path / "h.jsonl")
    h = History(p, model="exactly-once")
    op = h.invoke("apply", op_id="p-1", conn="127.0.0.1:1")
    op.failed_attempt("server closed the connection unexpectedly")
    op.failed_attempt("serialization failure", conn="127.0.0.1:2", cls="conflict")
    op.ok(values.replayed(), conn="127.0.0.1:3")
    lost = h.invoke("apply", op_id="p-2", conn="127.0.0.1:3")
    lost.failed_attempt("timeout")
    lost.info("connection lost", conn="127.0.0.1:4")
    refused = h.invoke("apply", op_id="p-3")
    refused.fail("duplicate key value violates unique constraint")
    h.final_read({"p-1": 1, "p-2": 0})
    h.close()
    got = lines(p)
    ok = got[2]
    assert ok["attempt"] == 3 and ok["conn"] == "127.0.0.1:3" and ok["value"] == {"replayed": True}
    fa = ok["failed_attempts"]
    assert [a["conn"] for a in fa] == ["127.0.0.1:1", "127.0.0.1:2"]
    assert [a["class"] for a in fa] == ["unknown", "conflict"]
    assert fa[0]["start"] == got[1]["time"] and fa[0]["end"] <= fa[1]["start"] <= fa[1]["end"] <= ok["time"]
    info = got[4]
    assert info["type"] == "info" and info["attempt"] == 2 and info["error"] == "connection lost"
    assert [a["class"] for a in info["failed_attempts"]] == ["unknown", "unknown"]
    assert info["failed_attempts"][-1]["conn"] == "127.0.0.1:4"
    fail = got[6]
    assert fail["type"] == "fail" and fail["attempt"] == 1 and fail["failed_attempts"][0]["class"] == "definite"
    final_inv, final_ok = got[7], got[8]
    assert final_inv["op_id"] == final_ok["op_id"] == "final"
    assert final_inv["process"] not in {e["process"] for e in got[1:7]}
    assert final_ok["value"] == {"p-1": 1, "p-2": 0}
    with pytest.raises(ValueError, match="cls"):
        History(p).invoke("apply", op_id="x").failed_attempt("e", cls="maybe")


def test_threads_share_one_history(tmp_path):
    p = str(tmp_path / "h.jsonl")
    h = History(p, model="counter")
    def worker():
        for _ in range(200):
            op = h.invoke("increment")
            op.ok(values.increment(1))
    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    h.close()
    got = lines(p)[1:]
    assert [e["index"] for e in got] == list(range(8 * 200 * 2))
    times = [e["time"] for e in got]
    assert times == sorted(times), "times follow the order of the lines"
    open_by_process = {}
    for e in got:
        if e["type"] == "invoke":
            assert e["process"] not in open_by_process, "two operations open on one process"
            open_by_process[e["process"]] = e["op_id"]
        else:
            assert open_by_process.pop(e["process"]) == e["op_id"]
    assert len({e["op_id"] for e in got}) == 8 * 200


def test_local_address_of_sockets_and_descriptors():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname())
    try:
        want = "127.0.0.1:%d" % c.getsockname()[1]
        assert local_address(c) == want
        assert local_address(c.fileno()) == want
        assert local_address(c) == want, "the socket still works after a look at its descriptor"
    finally:
        c.close()
        srv.close()
    assert local_address(-1) is None
    assert local_address(None) is None
    u = socket.socket(socket.AF_UNIX)
    try:
        assert local_address(u) is None
    finally:
        u.close()


def test_values_json_cannot_hold_are_refused_at_the_call(tmp_path):
    p = tmp_path / "h.jsonl"
    h = History(str(p), model="register")
    for bad in (float("nan"), float("inf"), [1, float("-inf")], {"x": {1, 2}}, b"bytes"):
        with pytest.raises(ValueError, match="has no JSON form"):
            h.invoke("write", bad)
    op = h.invoke("read")
    with pytest.raises(ValueError, match="ok of operation .*has no JSON form"):
        op.ok(float("nan"))
    op.ok(1.5)  # refused values left nothing behind: the operation completes
    h.close()
    got = lines(p)
    assert [e["type"] for e in got[1:]] == ["invoke", "ok"]
    assert got[2]["value"] == 1.5


def test_amount_is_an_integer_of_one_or_more():
    assert values.amount(3) == {"amount": 3}
    for bad in (0, -1, 2.5, True, "3", None):
        with pytest.raises(ValueError):
            values.amount(bad)


def test_parts_and_bank_log_values():
    p = values.part("stock", "budget", {"budget": 10}, {"reserve": "decrement"})
    assert p == {"name": "stock", "model": "budget", "params": {"budget": 10}, "functions": {"reserve": "decrement"}}
    assert values.part("r", "exactly-once") == {"name": "r", "model": "exactly-once"}
    assert values.bank_log({"a": 1}, {"t": 1}) == {"balances": {"a": 1}, "log": {"t": 1}}
