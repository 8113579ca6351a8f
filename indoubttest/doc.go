// Package indoubttest tests your own code's retry logic under ambiguous commits, the way
// net/http/httptest tests a handler: a real database behind indoubt's commit-aware proxy,
// a recorder for the operations your code performs, and Check, which holds the
// recorded history to a model and explains a failure with the proxy's ground truth.
//
// A commit is ambiguous when the connection is lost after the client sent it: the
// server may have applied it (the proxy cut the reply: commit-cut) or not (the proxy
// dropped the commit: commit-drop), and the client sees the same error either way. Code
// that retries any error charges twice after a cut; code that writes an idempotency key
// in the same transaction as the effect does not. Only cuts tell the two apart: a drop
// never applied, so any retry of it is safe.
//
// # A complete test
//
//	func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) } // stops the shared server
//
//	func TestCharge(t *testing.T) {
//		srv := pgtest.Postgres(t)          // a database of the test's own, behind the proxy
//		pool, _ := pgxpool.New(ctx, srv.DSN) // your code talks through the proxy
//		setUp(srv.DirectDSN)               // set-up and final reads go around it
//
//		srv.Arm("commit-cut:0.2")          // cut 20% of the replies that prove a commit
//		rec := indoubttest.NewRecorder(t, srv)
//		var wg sync.WaitGroup
//		for range 4 {
//			w := rec.Worker()              // one logical process per goroutine
//			wg.Go(func() {
//				for range 25 {
//					op := w.Invoke("decrement", nil)
//					balance, err := svc.Charge(ctx, op.ID()) // the op id is your idempotency key
//					op.Done(indoubttest.Applied(balance), err)
//				}
//			})
//		}
//		wg.Wait()
//		srv.Disarm()
//		rec.Read("read", indoubttest.Balance(readBalance(srv.DirectDSN)))
//		indoubttest.Check(t, rec, indoubttest.Budget(1000).As("charge"))
//	}
//
// A naive retry fails that test with, first, the cause:
//
//	indoubttest: budget check failed; the proxy's ground truth names the cause:
//	  charge 1-7: the proxy cut the reply after COMMIT (the commit had applied), your code retried and was told ok: the charge applied twice
//	  ...
//	the checker: read 4-1 returned balance 877 (123 of 1000 taken) when at most 100 could have been taken ...
//	faults: 23 cut after the commit applied, 0 dropped before the server (not applied)
//	run directory: /tmp/indoubttest-TestCharge-123 (re-check: indoubt check /tmp/indoubttest-TestCharge-123/history.jsonl)
//
// The module's examples/payments holds this service on PostgreSQL, Redis and MongoDB,
// naive and idempotent, with their tests.
//
// # Servers
//
// The store subpackages give each test a Server: pgtest.Postgres, redistest.Redis,
// mongotest.Mongo and cqltest.Cassandra. Each launches its server once per test binary
// (PostgreSQL, Redis and Cassandra from the machine's binaries and jars, FerretDB
// inside the binary) or uses the one an environment variable names
// (INDOUBT_POSTGRES_DSN, INDOUBT_REDIS_DSN, INDOUBT_MONGO_DSN, INDOUBT_CASSANDRA_DSN),
// and gives every test a fresh database (or keyspace) on it. They are separate
// packages so that a PostgreSQL test links no MongoDB, SQLite, Redis or CQL code. A server
// that is not installed skips the test, or fails it under CI=true.
//
// Each test has its own proxy: Server.DSN goes through it, Server.DirectDSN does not.
// Server.Arm arms faults for a phase of the test, in the schedule syntax of package
// faults ("commit-cut:0.2", "commit-drop:1,max=3", "commit-mixed:0.1@1s-3s"), and
// Disarm ends them; Server.Events returns what the proxy did, with the ground truth.
// Everything stops with the test.
//
// # Recording
//
// A Recorder keeps the history: Worker gives each goroutine a logical process, Invoke
// starts an operation and returns its Op, whose ID is unique in the test and the same
// across retries (use it as the idempotency key). Complete it once: Ok, Fail (it
// certainly did not apply), Info (unknown), or Done, which maps an error by the store's
// error contract (package workloads): an error after which the request may have been
// applied, such as the lost connection a cut leaves, is Info. Op.Retried tells Check
// that your code retried an attempt; pass it to your retry loop's hook. After Info the
// worker continues under a fresh process id, as Jepsen's rule has it. Read records the
// final state after the workers are done.
//
// # Models
//
// Budget (one account, units taken one at a time), Counter, Register, CASRegister,
// ExactlyOnce (effects tagged with their op id, present exactly once) and Bank
// (transfers between accounts): the checkers of package checker, with the value formats
// of package histories ("Values").
//
// # Run directory
//
// Check writes history.jsonl (schemas/history.schema.json; `indoubt check` re-checks
// it without flags), faults.jsonl (the proxy's events) and results.json (verdict,
// explanation, checker result) and report.html to a directory under $INDOUBT_OUT, kept, or under the
// system's temporary directory, removed when the test passes and named in the failure.
package indoubttest
