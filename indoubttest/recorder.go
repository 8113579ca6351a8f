package indoubttest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Recorder records the operations of the code under test as a history: each one's
// invocation and its one completion, ok (it took effect), fail (it certainly did not)
// or info (unknown). Its methods are safe for concurrent use; each goroutine that issues
// operations takes its own Worker.
type Recorder struct {
	tb  testing.TB
	srv *Server

	mu       sync.Mutex
	start    time.Time
	ops      []histories.Op
	attempts map[string]*attempts // by op id
	nextProc int
	closed   bool
	dir      string
	classify func(error) error
}

// SetClassifier replaces the error rules Op.Done applies (the server's, by default) with
// f, which must return nil for nil and otherwise wrap its argument with
// workloads.ErrUnknown when the operation may have applied, or workloads.ErrConflict
// when it certainly did not and a retry is reasonable; any other error it returns is a
// definite failure. Use it when your code's errors say more than the driver's: a
// "charge declined" of your own is a failure that no lost connection caused.
func (r *Recorder) SetClassifier(f func(error) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.classify = f
}

// RunDir returns the run directory Check wrote, or "" before Check.
func (r *Recorder) RunDir() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dir
}

// attempts is what the recorder knows of an operation beyond its two events: the
// failed attempts the code retried, and the connections it named.
type attempts struct {
	retried   []string
	retriedAt []int64 // ns since the start, when each was noted
	conns     []string
}

// NewRecorder returns a recorder for the test tb. srv, when not nil, is the server the
// operations run against: its error rules map errors in Op.Done, and Check joins its
// fault events to the history. A nil srv records without faults (errors are then
// classified by package workloads' contract alone: a bare error is unknown).
func NewRecorder(tb testing.TB, srv *Server) *Recorder {
	start := time.Now()
	if srv != nil {
		start = srv.start
	}
	return &Recorder{tb: tb, srv: srv, start: start, attempts: map[string]*attempts{}}
}

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
	op.Time = time.Since(r.start).Nanoseconds()
	r.ops = append(r.ops, op)
}

// Worker is one logical process of a Recorder. It is not safe for concurrent use: a
// process issues one operation at a time.
type Worker struct {
	r       *Recorder
	process int
	seq     int
	open    *Op
}

// Process returns the worker's current process id. It changes after an operation ends in
// info: Jepsen's rule, a process whose outcome is unknown never invokes again, so the
// checkers may keep the open operation concurrent with everything after it.
func (w *Worker) Process() int { return w.process }

// Invoke records that the worker starts operation f with argument value (nil: none; see
// "Values" in package histories for the formats each model reads) and returns its
// handle. The handle's ID is unique in the test: use it as the idempotency key. A
// worker whose previous operation is still open fails the test.
func (w *Worker) Invoke(f string, value any) *Op {
	w.r.tb.Helper()
	if w.open != nil {
		w.r.tb.Fatalf("indoubttest: worker %d invoked %s while %s is still open", w.process, f, w.open.id)
	}
	w.seq++
	op := &Op{w: w, f: f, id: fmt.Sprintf("%d-%d", w.process, w.seq), process: w.process}
	w.open = op
	w.r.append(histories.Op{Process: w.process, Type: histories.Invoke, F: f, OpID: op.id, Value: encode(value)})
	return op
}

func encode(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	return histories.Value(v)
}

// Op is one operation in flight. Complete it exactly once with Ok, Fail, Info or Done;
// a second completion fails the test.
type Op struct {
	w       *Worker
	f, id   string
	process int
	tries   int
	done    bool
}

// ID returns the operation's id, "process-sequence": unique in the test, and the same
// across the operation's retries, so the code under test can use it as its idempotency
// key.
func (o *Op) ID() string { return o.id }

// Retried notes a failed attempt that the code under test retried: Check names it when
// it joins the proxy's faults to the history ("your code retried").
func (o *Op) Retried(err error) {
	o.w.r.mu.Lock()
	defer o.w.r.mu.Unlock()
	o.tries++
	a := o.w.r.attemptsOf(o.id)
	msg := "error"
	if err != nil {
		msg = err.Error()
	}
	a.retried = append(a.retried, msg)
	a.retriedAt = append(a.retriedAt, time.Since(o.w.r.start).Nanoseconds())
}

// Conn names the connection (the client's local address, host:port) an attempt used.
// It is optional: with it, Check joins faults to this operation by connection rather
// than by time alone.
func (o *Op) Conn(addr string) {
	o.w.r.mu.Lock()
	defer o.w.r.mu.Unlock()
	a := o.w.r.attemptsOf(o.id)
	a.conns = append(a.conns, addr)
}

func (r *Recorder) attemptsOf(id string) *attempts {
	a := r.attempts[id]
	if a == nil {
		a = &attempts{}
		r.attempts[id] = a
	}
	return a
}

// Ok records that the operation took effect, with its result value (nil: none).
func (o *Op) Ok(value any) {
	o.complete(histories.OK, encode(value), nil)
}

// Fail records that the operation certainly did not take effect: the code can prove
// it (the server refused it, or the request was never sent).
func (o *Op) Fail(err error) {
	o.complete(histories.Fail, nil, err)
}

// Info records that the operation's outcome is unknown: it may have taken effect, or not.
// The worker continues under a fresh process id.
func (o *Op) Info(err error) {
	o.complete(histories.Info, nil, err)
}

// Done records the outcome of an attempt by its error: nil is Ok(value); otherwise the
// error is mapped by the store's error contract (Recorder.SetClassifier's rules, else
// Server.Classify; without either only workloads.ErrConflict is a failure): unknown becomes Info, and a definite
// failure or conflict becomes Fail. An error that cannot be told apart from a lost
// connection after the request was sent is unknown, as it is after a commit-cut. Call
// Fail or Info instead when the code knows better.
func (o *Op) Done(value any, err error) {
	if err == nil {
		o.Ok(value)
		return
	}
	srv := o.w.r.srv
	o.w.r.mu.Lock()
	classify := o.w.r.classify
	o.w.r.mu.Unlock()
	switch {
	case classify != nil:
		err = classify(err)
	case srv != nil:
		err = srv.Classify(err)
	case workloads.Classify(err) != workloads.ClassConflict:
		// Without a store's rules, only the contract's own mark proves a failure.
		err = workloads.Unknown(err, "")
	}
	if workloads.Classify(err) == workloads.ClassUnknown {
		o.Info(err)
		return
	}
	o.Fail(err)
}

func (o *Op) complete(t histories.Type, value json.RawMessage, err error) {
	w := o.w
	w.r.tb.Helper()
	if o.done {
		w.r.tb.Errorf("indoubttest: operation %s completed twice", o.id)
		return
	}
	o.done = true
	ev := histories.Op{Process: o.process, Type: t, F: o.f, OpID: o.id, Value: value, Attempt: o.tries + 1}
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

// Read records an observation of the final state, after the workers are done: an
// invocation and an ok completion of f with value, by a process of its own. Read
// through Server.DirectDSN, so that no fault interferes: for the budget model,
// Read("read", indoubttest.Balance(n)).
func (r *Recorder) Read(f string, value any) {
	w := r.Worker()
	op := w.Invoke(f, nil)
	op.Ok(value)
}
