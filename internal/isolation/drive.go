package isolation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	return b
}

// sessionState is one session of a running scenario.
type sessionState struct {
	n       int
	conn    *pgx.Conn
	pid     uint32
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
	admin  *pgx.Conn
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

// runScenario drives sc at level on the server dsn names and judges the transactions.
func runScenario(ctx context.Context, dsn string, sc scenario, level Level) (cell Cell, err error) {
	if err := sc.validate(); err != nil {
		return Cell{}, err
	}
	d := &driver{sc: sc, level: level, start: time.Now(), owner: map[int64]int{}, invIdx: map[int]int{}}
	d.admin, err = pgx.Connect(ctx, dsn)
	if err != nil {
		return Cell{}, fmt.Errorf("connect: %w", err)
	}
	defer d.admin.Close(context.Background())
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id int PRIMARY KEY, value int NOT NULL, versions int[] NOT NULL)",
		"TRUNCATE " + table,
	} {
		if _, err := d.admin.Exec(ctx, q); err != nil {
			return Cell{}, fmt.Errorf("prepare the table: %w", err)
		}
	}
	initial := []any{[]any{"append", 1, 10}, []any{"append", 2, 20}}
	d.event(0, histories.Invoke, initial, "")
	if _, err := d.admin.Exec(ctx, "INSERT INTO "+table+" (id, value, versions) VALUES (1, 10, ARRAY[10]), (2, 20, ARRAY[20])"); err != nil {
		return Cell{}, fmt.Errorf("write the initial rows: %w", err)
	}
	d.owner[d.event(0, histories.OK, initial, "")] = 0

	for i := 1; i <= sc.sessions(); i++ {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return Cell{}, fmt.Errorf("connect session %d: %w", i, err)
		}
		defer c.Close(context.Background())
		// No statement of a scenario may hang the run: a lock wait the script does not
		// end is cut by the server.
		if _, err := c.Exec(ctx, "SET statement_timeout = '30s'"); err != nil {
			return Cell{}, fmt.Errorf("session %d: %w", i, err)
		}
		d.sess = append(d.sess, &sessionState{n: i, conn: c, pid: c.PgConn().PID()})
	}
	defer func() {
		// A statement still in flight (an error cut the scenario short) ends with its
		// connection, which the deferred Close ends; wait for it so nothing outlives Run.
		for _, s := range d.sess {
			if s.pending != nil {
				s.conn.PgConn().CancelRequest(context.Background())
				<-s.pending.done
			}
		}
	}()

	for i, st := range sc.steps {
		s := d.sess[st.s-1]
		if s.pending != nil {
			if err := d.settle(ctx, s, true); err != nil {
				return Cell{}, err
			}
		}
		d.steps = append(d.steps, StepResult{Session: st.s, SQL: stepSQL(st)})
		if s.failed && st.op != opCommit && st.op != opAbort {
			d.steps[i].Skipped = true
			continue
		}
		if !s.began {
			if _, err := s.conn.Exec(ctx, "BEGIN ISOLATION LEVEL "+level.sql()); err != nil {
				return Cell{}, fmt.Errorf("T%d begin: %w", st.s, err)
			}
			s.began = true
			d.invIdx[s.n] = int(d.event(s.n, histories.Invoke, nil, ""))
		}
		p := &pending{idx: i, done: make(chan stmtResult, 1)}
		s.pending = p
		go func() { p.done <- d.exec(ctx, s, st) }()
		if err := d.settle(ctx, s, false); err != nil {
			return Cell{}, err
		}
		// What this step released (a commit, an abort) lets blocked statements go on:
		// let them complete, or see them wait again, before the next step.
		for _, o := range d.sess {
			if o != s && o.pending != nil {
				if err := d.settle(ctx, o, false); err != nil {
					return Cell{}, err
				}
			}
		}
	}
	for _, s := range d.sess {
		if s.pending != nil {
			if err := d.settle(ctx, s, true); err != nil {
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
		var blocked bool
		if err := d.admin.QueryRow(ctx, "SELECT cardinality(pg_blocking_pids($1)) > 0", int(s.pid)).Scan(&blocked); err != nil {
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
		var v int
		var vs []int
		err := s.conn.QueryRow(ctx, "SELECT value, versions FROM "+table+" WHERE id = $1", st.key).Scan(&v, &vs)
		if errors.Is(err, pgx.ErrNoRows) {
			return stmtResult{text: "no row", mops: []any{[]any{"r", st.key, []int{}}}}
		}
		if err != nil {
			return stmtResult{err: err}
		}
		return stmtResult{text: fmt.Sprintf("%d (versions %v)", v, vs), mops: []any{[]any{"r", st.key, vs}}}
	case opWrite, opInsert:
		q, args := "UPDATE "+table+" SET value = $2::int, versions = versions || $2::int WHERE id = $1", []any{st.key, st.value}
		if st.op == opInsert {
			q = "INSERT INTO " + table + " (id, value, versions) VALUES ($1, $2, ARRAY[$2::int])"
		}
		tag, err := s.conn.Exec(ctx, q, args...)
		if err != nil {
			return stmtResult{err: err}
		}
		if tag.RowsAffected() != 1 {
			return stmtResult{err: fmt.Errorf("%s changed %d rows, want 1", tag, tag.RowsAffected())}
		}
		return stmtResult{text: tag.String(), mops: []any{[]any{"append", st.key, st.value}}}
	case opPred:
		rows, err := s.conn.Query(ctx, "SELECT id, value, versions FROM "+table+" WHERE "+st.pred+" ORDER BY id")
		if err != nil {
			return stmtResult{err: err}
		}
		got := map[int][]int{}
		var parts []string
		for rows.Next() {
			var id, v int
			var vs []int
			if err := rows.Scan(&id, &v, &vs); err != nil {
				rows.Close()
				return stmtResult{err: err}
			}
			got[id] = vs
			parts = append(parts, fmt.Sprintf("(%d, %d, %v)", id, v, vs))
		}
		if err := rows.Err(); err != nil {
			return stmtResult{err: err}
		}
		var mops []any
		ids := make([]int, 0, len(got))
		for id := range got {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			mops = append(mops, []any{"r", id, got[id]})
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
		q := "COMMIT"
		if st.op == opAbort || s.failed {
			q = "ROLLBACK"
		}
		tag, err := s.conn.Exec(ctx, q)
		if err != nil {
			return stmtResult{err: err}
		}
		return stmtResult{text: tag.String(), tag: tag.String()}
	}
}

// complete records a statement's result, and a transaction's end in the history.
func (d *driver) complete(s *sessionState, idx int, res stmtResult) {
	sr := &d.steps[idx]
	st := d.sc.steps[idx]
	if res.err != nil {
		sr.Error = res.err.Error()
		var pe *pgconn.PgError
		if errors.As(res.err, &pe) {
			sr.SQLState, sr.Error = pe.Code, pe.Message
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
	rows, err := d.admin.Query(ctx, "SELECT id, versions FROM "+table+" WHERE id BETWEEN 1 AND 4")
	if err != nil {
		return fmt.Errorf("final read: %w", err)
	}
	got := map[int][]int{}
	for rows.Next() {
		var id int
		var v []int
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return fmt.Errorf("final read: %w", err)
		}
		got[id] = v
	}
	if err := rows.Err(); err != nil {
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
