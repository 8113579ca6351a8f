package cql_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// txnsOn returns the transactional store of model on the test node, reset.
func txnsOn(t *testing.T, model workloads.Name) *cqlTxns {
	t.Helper()
	c := open(t, "txns")
	s, err := c.Txns(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return &cqlTxns{Store: s}
}

type cqlTxns struct{ txn.Store }

func (s *cqlTxns) session(t *testing.T) txn.Session {
	t.Helper()
	sess, err := s.Session(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

func runTxn(t *testing.T, ctx context.Context, s txn.Session, tx txn.Txn) txn.Txn {
	t.Helper()
	done, _, err := s.Txn(ctx, workloads.Request{}, tx)
	if err != nil {
		t.Fatalf("%s: %v", tx.AppendJSON(nil), err)
	}
	return done
}

// One session: each read sees the key as the transactions before left it, with its
// own transaction's earlier writes applied; a transaction of two keys is refused
// before anything is sent.
func TestTxnsReadTheirKey(t *testing.T) {
	ctx := testContext(t)
	la := txnsOn(t, workloads.ListAppend).session(t)
	runTxn(t, ctx, la, txn.Txn{{F: txn.Append, Key: 1, Value: 1}})
	got := runTxn(t, ctx, la, txn.Txn{{F: txn.Read, Key: 1}, {F: txn.Append, Key: 1, Value: 2}, {F: txn.Read, Key: 1}})
	if want := `[["r",1,[1]],["append",1,2],["r",1,[1,2]]]`; string(got.AppendJSON(nil)) != want {
		t.Errorf("list-append: %s, want %s", got.AppendJSON(nil), want)
	}
	got = runTxn(t, ctx, la, txn.Txn{{F: txn.Read, Key: 2}})
	if want := `[["r",2,[]]]`; string(got.AppendJSON(nil)) != want {
		t.Errorf("a key never appended to: %s, want %s", got.AppendJSON(nil), want)
	}
	if _, _, err := la.Txn(ctx, workloads.Request{}, txn.Txn{{F: txn.Append, Key: 1, Value: 3}, {F: txn.Append, Key: 2, Value: 4}}); workloads.Classify(err) != workloads.ClassDefinite {
		t.Errorf("a transaction of two keys: %v, want a definite refusal", err)
	}
	rw := txnsOn(t, workloads.RWRegister).session(t)
	got = runTxn(t, ctx, rw, txn.Txn{{F: txn.Read, Key: 1}, {F: txn.Write, Key: 1, Value: 5}, {F: txn.Read, Key: 1}})
	if want := `[["r",1,null],["w",1,5],["r",1,5]]`; string(got.AppendJSON(nil)) != want {
		t.Errorf("rw-register: %s, want %s", got.AppendJSON(nil), want)
	}
	got = runTxn(t, ctx, rw, txn.Txn{{F: txn.Write, Key: 1, Value: 6}, {F: txn.Read, Key: 1}})
	if want := `[["w",1,6],["r",1,6]]`; string(got.AppendJSON(nil)) != want {
		t.Errorf("rw-register, a read after the write: %s, want %s", got.AppendJSON(nil), want)
	}
	got = runTxn(t, ctx, rw, txn.Txn{{F: txn.Read, Key: 1}})
	if want := `[["r",1,6]]`; string(got.AppendJSON(nil)) != want {
		t.Errorf("rw-register after a write: %s, want %s", got.AppendJSON(nil), want)
	}
}

// Eight sessions race read-then-append transactions on one key: lost rounds are
// retried inside the mechanism and counted, no acknowledged append is lost, and the
// history of them is strictly serializable by the isolation checker.
func TestTxnsHotKeyStrictSerializable(t *testing.T) {
	ctx := testContext(t)
	s := txnsOn(t, workloads.ListAppend)
	const workers, each = 8, 8
	var mu sync.Mutex
	var ops []histories.Op
	record := func(p int, typ histories.Type, tx txn.Txn) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: p, Type: typ,
			F: checker.TxnFunction, Value: json.RawMessage(tx.AppendJSON(nil))})
	}
	sessions := make([]txn.Session, workers)
	for w := range sessions {
		sessions[w] = s.session(t)
	}
	var wg sync.WaitGroup
	conflicts := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tx := txn.Txn{{F: txn.Read, Key: 0}, {F: txn.Append, Key: 0, Value: int64(w*each + i + 1)}}
				record(w, histories.Invoke, tx)
				done, lost, err := sessions[w].Txn(ctx, workloads.Request{}, tx.Clone())
				mu.Lock()
				conflicts += lost
				mu.Unlock()
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					record(w, histories.Info, tx)
					return
				}
				record(w, histories.OK, done)
			}
		}()
	}
	wg.Wait()
	final := runTxn(t, ctx, sessions[0], txn.Txn{{F: txn.Read, Key: 0}})
	record(0, histories.Invoke, txn.Txn{{F: txn.Read, Key: 0}})
	record(0, histories.OK, final)
	if n := len(final[0].List); n != workers*each {
		t.Errorf("the key holds %d appends, want all %d acknowledged", n, workers*each)
	}
	sorted := slices.Sorted(slices.Values(final[0].List))
	for i, v := range sorted {
		if v != int64(i+1) {
			t.Fatalf("the key holds %v: not each appended value once", final[0].List)
		}
	}
	res, err := checker.Check(ctx, nil, ops, checker.Options{Model: checker.ListAppendModel})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.Valid {
		t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
	}
	if conflicts == 0 {
		t.Errorf("eight sessions on one key lost no compare-and-set round: the race was not run")
	}
	t.Logf("%s; %d rounds lost and tried again", res.Summary, conflicts)
}
