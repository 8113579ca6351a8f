package indoubttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Recorder records the operations of the code under test as a history: each one's
// invocation, the attempts that failed, and its one completion, ok (it took effect),
// fail (it certainly did not) or info (unknown). Its methods are safe for concurrent
// use; each goroutine that issues operations takes its own Worker.
type Recorder struct {
	tb  testing.TB
	srv *Server

	mu       sync.Mutex
	start    time.Time
	ops      []histories.Op
	nextProc int
	reads    int
	closed   bool
	classify func(error) error
}

// NewRecorder returns a recorder for the test tb. srv, when not nil, is the server the
// operations run against: its error rules classify errors (Op.Done, Op.Retried), and
// Check joins the faults its proxy fired to the history. A nil srv records without
// faults; errors are then unknown unless they carry package workloads' mark of a
// conflict (workloads.Conflict).
func NewRecorder(tb testing.TB, srv *Server) *Recorder {
	start := time.Now()
	if srv != nil {
		start = srv.start
	}
	return &Recorder{tb: tb, srv: srv, start: start}
}

// SetClassifier replaces the error rules that Op.Done and Op.Retried apply (the
// server's, by default) with f, which must return nil for nil and otherwise wrap its
// argument with workloads.ErrUnknown when the operation may have applied, or
// workloads.ErrConflict when it certainly did not and a retry is reasonable; any other
// error it returns is a definite failure. Use it when your code's errors say more than
// the driver's: a "charge declined" of your own is a failure that no lost connection
// caused. Compose it with the store's rules through Server.Classify.
func (r *Recorder) SetClassifier(f func(error) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.classify = f
}

// class judges err by the recorder's rules: SetClassifier's, else the server's, else
// the contract alone (where only its mark of a conflict is not unknown).
func (r *Recorder) class(err error) workloads.Class {
	r.mu.Lock()
	f := r.classify
	r.mu.Unlock()
	switch {
	case f != nil:
		err = f(err)
	case r.srv != nil:
		err = r.srv.Classify(err)
	case workloads.Classify(err) != workloads.ClassConflict:
		return workloads.ClassUnknown
	}
	return workloads.Classify(err)
}

// now is the history's clock: nanoseconds since the server (or the recorder) started.
func (r *Recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// Worker returns a new worker: a logical process that issues one operation at a time.
// Use one per goroutine.
func (r *Recorder) Worker() *Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Worker{r: r, process: r.newProcess()}
}

func (r *Recorder) newProcess() int {
	p := r.nextProc
	r.nextProc++
	return p
}

// append adds op with the current time. Taking the time under the lock keeps the
// history in real-time order.
func (r *Recorder) append(op histories.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.tb.Errorf("indoubttest: operation %s %s recorded after Check", op.OpID, op.Type)
		return
	}
	op.Time = r.now()
	r.ops = append(r.ops, op)
}

// Read records an observation of the final state, after the workers are done: an
// invocation and an ok completion of f with value, by a process of its own, marked as
// a final read (op id final-N) so that the checker counts it apart from the workers'
// operations. Read through Server.DirectDSN, so that no fault interferes. For the
// budget model: rec.Read("read", indoubttest.Balance(n)).
func (r *Recorder) Read(f string, value any) { r.ReadOn("", f, value) }

// ReadOn is Read of one object of a model over several (Budgets, Register): the
// final balance of key.
func (r *Recorder) ReadOn(key, f string, value any) {
	r.tb.Helper()
	v, ok := r.encode(value, f)
	if !ok {
		return
	}
	r.mu.Lock()
	p := r.newProcess()
	id := histories.FinalReadID(r.reads)
	r.reads++
	r.mu.Unlock()
	r.append(histories.Op{Process: p, Type: histories.Invoke, F: f, Key: key, OpID: id})
	r.append(histories.Op{Process: p, Type: histories.OK, F: f, Key: key, OpID: id, Value: v})
}

// encode makes value a history value; one that JSON cannot hold fails the test.
func (r *Recorder) encode(value any, what string) (json.RawMessage, bool) {
	switch v := value.(type) {
	case nil:
		return nil, true
	case json.RawMessage:
		return v, true
	case Value:
		return v.raw, true
	}
	b, err := json.Marshal(value)
	if err != nil {
		r.tb.Helper()
		r.tb.Errorf("indoubttest: %s: the value %T cannot be recorded: %v", what, value, err)
		return nil, false
	}
	return b, true
}

// Worker is one logical process of a Recorder. It is not safe for concurrent use: a
// process issues one operation at a time.
type Worker struct {
	r       *Recorder
	id      int // the worker's number, the first part of its op ids
	process int
	seq     int
	open    *Op
	named   bool
}

// Invoke records that the worker starts operation f with argument value (nil: none; see
// the model's constructor for the functions and values it reads) and returns its
// handle. The handle's ID is unique in the test and the same across the operation's
// retries: use it as the idempotency key. A worker whose previous operation is still
// open fails the test.
func (w *Worker) Invoke(f string, value any) *Op { return w.InvokeOn("", f, value) }

// InvokeOn is Invoke on one object of a model over several: a key of Budgets (a SKU),
// a register of Register.
func (w *Worker) InvokeOn(key, f string, value any) *Op {
	w.r.tb.Helper()
	if !w.named {
		w.id, w.named = w.process, true
	}
	if w.open != nil {
		w.r.tb.Fatalf("indoubttest: worker %d invoked %s while %s is still open: complete it first (Ok, Fail, Info or Done)", w.id, f, w.open.id)
	}
	v, _ := w.r.encode(value, "Invoke("+f+")")
	w.seq++
	op := &Op{w: w, f: f, key: key, id: fmt.Sprintf("%d-%d", w.id, w.seq), process: w.process}
	w.open = op
	w.r.append(histories.Op{Process: w.process, Type: histories.Invoke, F: f, Key: key, OpID: op.id, Value: v})
	op.from = w.r.now()
	return op
}

// Op is one operation in flight. Tell it about every attempt that failed (Retried) and
// complete it exactly once with Ok, Fail, Info or Done; a second completion fails the
// test. Its methods are safe for concurrent use (a driver's hook may call Conn from
// another goroutine).
type Op struct {
	w       *Worker
	f, key  string
	id      string
	process int

	mu       sync.Mutex
	from     int64  // the current attempt's start
	conn     string // the current attempt's connection, when named
	lastConn string
	failed   []histories.FailedAttempt
	unknown  bool  // an attempt ended with its outcome unknown
	retried  error // the error of the last Retried, until Conn names a new attempt
	done     bool
}

// ID returns the operation's id, "worker-sequence": unique in the test, and the same
// across the operation's retries, so the code under test can use it as its idempotency
// key.
func (o *Op) ID() string { return o.id }

// Conn names the connection the current attempt uses: the client's local address,
// host:port, as the proxy sees it (for pgx, conn.PgConn().Conn().LocalAddr().String()).
// It is optional: with it, the proxy's faults join the attempt they hit by connection;
// without it, only by time, which cannot tell concurrent attempts apart. An attempt
// that uses several connections names each as it takes it: the last one named is the
// one its error came from. A retry starts a new attempt, with no connection named.
func (o *Op) Conn(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conn, o.lastConn = addr, addr
	o.retried = nil
}

// Retried records that an attempt of the operation failed with err and that the code
// under test tries again: pass it to your retry loop's hook. The attempt is kept in
// the history (the completion's failed_attempts) with its times, its connection
// (Conn), its error and its class by the server's error rules, so that the proxy's
// faults join the attempt they hit. An attempt whose outcome is unknown (a lost
// connection after the request was sent) leaves the whole operation unknown unless a
// later attempt succeeds: see Done.
func (o *Op) Retried(err error) {
	o.attempt(err, o.w.r.class(errOr(err)))
	o.mu.Lock()
	o.retried = err
	o.mu.Unlock()
}

// errOr stands in for an error the caller did not give.
func errOr(err error) error {
	if err == nil {
		return errNoError
	}
	return err
}

var errNoError = fmt.Errorf("an attempt failed (the code under test gave no error)")

// attempt records a failed attempt and starts the next one.
func (o *Op) attempt(err error, class workloads.Class) {
	now := o.w.r.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed = append(o.failed, histories.FailedAttempt{Conn: o.conn, Start: o.from, End: now, Error: errOr(err).Error(), Class: class.String()})
	o.unknown = o.unknown || class == workloads.ClassUnknown
	o.from, o.conn = now, ""
}

// Ok records that the operation took effect, with its result value (nil: none; the
// model's constructor says which values it reads).
func (o *Op) Ok(value any) {
	o.w.r.tb.Helper()
	v, ok := o.w.r.encode(value, "operation "+o.id+": Ok")
	if !ok {
		return
	}
	o.complete(histories.OK, v, nil)
}

// Fail records that the operation certainly did not take effect, none of its attempts:
// the server refused it before anything was applied, or your code read its own record
// of the operation (its idempotency key) and found it absent. Fail is how your code
// says it knows: Done after an attempt whose outcome was unknown records Info, whatever
// the last attempt's error. err, when not nil, is kept as the last attempt's error.
func (o *Op) Fail(err error) {
	o.w.r.tb.Helper()
	if err != nil {
		o.attempt(err, workloads.ClassDefinite)
	}
	o.complete(histories.Fail, nil, err)
}

// Info records that the operation's outcome is unknown: it may have taken effect, or
// not. err, when not nil, is kept as the last attempt's error. The worker continues
// under a fresh process id (Jepsen's rule: a process whose operation may still take
// effect never invokes again), so that checkers may keep the operation concurrent with
// everything after it.
func (o *Op) Info(err error) {
	o.w.r.tb.Helper()
	if err != nil {
		o.attempt(err, workloads.ClassUnknown)
	}
	o.complete(histories.Info, nil, err)
}

// Done records the outcome of the operation's last attempt by its error: nil is
// Ok(value); otherwise the error is judged by the error rules (Recorder.SetClassifier's,
// else the server's, else unknown unless it carries workloads' conflict mark). An error
// after which the request may have applied, such as the lost connection a commit-cut
// leaves, is Info. A definite failure is Fail, unless an earlier attempt (Retried)
// ended unknown: the operation's outcome is the worst of its attempts, so it is Info
// then too, since that earlier attempt may have applied. Call Fail when your code knows
// better. A retry loop that passes every failed attempt to Retried, the last one too,
// and then gives up with Done and the same error records that attempt once: Done adds
// an attempt only for an error that Retried did not just record (with no Conn since).
func (o *Op) Done(value any, err error) {
	o.w.r.tb.Helper()
	if err == nil {
		o.Ok(value)
		return
	}
	o.mu.Lock()
	recorded := o.retried != nil && errors.Is(err, o.retried) && len(o.failed) > 0
	o.mu.Unlock()
	if !recorded {
		o.attempt(err, o.w.r.class(err))
	}
	o.mu.Lock()
	unknown := o.unknown
	o.mu.Unlock()
	if unknown {
		o.complete(histories.Info, nil, err)
		return
	}
	o.complete(histories.Fail, nil, err)
}

func (o *Op) complete(t histories.Type, value json.RawMessage, err error) {
	w := o.w
	w.r.tb.Helper()
	o.mu.Lock()
	if o.done {
		o.mu.Unlock()
		w.r.tb.Errorf("indoubttest: operation %s completed twice", o.id)
		return
	}
	o.done = true
	ev := histories.Op{Process: o.process, Type: t, F: o.f, Key: o.key, OpID: o.id, Value: value,
		Conn: o.lastConn, Attempt: len(o.failed) + 1, Failed: o.failed}
	if t != histories.OK {
		ev.Attempt = len(o.failed) // the last attempt is among the failed ones
	}
	o.mu.Unlock()
	if err != nil {
		ev.Error = err.Error()
	}
	w.r.append(ev)
	if w.open == o {
		w.open = nil
	}
	if t == histories.Info {
		w.r.mu.Lock()
		w.process = w.r.newProcess()
		w.r.mu.Unlock()
	}
}
