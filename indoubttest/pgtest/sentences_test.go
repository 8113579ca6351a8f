package pgtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
	"github.com/indoubt/indoubt/internal/results"
)

// The tests of this file hold each sentence template of the explanation to its proof
// (issue 24): on a real PostgreSQL behind the proxy, with the code's connections named
// (opTracer), through the failure message, results.json and report.html.

type opKey struct{}

// withOp carries the operation in ctx, for opTracer.
func withOp(ctx context.Context, op *indoubttest.Op) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// opTracer names, on the operation ctx carries, the connection each statement uses:
// what a test of pgx code writes so that faults join attempts by connection.
type opTracer struct{}

func (opTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if op, ok := ctx.Value(opKey{}).(*indoubttest.Op); ok {
		op.Conn(c.PgConn().Conn().LocalAddr().String())
	}
	return ctx
}

func (opTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// pools opens the pool through the proxy, with opTracer, and the direct one.
func pools(t *testing.T, srv *indoubttest.Server, schema string) (proxied, direct *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	open := func(dsn string, tracer pgx.QueryTracer) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Tracer = tracer
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	direct = open(srv.DirectDSN, nil)
	if _, err := direct.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	return open(srv.DSN, opTracer{}), direct
}

// applyAll runs workers goroutines of n operations each: apply until it succeeds, 5
// attempts at most, each failure reported with Retried; value makes the ok value.
func applyAll(rec *indoubttest.Recorder, workers, n int, apply func(ctx context.Context, key string) (any, error)) {
	var wg sync.WaitGroup
	for range workers {
		w := rec.Worker()
		wg.Go(func() {
			for range n {
				op := w.Invoke("apply", nil)
				ctx, cancel := context.WithTimeout(withOp(context.Background(), op), 20*time.Second)
				var v any
				var err error
				for i := range 5 {
					if v, err = apply(ctx, op.ID()); err == nil || i == 4 {
						break
					}
					op.Retried(err)
				}
				cancel()
				op.Done(v, err)
			}
		})
	}
	wg.Wait()
}

// finalCounts reads the exactly-once final state: how many times each key is present.
func finalCounts(t *testing.T, direct *pgxpool.Pool, query string) checker.ExactlyOnceState {
	t.Helper()
	st := checker.ExactlyOnceState{}
	rows, err := direct.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		st[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return st
}

// forget removes the run directory a captured failure kept, unless INDOUBT_OUT asks
// to keep it.
func forget(t *testing.T, dir string) {
	if os.Getenv("INDOUBT_OUT") == "" {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
}

// validResults holds results.json to schemas/results.schema.json.
func validResults(t *testing.T, dir string) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "schemas", "results.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("results.json does not follow the schema: %v", err)
	}
}

// runResults reads results.json back.
func runResults(t *testing.T, dir string) *results.Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

var (
	// consoleTimes finds the operations a console line says took effect N >= 2 times.
	consoleTimes = regexp.MustCompile(`operation (\S+) .*(?:took effect (?:at least )?(\d+) times|present (\d+) times in the final state)`)
	// pageTimes finds the count report.html's headline gives.
	pageTimes = regexp.MustCompile(`the proxy proves (\d+) operations? took effect more than once`)
)

// An operation of three transactions (a read-only check of the idempotency table;
// insert the order; record the request), retried whole after any error, under
// commit-cut:0.2: the explanation never calls more operations applied more than once
// than the checker finds duplicates, in the failure message, results.json or
// report.html, and each "N times" is the final state's count.
func TestThreeTransactionsNeverOverClaim(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, `CREATE TABLE idem (key text PRIMARY KEY, order_id bigint);
		CREATE TABLE orders (id bigserial PRIMARY KEY, key text NOT NULL);`)
	place := func(ctx context.Context, key string) (any, error) {
		var id int64
		err := pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT order_id FROM idem WHERE key = $1`, key).Scan(&id)
		})
		if err == nil {
			return map[string]any{"order": id, "replayed": true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		if err := pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `INSERT INTO orders (key) VALUES ($1) RETURNING id`, key).Scan(&id)
		}); err != nil {
			return nil, err
		}
		return map[string]any{"order": id}, pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO idem (key, order_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, id)
			return err
		})
	}
	srv.Arm("commit-cut:0.2")
	c := &capture{TB: t}
	rec := indoubttest.NewRecorder(c, srv)
	applyAll(rec, 4, 25, place)
	srv.Disarm()
	final := finalCounts(t, direct, `SELECT key, count(*) FROM orders GROUP BY key`)
	rec.Read("read", final)
	rep := indoubttest.Check(c, rec, indoubttest.ExactlyOnce())
	forget(t, rep.RunDir)
	dups := 0
	for _, a := range rep.Anomalies {
		if a.Kind == "duplicate" {
			dups++
		}
	}
	if dups == 0 {
		t.Fatalf("no duplicate order under commit-cut:0.2 over 100 operations of three transactions: the case is not exercised (%s)", rep.Summary)
	}
	msg := strings.Join(c.msgs, "\n")
	console := map[string]int{}
	for _, m := range consoleTimes.FindAllStringSubmatch(msg, -1) {
		n, _ := strconv.Atoi(m[2] + m[3])
		console[m[1]] = n
	}
	r := runResults(t, rep.RunDir)
	validResults(t, rep.RunDir)
	page, err := os.ReadFile(filepath.Join(rep.RunDir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	inPage := 0
	if m := pageTimes.FindSubmatch(page); m != nil {
		inPage, _ = strconv.Atoi(string(m[1]))
	}
	t.Logf("checker: %d duplicate; console names %d operations applied more than once, results.json %d, report.html %d; %d replays; %d of %d faults joined",
		dups, len(console), r.Evidence.AppliedTwiceTotal(), inPage, r.Evidence.ReplaysTotal(), r.Evidence.Joined, r.Evidence.Events)
	if len(console) > dups || r.Evidence.AppliedTwiceTotal() > dups || inPage > dups {
		t.Errorf("over-claim: %d duplicates, but %d (console), %d (results.json), %d (report.html) called applied more than once:\n%s",
			dups, len(console), r.Evidence.AppliedTwiceTotal(), inPage, msg)
	}
	for id, n := range console {
		if final[id] != int64(n) {
			t.Errorf("the message says %s took effect %d times; the final state holds it %d times", id, n, final[id])
		}
	}
	for _, a := range r.Evidence.AppliedTwice {
		if a.Proof != results.ProofFinalState || int64(a.Times) != final[a.OpID] {
			t.Errorf("results.json: %s applied %d times by %q; the final state holds it %d times", a.OpID, a.Times, a.Proof, final[a.OpID])
		}
	}
	for _, a := range r.Evidence.Ambiguous {
		if strings.Contains(a.Sentence, "does not say what error") {
			t.Errorf("results.json: %s, although each failed attempt's error was passed to Retried", a.Sentence)
		}
	}
	if !strings.HasPrefix(msg, "indoubttest: exactly-once check failed\nverdict: invalid: not exactly once") {
		t.Errorf("the message does not lead with the checker's anomaly:\n%s", msg)
	}
}

// Idempotent inserts keyed by the op id: a retry after a cut meets the key the first
// commit wrote (23505) and answers from it. Every such operation is a replay, none is
// applied twice, and the check holds.
func TestDuplicateKeyIsAReplay(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, `CREATE TABLE orders (key text PRIMARY KEY)`)
	insert := func(ctx context.Context, key string) (any, error) {
		_, err := proxied.Exec(ctx, `INSERT INTO orders (key) VALUES ($1)`, key)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return map[string]bool{"replayed": true}, nil // charged before: the reply was lost
		}
		return map[string]bool{"replayed": false}, err
	}
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	applyAll(rec, 2, 15, insert)
	srv.Disarm()
	rec.Read("read", finalCounts(t, direct, `SELECT key, count(*) FROM orders GROUP BY key`))
	rep := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
	if rep.Verdict != checker.Valid {
		t.Fatalf("verdict %v:\n%s", rep.Verdict, rep.Text)
	}
	replays := 0
	for _, c := range rep.Claims {
		switch c.Kind {
		case indoubttest.ClaimReplay:
			replays++
			if !strings.Contains(c.Sentence, "a replay, not a second application") {
				t.Errorf("replay sentence %q", c.Sentence)
			}
		default:
			t.Errorf("%s claimed %s: %s", c.Op, c.Kind, c.Sentence)
		}
	}
	if replays == 0 {
		t.Fatalf("no replay under commit-cut:0.3 over 30 inserts (%d faults):\n%s", rep.Faults, rep.Text)
	}
	if !strings.Contains(rep.Text, "changed nothing the second time (replays)") {
		t.Errorf("text:\n%s", rep.Text)
	}
}

// Every attempt cut, none acknowledged: the claims say so, and no sentence says that a
// retry was acknowledged; with the final state's counts and from the proxy alone.
func TestAllAttemptsCutNoneAcknowledged(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	for _, c := range []struct {
		name  string
		model func(final checker.ExactlyOnceState) (indoubttest.Model, any)
		proof string
	}{
		{"final state", func(st checker.ExactlyOnceState) (indoubttest.Model, any) { return indoubttest.ExactlyOnce(), st }, results.ProofFinalState},
		{"proxy alone", func(st checker.ExactlyOnceState) (indoubttest.Model, any) {
			taken := int64(0)
			for _, n := range st {
				taken += n
			}
			return indoubttest.Budget(100), indoubttest.Balance(100 - taken)
		}, results.ProofProxy},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Postgres(t)
			proxied, direct := pools(t, srv, `CREATE TABLE orders (key text NOT NULL)`)
			f := "apply"
			if c.proof == results.ProofProxy {
				f = "decrement"
			}
			srv.Arm("commit-cut:1")
			rec := indoubttest.NewRecorder(t, srv)
			w := rec.Worker()
			for range 3 {
				op := w.Invoke(f, nil)
				ctx := withOp(context.Background(), op)
				var err error
				for i := range 3 {
					if _, err = proxied.Exec(ctx, `INSERT INTO orders (key) VALUES ($1)`, op.ID()); err == nil || i == 2 {
						break
					}
					op.Retried(err)
				}
				op.Done(nil, err)
			}
			srv.Disarm()
			model, final := c.model(finalCounts(t, direct, `SELECT key, count(*) FROM orders GROUP BY key`))
			rec.Read("read", final)
			rep := indoubttest.Evaluate(t, rec, model)
			if rep.Verdict != checker.Invalid {
				t.Fatalf("verdict %v, want invalid (3 inserts each applied 3 times):\n%s", rep.Verdict, rep.Text)
			}
			applied := 0
			for _, cl := range rep.Claims {
				if cl.Kind == indoubttest.ClaimApplied && cl.Times == 3 {
					applied++
				}
			}
			r := runResults(t, rep.RunDir)
			if applied != 3 || r.Evidence.AppliedTwice[0].Proof != c.proof {
				t.Errorf("claims %+v: want 3 operations applied 3 times, proven by %s", rep.Claims, c.proof)
			}
			// The proxy's sentences, wherever they are shown.
			var said []string
			for _, list := range [][]results.AmbiguousOp{r.Evidence.Ambiguous, r.Evidence.AppliedTwice, r.Evidence.Replays, r.Evidence.CommittedTwice} {
				for _, a := range list {
					said = append(said, a.Sentence)
				}
			}
			for _, s := range strings.Split(rep.Text, "\n") {
				if strings.Contains(s, "operation ") {
					said = append(said, s)
				}
			}
			for _, s := range said {
				if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(s, "no attempt was acknowledged", ""), "none of its attempts was acknowledged", ""), "acknowledged") {
					t.Errorf("a sentence speaks of an acknowledgement that never came: %s", s)
				}
			}
		})
	}
}
