"""Record what a program asked its database and what it was told, as an indoubt history.

One file, standard library only, Python 3.8 or later: copy it next to your program.
The format is docs/history-format.md in the indoubt repository; `indoubt exec` runs
your program with INDOUBT_HISTORY set to the file to append to, and `indoubt check`
reads the file back.

    from indoubt_history import History, local_address, values

    history = History(model="exactly-once", workload="payments")   # path: $INDOUBT_HISTORY
    op = history.invoke("apply", op_id="p-1", conn=local_address(conn.pgconn.socket))
    try:
        conn.execute("INSERT INTO payments (tag) VALUES (%s)", ("p-1",))
        op.ok()
    except psycopg.OperationalError as e:   # the connection was lost: outcome unknown
        op.info(str(e))

Every operation is an invocation (History.invoke) and then one completion: ok (it took
effect), fail (it certainly did not) or info (the outcome is not known: the connection
was lost after the request may have been sent). Attempts that failed before a retry
are recorded with Operation.failed_attempt; the last attempt of an operation that
ends in fail or info is recorded by fail() and info() themselves.

Processes are handed out for you: an operation takes the lowest process that has no
operation open, gives it back when it completes ok or fail, and retires it after info
(a process whose operation ended unknown never invokes again). Threads may share one
History: every method is safe for concurrent use. Each event is one write(2) of one
whole line to a file opened for appending, so a crash loses at most the line being
written. One History per file: several processes must not append to the same file.
"""

import heapq
import json
import os
import socket
import threading
import time

__all__ = ["History", "Operation", "local_address", "now", "values", "FORMAT"]

FORMAT = "indoubt-history/1"

_NO_VALUE = object()


def now():
    """Return the time as indoubt histories record it: Unix nanoseconds."""
    return time.time_ns()


def local_address(sock):
    """Return a connection's local address as "host:port" (what the proxy sees), or None.

    sock is a socket, a file descriptor (psycopg: conn.pgconn.socket), or anything with
    fileno(). A Unix-domain socket, a closed one or anything else without an IP address
    gives None: conn is optional in a history.
    """
    try:
        if hasattr(sock, "getsockname"):
            name = sock.getsockname()
        else:
            fd = sock if isinstance(sock, int) else sock.fileno()
            dup = socket.socket(fileno=os.dup(fd))
            try:
                name = dup.getsockname()
            finally:
                dup.close()
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if not isinstance(name, tuple) or len(name) < 2:
        return None
    host, port = name[0], name[1]
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


class values:
    """The values of each model's operations (docs/history-format.md)."""

    @staticmethod
    def decrement(applied, balance=None):
        """budget: an ok decrement; applied False means rejected (nothing was left)."""
        v = {"applied": bool(applied)}
        if balance is not None:
            v["balance"] = int(balance)
        return v

    @staticmethod
    def balance(n):
        """budget: an ok read of the balance."""
        return {"balance": int(n)}

    @staticmethod
    def amount(n):
        """budget: the argument of a decrement that takes n units (n >= 1); a
        decrement invoked with no value takes 1. A history with amounts declares them
        in its header: params={"budget": B, "amounts": True}."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("values.amount: %r is not an integer of 1 or more" % (n,))
        return {"amount": n}

    @staticmethod
    def increment(wrote, read=None):
        """counter: an ok increment, the value it wrote (and read first, if it did)."""
        v = {"wrote": int(wrote)}
        if read is not None:
            v["read"] = int(read)
        return v

    @staticmethod
    def counter(n):
        """counter: an ok read of the counter's value."""
        return {"value": int(n)}

    @staticmethod
    def cas(old, new):
        """register (cas-register model): a cas's argument, and its ok value."""
        return [int(old), int(new)]

    @staticmethod
    def transfer(source, target, amount):
        """bank: a transfer's argument."""
        return {"from": str(source), "to": str(target), "amount": int(amount)}

    @staticmethod
    def bank_log(balances, log):
        """bank with a transfer log (params={"accounts": ..., "log": True}): an ok
        read of every balance and of the log, each transfer's op id with how many
        times the store logged it."""
        return {"balances": {str(k): int(v) for k, v in balances.items()},
                "log": {str(k): int(v) for k, v in log.items()}}

    @staticmethod
    def part(name, model, params=None, functions=None):
        """models: one part of a history held to several models at once, for the
        header's params={"models": [values.part(...), ...]}. functions maps the
        program's function names to the model's ({"reserve": "apply"}); a value that is
        a dict keyed by part names gives each part its member."""
        p = {"name": str(name), "model": str(model)}
        if params is not None:
            p["params"] = params
        if functions is not None:
            p["functions"] = {str(k): str(v) for k, v in functions.items()}
        return p

    @staticmethod
    def replayed():
        """exactly-once: an ok apply whose retry found its effect already there."""
        return {"replayed": True}

    # list-append and rw-register: a transaction is the list of its micro-ops, in the
    # order the program runs them, recorded as the value of a "txn" operation: invoked
    # with its reads not yet known (None), completed ok with each read filled in
    # (tx[i] = values.read(key, seen)). Every value appended or written to a key must be
    # unique.

    @staticmethod
    def append(key, value):
        """list-append: append value to the list at key."""
        return ["append", key, int(value)]

    @staticmethod
    def write(key, value):
        """rw-register: write value to the register at key."""
        return ["w", key, int(value)]

    @staticmethod
    def read(key, seen=None):
        """list-append, rw-register: read key; seen is what it saw once run (the whole
        list, [] for a list never appended to; a register's value, None if never
        written), None before."""
        return ["r", key, list(seen) if isinstance(seen, (list, tuple)) else seen]


def _check_value(value, what):
    """Refuse at the call a value that JSON cannot hold: NaN and infinities (which
    Python's json writes as bare NaN and Infinity, refused by every JSON reader, so
    the whole history would be), and objects json does not know (sets, bytes)."""
    if value is _NO_VALUE:
        return
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as e:
        raise ValueError("%s: the value %r has no JSON form (%s): record a number, or a string "
                         "such as \"NaN\"" % (what, value, e)) from None
    except TypeError as e:
        raise ValueError("%s: the value %r has no JSON form (%s): record lists, dicts, strings, "
                         "numbers, booleans or None" % (what, value, e)) from None


class History:
    """An indoubt history file, open for appending.

    path defaults to $INDOUBT_HISTORY. A new or empty file gets the header line: model
    (required then), workload (default: the model), store, seed and params (what the
    model's checker needs, e.g. {"budget": 100}). A file that already holds a header
    (written by `indoubt exec --model`, or by an earlier History) is appended to; a
    model or params given here must then agree with it, or ValueError is raised.
    """

    def __init__(self, path=None, model=None, workload=None, store=None, seed=0, params=None):
        path = path or os.environ.get("INDOUBT_HISTORY")
        if not path:
            raise ValueError("no history file: give path, or run under indoubt exec (INDOUBT_HISTORY)")
        self.path = path
        self._lock = threading.Lock()
        self._index = 0
        self._next_process = 0
        self._free = []
        self._seq = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            header = self._scan()
            if header is None and self._index == 0:
                if not model:
                    raise ValueError("%s has no header: give model= (one of budget, counter, register, "
                                     "cas-register, exactly-once, bank, list-append, rw-register)" % path)
                h = {"format": FORMAT, "workload": workload or model, "model": model, "seed": int(seed)}
                if store:
                    h["store"] = store
                if params:
                    h["params"] = params
                self._write({"header": h})
            elif header is not None:
                if model and header.get("model") != model:
                    raise ValueError("%s says model %r, not %r" % (path, header.get("model"), model))
                if params and header.get("params") != params:
                    raise ValueError("%s says params %r, not %r" % (path, header.get("params"), params))
        except BaseException:
            os.close(self._fd)
            raise

    def _scan(self):
        """Read what the file holds: its header, and where indexes and processes go on."""
        header = None
        with open(self.path, "rb") as f:
            for n, line in enumerate(f):
                line = line.strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    raise ValueError("%s line %d is not JSON: not a history to append to" % (self.path, n + 1))
                if n == 0 and "header" in event:
                    header = event["header"]
                    continue
                self._index = max(self._index, int(event.get("index", -1)) + 1)
                self._next_process = max(self._next_process, int(event.get("process", -1)) + 1)
        return header

    def _write(self, event):
        data = (json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n").encode()
        while data:
            n = os.write(self._fd, data)
            data = data[n:]

    def _event(self, process, type_, f, **fields):
        """Write one event, with its index and time; the caller holds the lock."""
        event = {"index": self._index, "time": now(), "process": process, "type": type_, "f": f}
        for k, v in fields.items():
            # None is a value (a register read as absent); other fields it leaves out.
            if v is not _NO_VALUE and (v is not None or k == "value"):
                event[k] = v
        self._write(event)
        self._index += 1
        return event["time"]

    def now(self):
        """Return the time in the history's clock (Unix nanoseconds)."""
        return now()

    def invoke(self, f, value=_NO_VALUE, op_id=None, conn=None, key=None, _fresh=False):
        """Record that operation f is about to be sent, and return it as an Operation.

        value is what it asks (a write's value, a transfer; None is JSON null, leave it
        out for no value); op_id names the logical
        operation across its retries (exactly-once: the effect's identity, such as the
        idempotency key; default "PROCESS-N"); conn is the local address of the
        connection its first attempt uses (local_address); key names an independent
        register.
        """
        _check_value(value, "invoke of %s" % f)
        with self._lock:
            if self._free and not _fresh:
                process = heapq.heappop(self._free)
            else:
                process = self._next_process
                self._next_process += 1
            if op_id is None:
                op_id = "%d-%d" % (process, self._seq)
            self._seq += 1
            t = self._event(process, "invoke", f, key=key, value=value, op_id=op_id, conn=conn)
        return Operation(self, process, f, op_id, key, conn, t)

    def final_read(self, value, f="read", key=None):
        """Record the final state as an ok read by a process of its own, after every
        other operation: the exactly-once state {op_id: count}, the bank's balances,
        values.balance(n) or values.counter(n). key names the object read, for a model
        of several (budgets: one final read per account)."""
        op = self.invoke(f, op_id="final" if key is None else "final-" + str(key), key=key, _fresh=True)
        op.ok(value)

    def close(self):
        """Close the file. Operations still open stay open: the checker counts them as
        unknown."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Operation:
    """One operation between its invocation and its completion. Record its failed
    attempts, then exactly one of ok, fail or info."""

    def __init__(self, history, process, f, op_id, key, conn, invoked):
        self._h = history
        self.process = process
        self.f = f
        self.op_id = op_id
        self.key = key
        self.conn = conn
        self._attempt_start = invoked
        self._failed = []
        self._done = False
        self._last_error = _NO_VALUE  # the error object of the last failed attempt

    def failed_attempt(self, error, conn=None, start=None, end=None, cls="unknown"):
        """Record an attempt that ended in error and will be retried.

        conn is the attempt's connection (default: the operation's last one); start and
        end its times (default: from the end of the previous attempt, or the
        invocation, to now); cls how the error is judged: "unknown" (the request may
        have applied: a lost connection, a timeout), "definite" (it did not) or
        "conflict" (it did not; a retry is reasonable: a serialization failure).
        """
        if cls not in ("unknown", "definite", "conflict"):
            raise ValueError("cls must be unknown, definite or conflict, not %r" % (cls,))
        end = now() if end is None else end
        a = {"start": self._attempt_start if start is None else start, "end": end, "error": str(error), "class": cls}
        conn = conn or self.conn
        if conn:
            a["conn"] = conn
        self._failed.append(a)
        self._attempt_start = end
        self._last_error = error
        if conn:
            self.conn = conn

    def _last_attempt(self, error, conn):
        """Whether error is the one the last failed attempt recorded, on the same
        connection: the code gives up with the error it just reported, and that attempt
        is already recorded (recording it again would add an attempt that never ran)."""
        return (self._failed and error is self._last_error
                and (conn is None or conn == self._failed[-1].get("conn")))

    def ok(self, value=_NO_VALUE, conn=None):
        """Record that the operation took effect, with what it answered (value; None
        is JSON null, a register read as absent; leave it out for no value). A value
        JSON cannot hold (NaN, infinity, a set, bytes) raises ValueError, and nothing is
        recorded."""
        _check_value(value, "ok of operation %s" % self.op_id)
        self._complete("ok", value, None, conn, len(self._failed) + 1)

    def fail(self, error, conn=None, none_applied=False):
        """Record that the last attempt certainly did not take effect (the server
        refused it); it is recorded as a failed attempt of class definite. The
        operation's outcome is the worst of its attempts: after an attempt whose
        outcome was unknown (a lost connection), that one may have applied, so the
        operation is recorded as info, not fail. Pass none_applied=True when the code
        knows that no attempt applied (it read its idempotency record and found none).
        Giving the error object just passed to failed_attempt adds no attempt."""
        if not self._last_attempt(error, conn):
            self.failed_attempt(error, conn=conn, cls="definite")
        if not none_applied and any(a["class"] == "unknown" for a in self._failed):
            self._complete("info", _NO_VALUE, error, conn, len(self._failed))
            return
        self._complete("fail", _NO_VALUE, error, conn, len(self._failed))

    def info(self, error, conn=None):
        """Record that the outcome is not known (the connection was lost after the
        request may have been sent, a timeout); its last attempt is recorded as a
        failed attempt of class unknown, unless error is the object just passed to
        failed_attempt. The process is retired."""
        if not self._last_attempt(error, conn):
            self.failed_attempt(error, conn=conn, cls="unknown")
        self._complete("info", _NO_VALUE, error, conn, len(self._failed))

    def _complete(self, type_, value, error, conn, attempts):
        h = self._h
        with h._lock:
            if self._done:
                raise RuntimeError("operation %s already completed" % self.op_id)
            self._done = True
            h._event(self.process, type_, self.f, key=self.key, value=value, op_id=self.op_id,
                     conn=conn or self.conn, error=None if error is None else str(error),
                     attempt=attempts, failed_attempts=self._failed or None)
            if type_ != "info":
                heapq.heappush(h._free, self.process)
