package isolation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// table is the scenarios' table, apart from the workloads' own.
const table = "indoubt_hermitage"

// StepResult is one statement of a scenario as it ran.
type StepResult struct {
	// Session is T1, T2 or T3's number.
	Session int    `json:"session"`
	SQL     string `json:"sql"`
	// Result is what the statement returned: rows as (id, value), a value, or a
	// command tag.
	Result string `json:"result,omitempty"`
	// Blocked says the statement waited on another session's lock (the server's
	// pg_blocking_pids named one) before it completed.
	Blocked bool `json:"blocked,omitempty"`
	// SQLState and Error are the server's error, when the statement failed.
	SQLState string `json:"sqlstate,omitempty"`
	Error    string `json:"error,omitempty"`
	// Skipped says the statement was not sent: its transaction had already failed.
	Skipped bool `json:"skipped,omitempty"`
	// Deferred says the statement was sent after steps that follow it in the script:
	// its session's previous statement was still waiting on a lock.
	Deferred bool `json:"deferred,omitempty"`
}

func (s StepResult) String() string {
	b := fmt.Sprintf("T%d %s", s.Session, s.SQL)
	switch {
	case s.Skipped:
		return b + "  (not sent: the transaction had failed)"
	case s.Error != "":
		b += "  -> ERROR " + s.SQLState + ": " + s.Error
	default:
		b += "  -> " + s.Result
	}
	if s.Blocked {
		b += "  (blocked first)"
	}
	if s.Deferred {
		b += "  (sent after the steps below it: its session was waiting on a lock)"
	}
	return b
}

// sessionState is one session of a running scenario.
type sessionState struct {
	n       int
	conn    conn
	began   bool
	failed  bool
	mops    []any
	pending *pending
}

// pending is a statement that has not completed yet.
type pending struct {
	idx  int // into the steps
	done chan stmtResult
}

type stmtResult struct {
	text string
	mops []any
	err  error
	tag  string
}

// driver runs one scenario at one level.
type driver struct {
	sc     scenario
	level  Level
	db     dialect
	admin  conn
	sess   []*sessionState
	steps  []StepResult
	ops    []histories.Op
	start  time.Time
	owner  map[int64]int // completion index -> session (0 the initial transaction)
	invIdx map[int]int   // session -> its invocation's index in ops
	err    error         // the first statement that failed other than by the level
}

// blockPoll is how often a statement in flight is looked at: completed, or waiting on
// a lock.
const blockPoll = 20 * time.Millisecond

func (d *driver) event(proc int, t histories.Type, mops []any, errText string) int64 {
	v, _ := json.Marshal(mops)
	idx := int64(len(d.ops))
	d.ops = append(d.ops, histories.Op{Index: idx, Time: int64(time.Since(d.start)), Process: proc, Type: t, F: checker.TxnFunction, Value: v, Error: errText})
	return idx
}

// runScenarioOn drives sc at level on db's server and judges the transactions.
func runScenarioOn(ctx context.Context, db dialect, sc scenario, level Level) (cell Cell, err error) {
	if err := sc.validate(); err != nil {
		return Cell{}, err
	}
	d := &driver{sc: sc, level: level, db: db, start: time.Now(), owner: map[int64]int{}, invIdx: map[int]int{}}
	d.admin, err = db.connect(ctx)
	if err != nil {
		return Cell{}, fmt.Errorf("connect: %w", err)
	}
	defer d.admin.close()
	if err := d.admin.prepare(ctx); err != nil {
		return Cell{}, fmt.Errorf("prepare the table: %w", err)
	}
	initial := []any{[]any{"append", 1, 10}, []any{"append", 2, 20}}
	d.event(0, histories.Invoke, initial, "")
	if err := d.admin.seed(ctx); err != nil {
		return Cell{}, fmt.Errorf("write the initial rows: %w", err)
	}
	d.owner[d.event(0, histories.OK, initial, "")] = 0

	for i := 1; i <= sc.sessions(); i++ {
		c, err := db.connect(ctx)
		if err != nil {
			return Cell{}, fmt.Errorf("connect session %d: %w", i, err)
		}
		defer c.close()
		// No statement of a scenario may hang the run: a lock wait the script does not
		// end is cut by the server.
		if err := c.limit(ctx); err != nil {
			return Cell{}, fmt.Errorf("session %d: %w", i, err)
		}
		d.sess = append(d.sess, &sessionState{n: i, conn: c})
	}
	defer func() {
		// A statement still in flight (an error cut the scenario short) ends with its
		// connection, which the deferred close ends; wait for it so nothing outlives Run.
		for _, s := range d.sess {
			if s.pending != nil {
				s.conn.cancel(d.admin)
				<-s.pending.done
			}
		}
	}()

	d.steps = make([]StepResult, len(sc.steps))
	// A step of a session whose statement still waits on a lock is deferred, as a
	// person running the script by hand would: the other sessions' steps go on, and the
	// deferred ones run, in order, once the session's statement completes. PostgreSQL's
	// reads never wait, so its scenarios never defer; MySQL's SERIALIZABLE reads take
	// shared locks, and do.
	deferred := map[*sessionState][]int{}
	drain := func() error {
		for progress := true; progress; {
			progress = false
			for _, o := range d.sess {
				if len(deferred[o]) == 0 {
					continue
				}
				if o.pending != nil {
					if err := d.settle(ctx, o, false); err != nil {
						return err
					}
				}
				if o.pending == nil {
					i := deferred[o][0]
					deferred[o] = deferred[o][1:]
					d.steps[i].Deferred = true
					if err := d.step(ctx, i); err != nil {
						return err
					}
					progress = true
				}
			}
		}
		return nil
	}
	for i, st := range sc.steps {
		s := d.sess[st.s-1]
		if s.pending != nil {
			if err := d.settle(ctx, s, false); err != nil {
				return Cell{}, err
			}
		}
		if s.pending != nil || len(deferred[s]) > 0 {
			deferred[s] = append(deferred[s], i)
			continue
		}
		if err := d.step(ctx, i); err != nil {
			return Cell{}, err
		}
		if err := drain(); err != nil {
			return Cell{}, err
		}
	}
	for _, s := range d.sess {
		for s.pending != nil || len(deferred[s]) > 0 {
			if s.pending != nil {
				if err := d.settle(ctx, s, true); err != nil {
					return Cell{}, err
				}
			}
			if err := drain(); err != nil {
				return Cell{}, err
			}
		}
	}
	if d.err != nil {
		return Cell{}, d.err
	}
	if err := d.final(ctx); err != nil {
		return Cell{}, err
	}
	return d.judge(ctx)
}

// step runs the scenario's step i: it sends the statement and waits until it completes
// or waits on a lock, then lets the statements it released complete.
func (d *driver) step(ctx context.Context, i int) error {
	st := d.sc.steps[i]
	s := d.sess[st.s-1]
	deferred := d.steps[i].Deferred
	d.steps[i] = StepResult{Session: st.s, SQL: d.db.show(st), Deferred: deferred}
	if s.failed && st.op != opCommit && st.op != opAbort {
		d.steps[i].Skipped = true
		return nil
	}
	if !s.began {
		if err := s.conn.begin(ctx, d.level); err != nil {
			return fmt.Errorf("T%d begin: %w", st.s, err)
		}
		s.began = true
		d.invIdx[s.n] = int(d.event(s.n, histories.Invoke, nil, ""))
	}
	p := &pending{idx: i, done: make(chan stmtResult, 1)}
	s.pending = p
	go func() { p.done <- d.exec(ctx, s, st) }()
	if err := d.settle(ctx, s, false); err != nil {
		return err
	}
	// What this step released (a commit, an abort) lets blocked statements go on:
	// let them complete, or see them wait again, before the next step.
	for _, o := range d.sess {
		if o != s && o.pending != nil {
			if err := d.settle(ctx, o, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// settle waits for s's statement in flight until it completes or, unless wait, until
// the server shows it waiting on a lock (twice in a row, so that a waiter just woken is
// not taken for a blocked one).
func (d *driver) settle(ctx context.Context, s *sessionState, wait bool) error {
	p := s.pending
	deadline := time.Now().Add(40 * time.Second)
	seen := 0
	for {
		select {
		case res := <-p.done:
			s.pending = nil
			d.complete(s, p.idx, res)
			return nil
		case <-time.After(blockPoll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("T%d's %s neither completed nor waited on a lock within 40 s", s.n, d.steps[p.idx].SQL)
		}
		if wait {
			continue
		}
		blocked, err := d.admin.waiting(ctx, s.conn.id())
		if err != nil {
			return fmt.Errorf("look at T%d's locks: %w", s.n, err)
		}
		if !blocked {
			seen = 0
			continue
		}
		d.steps[p.idx].Blocked = true
		if seen++; seen >= 2 {
			return nil
		}
	}
}

// exec runs one statement of s (in a goroutine of its own: it may block).
func (d *driver) exec(ctx context.Context, s *sessionState, st step) stmtResult {
	switch st.op {
	case opRead:
		vs, found, err := s.conn.read(ctx, st.key)
		if err != nil {
			return stmtResult{err: err}
		}
		if !found {
			return stmtResult{text: "no row", mops: []any{[]any{"r", st.key, []int{}}}}
		}
		return stmtResult{text: fmt.Sprintf("%d (versions %v)", vs[len(vs)-1], vs), mops: []any{[]any{"r", st.key, vs}}}
	case opWrite, opInsert:
		tag, n, err := s.conn.write(ctx, st.op == opInsert, st.key, st.value)
		if err != nil {
			return stmtResult{err: err}
		}
		if n != 1 {
			return stmtResult{err: fmt.Errorf("%s changed %d rows, want 1", tag, n)}
		}
		return stmtResult{text: tag, mops: []any{[]any{"append", st.key, st.value}}}
	case opPred:
		got, err := s.conn.predicate(ctx, st.pred)
		if err != nil {
			return stmtResult{err: err}
		}
		var mops []any
		var parts []string
		ids := make([]int, 0, len(got))
		for id := range got {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			vs := got[id]
			mops = append(mops, []any{"r", id, vs})
			parts = append(parts, fmt.Sprintf("(%d, %d, %v)", id, vs[len(vs)-1], vs))
		}
		for _, k := range st.absent {
			if _, ok := got[k]; !ok {
				mops = append(mops, []any{"r", k, []int{}})
			}
		}
		text := "no rows"
		if len(parts) > 0 {
			text = strings.Join(parts, " ")
		}
		return stmtResult{text: text, mops: mops}
	default:
		tag, err := s.conn.end(ctx, st.op == opCommit && !s.failed)
		if err != nil {
			return stmtResult{err: err}
		}
		return stmtResult{text: tag, tag: tag}
	}
}

// complete records a statement's result, and a transaction's end in the history.
func (d *driver) complete(s *sessionState, idx int, res stmtResult) {
	sr := &d.steps[idx]
	st := d.sc.steps[idx]
	if res.err != nil {
		sr.Error = res.err.Error()
		if code, msg := d.db.state(res.err); code != "" {
			sr.SQLState, sr.Error = code, msg
		}
	} else {
		sr.Result = res.text
		s.mops = append(s.mops, res.mops...)
	}
	if res.err != nil && !strings.HasPrefix(sr.SQLState, "40") && d.err == nil {
		// Only a transaction rollback (class 40: serialization failure, deadlock) is
		// the level's doing; anything else means the scenario did not run as written.
		d.err = fmt.Errorf("T%d's %s failed: %w", s.n, sr.SQL, res.err)
	}
	switch {
	case st.op == opCommit || st.op == opAbort:
		typ := histories.OK
		errText := ""
		if st.op == opAbort || s.failed || res.err != nil || res.tag != "COMMIT" {
			typ = histories.Fail
			errText = sr.Error
			if errText == "" {
				errText = res.tag
			}
		}
		mops := s.mops
		if mops == nil {
			mops = []any{}
		}
		d.ops[d.invIdx[s.n]].Value, _ = json.Marshal(invocation(mops))
		d.owner[d.event(s.n, typ, mops, errText)] = s.n
		s.began, s.failed, s.mops = false, false, nil
	case res.err != nil:
		s.failed = true
	}
}

// invocation is a transaction's micro-ops with its reads' results unknown.
func invocation(mops []any) []any {
	out := make([]any, len(mops))
	for i, m := range mops {
		mm := slices.Clone(m.([]any))
		if mm[0] == "r" {
			mm[2] = nil
		}
		out[i] = mm
	}
	return out
}

// final reads every key after the scenario, in a transaction of its own.
func (d *driver) final(ctx context.Context) error {
	keys := []any{[]any{"r", 1, nil}, []any{"r", 2, nil}, []any{"r", 3, nil}, []any{"r", 4, nil}}
	d.event(99, histories.Invoke, keys, "")
	got, err := d.admin.predicate(ctx, "id BETWEEN 1 AND 4")
	if err != nil {
		return fmt.Errorf("final read: %w", err)
	}
	var mops []any
	for k := 1; k <= 4; k++ {
		if v, ok := got[k]; ok {
			mops = append(mops, []any{"r", k, v})
		} else {
			mops = append(mops, []any{"r", k, []int{}})
		}
	}
	d.owner[d.event(99, histories.OK, mops, "")] = 99
	return nil
}

// dialect is one database family's client for the scenarios: its connections, the
// text of its statements, its errors, and Hermitage's table for it.
type dialect interface {
	// family names the database in findings: "PostgreSQL", "MySQL".
	family() string
	connect(ctx context.Context) (conn, error)
	// show is the statement a step runs, as the cell lists it.
	show(st step) string
	// state returns the code (SQLSTATE) and message of an error the server answered
	// with, "" when the server did not answer.
	state(err error) (code, msg string)
	// hermitage returns the levels at which Hermitage's table for the family lets the
	// scenario's anomaly happen.
	hermitage(sc scenario) []Level
}

// conn is one connection of a scenario: a session's, or the admin connection that
// prepares the table, watches the sessions' locks and reads the final state. Its
// methods run one statement each.
type conn interface {
	// prepare creates the table if need be and empties it; seed writes (1, 10) and (2, 20).
	prepare(ctx context.Context) error
	seed(ctx context.Context) error
	// limit bounds the time any statement of the session may take.
	limit(ctx context.Context) error
	begin(ctx context.Context, l Level) error
	// read returns a key's versions, oldest first; found is false for no row.
	read(ctx context.Context, key int) (versions []int, found bool, err error)
	// write updates a row (or inserts it) to value, appending value to its versions,
	// and returns the server's tag and the rows changed.
	write(ctx context.Context, insert bool, key, value int) (tag string, n int64, err error)
	// predicate returns the versions of the rows where holds, by key.
	predicate(ctx context.Context, where string) (map[int][]int, error)
	// end commits (or rolls back) the transaction and returns the server's tag:
	// "COMMIT" only for a commit that took.
	end(ctx context.Context, commit bool) (tag string, err error)
	// id is the server's id of the connection; waiting, asked of the admin
	// connection, reports whether the connection id waits on another's lock.
	id() int64
	waiting(ctx context.Context, id int64) (bool, error)
	// cancel stops the statement in flight, through admin if need be.
	cancel(admin conn)
	close()
}

// stepSQL is the statement a step runs, as PostgreSQL's table has it (versions an array).
func stepSQL(st step) string {
	switch st.op {
	case opRead:
		return fmt.Sprintf("SELECT value, versions FROM "+table+" WHERE id = %d", st.key)
	case opWrite:
		return fmt.Sprintf("UPDATE "+table+" SET value = %[1]d, versions = versions || %[1]d WHERE id = %[2]d", st.value, st.key)
	case opInsert:
		return fmt.Sprintf("INSERT INTO "+table+" VALUES (%d, %[2]d, ARRAY[%[2]d])", st.key, st.value)
	case opPred:
		return "SELECT * FROM " + table + " WHERE " + st.pred
	case opCommit:
		return "COMMIT"
	default:
		return "ROLLBACK"
	}
}
