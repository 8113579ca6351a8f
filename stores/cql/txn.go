package cql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var _ txn.Store = (*Txns)(nil)

// maxTxnRounds bounds the compare-and-set rounds of one transaction: each lost round
// means another transaction on the key applied in between, so a transaction that
// loses this many is given up as a conflict, changing nothing.
const maxTxnRounds = 50

// Txns is the list-append or rw-register store over a Client's cluster, one partition
// a key, in the table txn (key text PRIMARY KEY, list list<bigint>, value bigint). A
// transaction touches one key (the workload's single-key transactions) and runs by
// lightweight transactions, Paxos on the key's partition:
//   - reads only: a SELECT at the serial consistency, which sees every LWT that
//     completed before it;
//   - with writes: a serial read of the key's state, then one UPDATE that sets the
//     state the transaction makes of it (the list with its appends, the last value
//     written) IF the state is still the one read; a lost round reads the state the
//     LWT answered with and tries again, counted as a conflict inside the mechanism.
//
// Each read's result is the state read with the transaction's own earlier writes
// applied. Like the other stores here, Reset starts a fresh generation of partitions.
// Get it from Client.Txns.
type Txns struct {
	c     *Client
	model workloads.Name
}

// Txns returns the store for model (workloads.ListAppend or workloads.RWRegister) over
// the same cluster and configuration.
func (c *Client) Txns(model workloads.Name) (*Txns, error) {
	if model != workloads.ListAppend && model != workloads.RWRegister {
		return nil, fmt.Errorf("cql: no transactional model %q (want list-append or rw-register)", model)
	}
	return &Txns{c: c, model: model}, nil
}

// Guarantee is what Cassandra documents for lightweight transactions: linearizable on
// one partition (serial consistency), so single-key transactions are checked for strict
// serializability. Nothing is promised across partitions, and no transaction spans
// two.
func (t *Txns) Guarantee() txn.Guarantee {
	return txn.Guarantee{
		Mechanism: "a serial read, then UPDATE ... IF the state read (a lightweight transaction a round)",
		Models:    []string{"strict-serializable"},
		Promise:   "Cassandra makes lightweight transactions on one partition linearizable (Paxos, serial consistency); nothing is promised across partitions",
		SingleKey: true,
		// One partition is one register, linearizable by the promise above, and the
		// transaction's write is conditional on its read.
		LinearizableKeys: true, SequentialKeys: true, WFRKeys: true,
	}
}

// Reset creates the schema if needed and starts a new generation of partitions, so
// every key starts absent.
func (t *Txns) Reset(ctx context.Context) error {
	if err := t.c.ensureSchema(ctx); err != nil {
		return fmt.Errorf("cql reset: %w", err)
	}
	t.c.mu.Lock()
	t.c.txns = "txn-" + generation() + "/" + string(t.model) + "/"
	t.c.mu.Unlock()
	return nil
}

func (t *Txns) partition(k int64) (string, error) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.c.txns == "" {
		return "", errors.New("cql txn: Reset was not called")
	}
	return t.c.txns + strconv.FormatInt(k, 10), nil
}

// Session opens one worker's gocql session.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) {
	s, err := t.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &txnSession{session: s, t: t}, nil
}

type txnSession struct {
	*session
	t *Txns
}

// txnState is a key's state: its list, or its register's value when found.
type txnState struct {
	list  []int64
	value int64
	found bool
}

// Txn runs t on its one key by the mechanism of Txns. A transaction of more than one
// key is refused before anything is sent.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	if len(t) == 0 {
		return t, 0, nil
	}
	keys := t.Keys()
	if len(keys) != 1 {
		return nil, 0, workloads.Definite(fmt.Errorf("cql: a transaction of %d keys; this store runs one partition a transaction", len(keys)), "multi-key")
	}
	pk, err := s.t.partition(keys[0])
	if err != nil {
		return nil, 0, workloads.Definite(err, "no-reset")
	}
	state, err := s.read(ctx, pk)
	if err != nil {
		return nil, 0, fmt.Errorf("cql txn read: %w", classifyRead(err))
	}
	if t.ReadOnly() {
		fill(t, state, s.t.model)
		return t, 0, nil
	}
	for round := 0; round < maxTxnRounds; round++ {
		after := apply(t, state)
		applied, current, err := s.cas(ctx, pk, state, after)
		if err != nil {
			// The rounds before changed nothing: the transaction's outcome is this
			// round's.
			return nil, round, fmt.Errorf("cql txn: %w", err)
		}
		if applied {
			fill(t, state, s.t.model)
			return t, round, nil
		}
		state = current
	}
	return nil, maxTxnRounds, workloads.Conflict(fmt.Errorf("cql txn: lost %d compare-and-set rounds on the key", maxTxnRounds), "cas-rounds")
}

// read returns the key's state at the serial consistency.
func (s *txnSession) read(ctx context.Context, pk string) (txnState, error) {
	var st txnState
	var list []int64
	var value *int64
	err := s.exec(ctx, func() error {
		return s.gs.Query("SELECT list, value FROM "+s.c.table("txn")+" WHERE key = ?", pk).
			WithContext(ctx).Consistency(gocql.Consistency(s.c.cfg.SerialConsistency)).Scan(&list, &value)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.list = list
	if value != nil {
		st.value, st.found = *value, true
	}
	return st, nil
}

// cas sets the key to after if it is still at before, as one lightweight transaction.
// When it is not, current is the state the LWT found.
func (s *txnSession) cas(ctx context.Context, pk string, before, after txnState) (applied bool, current txnState, err error) {
	tbl := s.c.table("txn")
	var stmt string
	var args []any
	if s.t.model == workloads.ListAppend {
		// An empty list is stored as null: a key never appended to reads as null.
		stmt = "UPDATE " + tbl + " SET list = ? WHERE key = ? IF list = ?"
		var was any
		if len(before.list) > 0 {
			was = before.list
		}
		args = []any{after.list, pk, was}
	} else {
		stmt = "UPDATE " + tbl + " SET value = ? WHERE key = ? IF value = ?"
		var was any
		if before.found {
			was = before.value
		}
		args = []any{after.value, pk, was}
	}
	row := map[string]any{}
	err = s.exec(ctx, func() error {
		var err error
		applied, err = s.gs.Query(stmt, args...).WithContext(ctx).MapScanCAS(row)
		return err
	})
	if err != nil {
		return false, txnState{}, Classify(err)
	}
	if applied {
		return true, after, nil
	}
	// The LWT answers with the current values of the columns in its condition.
	switch v := row["list"].(type) {
	case []int64:
		current.list = v
	case nil:
	default:
		return false, txnState{}, workloads.Definite(fmt.Errorf("cql txn: the LWT answered list %T", v), "garbage")
	}
	switch v := row["value"].(type) {
	case int64:
		current.value, current.found = v, true
	case *int64:
		if v != nil {
			current.value, current.found = *v, true
		}
	case nil:
	default:
		return false, txnState{}, workloads.Definite(fmt.Errorf("cql txn: the LWT answered value %T", v), "garbage")
	}
	return false, current, nil
}

// apply returns the state t makes of st.
func apply(t txn.Txn, st txnState) txnState {
	out := txnState{list: slices.Clone(st.list), value: st.value, found: st.found}
	for _, m := range t {
		switch m.F {
		case txn.Append:
			out.list = append(out.list, m.Value)
		case txn.Write:
			out.value, out.found = m.Value, true
		}
	}
	return out
}

// fill sets t's reads from st, each with t's own earlier writes applied.
func fill(t txn.Txn, st txnState, model workloads.Name) {
	list := append([]int64{}, st.list...)
	val, found := st.value, st.found
	for i := range t {
		m := &t[i]
		switch m.F {
		case txn.Append:
			list = append(list, m.Value)
		case txn.Write:
			val, found = m.Value, true
		default:
			m.Done = true
			if model == workloads.ListAppend {
				m.List = append([]int64{}, list...)
			} else {
				m.Value, m.Found = val, found
			}
		}
	}
}
