package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
	"github.com/indoubt/indoubt/internal/results"
)

// The tests of this file hold the explanation of explicit transactions to their proof
// (issue 41): a transfer done as BEGIN; UPDATE; UPDATE; INSERT; COMMIT, whose cut COMMIT
// the proxy proves by the tags its statements answered.

const transferSchema = `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
	INSERT INTO accounts VALUES (1, 1000), (2, 1000);
	CREATE TABLE transfers (op_id text NOT NULL);`

// naiveTransfer moves 5 from account 1 to 2 and logs the transfer, in one explicit
// transaction, with no idempotency key: a retry after a cut COMMIT transfers again.
func naiveTransfer(proxied *pgxpool.Pool) func(ctx context.Context, key string) (any, error) {
	return func(ctx context.Context, key string) (any, error) {
		return nil, pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			for _, q := range []string{
				`UPDATE accounts SET balance = balance - 5 WHERE id = 1`,
				`UPDATE accounts SET balance = balance + 5 WHERE id = 2`,
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO transfers (op_id) VALUES ($1)`, key)
			return err
		})
	}
}

// idempotentTransfer logs the transfer first under its op id and moves the money only
// when the log took the row: a retry after a cut COMMIT finds the row ("INSERT 0 0")
// and changes nothing.
func idempotentTransfer(proxied *pgxpool.Pool) func(ctx context.Context, key string) (any, error) {
	return func(ctx context.Context, key string) (any, error) {
		replayed := false
		err := pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO transfers (op_id) VALUES ($1) ON CONFLICT (op_id) DO NOTHING`, key)
			if err != nil {
				return err
			}
			if replayed = tag.RowsAffected() == 0; replayed {
				return nil
			}
			for _, q := range []string{
				`UPDATE accounts SET balance = balance - 5 WHERE id = 1`,
				`UPDATE accounts SET balance = balance + 5 WHERE id = 2`,
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		})
		return map[string]bool{"replayed": replayed}, err
	}
}

// measure logs the counts issue 41 asks for: operations named applied more than once,
// cuts the proxy proves changed rows, operations duplicated in the final state, and
// operations named replays.
func measure(t *testing.T, rep *indoubttest.Report, final checker.ExactlyOnceState) *results.Results {
	t.Helper()
	r := runResults(t, rep.RunDir)
	dups := 0
	for _, n := range final {
		if n >= 2 {
			dups++
		}
	}
	var c results.CommitCounts
	if r.Faults.Commits != nil {
		c = *r.Faults.Commits
	}
	t.Logf("measure: %d named applied more than once, %d cuts proven by the proxy to have changed rows (%d changed nothing, %d unseen), %d duplicated in the final state, %d named replays, %d committed and not proven",
		r.Evidence.AppliedTwiceTotal(), c.ChangedRows, c.Unchanged, c.EffectUnseen, dups, r.Evidence.ReplaysTotal(), r.Evidence.CommittedTwiceTotal())
	return r
}

// A naive retry around an explicit BEGIN ... COMMIT transfer under commit cuts: the
// explanation says "took effect N times" for exactly the operations the final state
// shows duplicated, N being the final state's count, with the statement tags of the cut
// transaction as proof, in the failure message, results.json and `indoubt check
// --faults` of the run directory alike (Evaluate judges the directory it wrote).
func TestExplicitTransferTookEffectTwice(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, transferSchema)
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	applyAll(rec, 2, 10, naiveTransfer(proxied))
	srv.Disarm()
	final := finalCounts(t, direct, `SELECT op_id, count(*) FROM transfers GROUP BY op_id`)
	rec.Read("read", final)
	rep := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
	forget(t, rep.RunDir)
	if rep.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid: a naive retry of 20 transfers under commit-cut:0.3:\n%s", rep.Verdict, rep.Text)
	}
	r := measure(t, rep, final)
	named := map[string]int{}
	for _, c := range rep.Claims {
		if c.Kind == indoubttest.ClaimApplied {
			named[c.Op] = c.Times
			if !strings.Contains(c.Sentence, "COMMIT after UPDATE 1, UPDATE 1, INSERT 0 1") {
				t.Errorf("%s: the sentence does not give the statement tags as proof: %s", c.Op, c.Sentence)
			}
		}
	}
	for id, n := range final {
		if n >= 2 && named[id] != int(n) {
			t.Errorf("%s is %d times in the final state; the explanation says %d times", id, n, named[id])
		}
	}
	for id, n := range named {
		if final[id] != int64(n) {
			t.Errorf("the explanation says %s took effect %d times; the final state holds it %d times", id, n, final[id])
		}
	}
	for _, a := range r.Evidence.AppliedTwice {
		if a.Proof != results.ProofFinalState || named[a.OpID] != a.Times {
			t.Errorf("results.json: %s applied %d times by %q; the claims say %d", a.OpID, a.Times, a.Proof, named[a.OpID])
		}
	}
	if len(named) == 0 {
		t.Fatalf("no transfer applied twice under commit-cut:0.3 over 20: the case is not exercised\n%s", rep.Text)
	}
	if r.Faults.Commits == nil || r.Faults.Commits.EffectUnseen != 0 {
		t.Errorf("commits %+v: every cut COMMIT of a transfer is proven by its tags", r.Faults.Commits)
	}
	b, err := os.ReadFile(filepath.Join(rep.RunDir, "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tags":["UPDATE 1","UPDATE 1","INSERT 0 1"],"changed":true`) {
		t.Errorf("faults.jsonl does not carry the statement tags:\n%s", b)
	}
}

// A cut replay whose write changed nothing is never called applied: idempotent transfers
// under heavy cuts, so that replays are cut too. Their events say the commit changed
// nothing (wrote false), their sentences say so, and every transfer is in the final
// state once.
func TestExplicitReplayIsNeverApplied(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, transferSchema+`ALTER TABLE transfers ADD PRIMARY KEY (op_id);`)
	srv.Arm("commit-cut:0.5")
	rec := indoubttest.NewRecorder(t, srv)
	applyAll(rec, 2, 10, idempotentTransfer(proxied))
	srv.Disarm()
	final := finalCounts(t, direct, `SELECT op_id, count(*) FROM transfers GROUP BY op_id`)
	rec.Read("read", final)
	rep := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
	forget(t, rep.RunDir)
	r := measure(t, rep, final)
	for _, c := range rep.Claims {
		if c.Kind == indoubttest.ClaimApplied {
			t.Errorf("%s called applied: %s", c.Op, c.Sentence)
		}
	}
	replayCuts := 0
	for _, e := range srv.Events() {
		if e.Txn != nil && len(e.Txn.Tags) == 1 && e.Txn.Tags[0] == "INSERT 0 0" {
			replayCuts++
			if e.Txn.Wrote || e.Txn.Changed == nil || *e.Txn.Changed {
				t.Errorf("a replay's cut is marked as writing: %+v", *e.Txn)
			}
		}
	}
	unchanged := 0
	for _, a := range r.Evidence.Ambiguous {
		if strings.Contains(a.Sentence, "INSERT 0 0") {
			unchanged++
			if !strings.Contains(a.Sentence, "whose writes changed nothing") {
				t.Errorf("a replay's cut reads %q", a.Sentence)
			}
		}
	}
	if replayCuts == 0 || unchanged == 0 {
		t.Fatalf("no replay was cut under commit-cut:0.5 over 20 transfers (%d events): the case is not exercised\n%s", rep.Faults, rep.Text)
	}
	if rep.Verdict != checker.Valid {
		t.Errorf("verdict %v, want valid:\n%s", rep.Verdict, rep.Text)
	}
}

// The same naive transfer judged by the bank model, whose final state is the balances:
// it holds no op id, so the proof must come from the proxy. The code records what its
// acknowledged attempt's statements answered ({"applied": true} when each changed a
// row); each cut COMMIT's tags prove that attempt changed rows too. The explanation
// then says "took effect N times" for exactly the transfers the log table (which the
// checker never sees) holds more than once, N being its count.
func TestExplicitTransferProvenByTheProxy(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, transferSchema)
	transfer := func(ctx context.Context, key string) (bool, error) {
		applied := true
		err := pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			for _, q := range []string{
				`UPDATE accounts SET balance = balance - 5 WHERE id = 1`,
				`UPDATE accounts SET balance = balance + 5 WHERE id = 2`,
			} {
				tag, err := tx.Exec(ctx, q)
				if err != nil {
					return err
				}
				applied = applied && tag.RowsAffected() == 1
			}
			_, err := tx.Exec(ctx, `INSERT INTO transfers (op_id) VALUES ($1)`, key)
			return err
		})
		return applied, err
	}
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	for range 15 {
		op := w.Invoke("transfer", checker.Transfer{From: "1", To: "2", Amount: 5})
		ctx := withOp(context.Background(), op)
		var applied bool
		var err error
		for i := range 5 {
			if applied, err = transfer(ctx, op.ID()); err == nil || i == 4 {
				break
			}
			op.Retried(err)
		}
		op.Done(map[string]bool{"applied": applied}, err)
	}
	srv.Disarm()
	log := finalCounts(t, direct, `SELECT op_id, count(*) FROM transfers GROUP BY op_id`)
	var b1, b2 int64
	if err := direct.QueryRow(context.Background(), `SELECT (SELECT balance FROM accounts WHERE id = 1), (SELECT balance FROM accounts WHERE id = 2)`).Scan(&b1, &b2); err != nil {
		t.Fatal(err)
	}
	rec.Read("read", checker.Balances{"1": b1, "2": b2})
	rep := indoubttest.Evaluate(t, rec, indoubttest.Bank(checker.BankParams{Accounts: checker.Balances{"1": 1000, "2": 1000}}))
	forget(t, rep.RunDir)
	r := measure(t, rep, log)
	if rep.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid: a naive retry of 15 transfers under commit-cut:0.3:\n%s", rep.Verdict, rep.Text)
	}
	named := map[string]int{}
	for _, a := range r.Evidence.AppliedTwice {
		named[a.OpID] = a.Times
		if a.Proof != results.ProofProxy || !strings.Contains(a.Sentence, "COMMIT after UPDATE 1, UPDATE 1, INSERT 0 1") || strings.Contains(a.Sentence, "at least") {
			t.Errorf("%s: %q, proof %q: want an exact count proven by the proxy with the statement tags", a.OpID, a.Sentence, a.Proof)
		}
	}
	dups := 0
	for id, n := range log {
		if n >= 2 {
			dups++
		}
		if n >= 2 && named[id] != int(n) || n < 2 && named[id] != 0 {
			t.Errorf("%s is %d times in the transfer log; the explanation says %d times", id, n, named[id])
		}
	}
	if dups == 0 {
		t.Fatalf("no transfer applied twice: the case is not exercised\n%s", rep.Text)
	}
	if len(r.Evidence.CommittedTwice) != 0 {
		t.Errorf("committed, not proven: %+v", r.Evidence.CommittedTwice)
	}
}
