// Package indoubttest tests your own code's retry logic under ambiguous commits, the way
// net/http/httptest tests a handler: a real database behind indoubt's commit-aware
// proxy, a recorder of the operations your code performs and of each attempt that
// failed, and Check, which holds the history to a model with the checkers of package
// checker and explains a failure with the proxy's ground truth.
//
// A commit is ambiguous when the connection is lost after the client sent it: the
// server may have applied it (the proxy cut the reply: commit-cut) or not (the proxy
// dropped the commit: commit-drop), and the client sees the same error either way. Code
// that retries any error charges twice after a cut; code that writes an idempotency key
// in the same transaction as the effect does not. Only cuts tell the two apart: a drop
// never applied, so any retry of it is safe.
//
// # A test
//
//	func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) } // stops the shared server
//
//	func TestCharge(t *testing.T) {
//		srv := pgtest.Postgres(t)            // a database of the test's own, behind the proxy
//		setUp(srv.DirectDSN)                 // set-up and final reads go around the proxy
//		pool, _ := pgxpool.New(ctx, srv.DSN) // the code under test goes through it
//
//		srv.Arm("commit-cut:0.2")            // cut 20% of the replies that prove a commit
//		rec := indoubttest.NewRecorder(t, srv)
//		var wg sync.WaitGroup
//		for range 4 {
//			w := rec.Worker() // one logical process per goroutine
//			wg.Go(func() {
//				for range 25 {
//					op := w.Invoke("decrement", nil)
//					balance, err := svc.Charge(ctx, op.ID(), op.Retried) // the op id: an idempotency key
//					op.Done(indoubttest.Applied(balance), err)
//				}
//			})
//		}
//		wg.Wait()
//		srv.Disarm()
//		rec.Read("read", indoubttest.Balance(readBalance(srv.DirectDSN)))
//		indoubttest.Check(t, rec, indoubttest.Budget(1000))
//	}
//
// A naive retry fails it, and the message leads with what the checker proved, each of
// its operations followed by what the proxy knows of them, then the faults, the fault
// seed with the command that runs the test again with it, and the run directory:
//
//	indoubttest: budget check failed
//	verdict: invalid: read final-0 returned balance 881 (119 of 1000 taken) when at most 100 could have been taken ...
//	  checker: 1 impossible-read
//	    read final-0 returned balance 881 (119 of 1000 taken) when at most 100 could have been taken ...
//	  ground truth: 16 operations committed by a cut and retried, a second application possible but not proven
//	    operation 1-1 (invoked at history event 3): the proxy cut 2 attempts after their commits applied (COMMIT); ...
//	faults: 19 cut after the server committed (...), 0 dropped before the server saw them (not committed)
//	fault seed 6828726345589830303; the same fault decisions again: (cd ... && INDOUBT_SEED=6828726345589830303 go test -count=1 -run '^TestCharge$' .)
//	run directory: /tmp/indoubttest-TestCharge-3537038200 (re-check: indoubt check /tmp/indoubttest-TestCharge-3537038200)
//
// The module's examples/payments holds such a service on PostgreSQL, Redis and MongoDB,
// naive and idempotent, with their tests; the README shows the go.mod lines that use a
// clone of the module before a release.
//
// # Servers
//
// The store packages give each test a Server: pgtest.Postgres, redistest.Redis,
// mongotest.Mongo, cqltest.Cassandra and mysqltest.MySQL. Each launches its server once
// per test binary (PostgreSQL, Redis, MariaDB and Cassandra from the machine's binaries
// and jars, FerretDB inside the binary) or uses the one an environment variable names
// (INDOUBT_POSTGRES_DSN, INDOUBT_REDIS_DSN, INDOUBT_MONGO_DSN, INDOUBT_CASSANDRA_DSN,
// INDOUBT_MYSQL_DSN), and gives every test a database of its own: PostgreSQL, MySQL and
// MongoDB a database it creates and drops, Cassandra
// a keyspace, Redis a database number it has proven empty. A test never touches data it
// did not create; pointed at a server whose every database holds keys, a Redis test
// fails and says so. They are separate packages so that a PostgreSQL test links no
// MongoDB, SQLite, Redis or CQL code. A server that is not installed skips the test, or
// fails it under CI=true.
//
// Each test has its own proxy: Server.DSN goes through it, Server.DirectDSN does not.
//
// To look at the rows a verdict is about, INDOUBT_KEEP_DB=1 keeps each PostgreSQL test's
// database (pgtest.EnvKeep): the test's log names it, its DSN and the statement that
// removes it, and a launched server keeps its data directory, named in the log with the
// commands that start the server on it again and remove it.
//
// One layer up, apitest.HTTP and apitest.GRPC put the proxy in front of an HTTP or gRPC
// service the test runs (its handler, over whatever database): Server.DSN is then the
// proxy's base URL, and the faults are response-cut and request-drop (see package
// apitest).
//
// # Faults
//
// Server.Arm arms faults in the syntax of `indoubt run --fault` (docs/faults.md): "commit-cut:0.2",
// "commit-drop:1,max=3", "commit-mixed:0.1", "latency:5ms", "partition@1s-2s". A window
// "@START-END" is measured from the Arm call ("commit-cut:0.5@300ms-700ms": from 300 ms
// after it to 700 ms after it; "@1s-" until Disarm). A commit fault takes the statement
// match of `indoubt proxy --match` as its last option, match=REGEXP: only the commits
// whose statements it matches count ("commit-cut:1,max=2,match=INSERT INTO orders").
// Disarm ends every fault and the match; Server.Events returns what the proxy did so
// far, with its ground truth. Everything stops with the test.
//
// The proxy's decisions are seeded: the Seed option (pgtest.Postgres(t,
// indoubttest.Seed(7))), else INDOUBT_SEED, else the seed Seeds gives its subtest,
// else one derived from the test's name, the same every run. The same seed gives the same
// decisions for the same messages in the same order. Seeds runs a test under several
// seeds, INDOUBT_SEEDS of them when that is set (a nightly job may ask for more than the
// test does).
//
// # Recording
//
// A Recorder keeps the history. Worker gives each goroutine a logical process; Invoke
// starts an operation and returns its Op, whose ID is unique in the test and the same
// across retries (use it as the idempotency key); InvokeOn does so on one object of a
// model over several (a SKU of Budgets).
//
// Tell the Op about every attempt: Retried for each one that failed and was retried
// (pass it to your retry loop's hook), Conn for the connection an attempt uses when your
// driver says (with pgx, a QueryTracer that reads the operation from the context and
// names conn.PgConn().Conn().LocalAddr()), so that each fault joins the attempt it hit;
// without it faults join by time, which cannot tell concurrent attempts apart. Then
// complete it once: Ok, Fail (it certainly did not apply), Info (unknown), or Done,
// which judges the last attempt's error by the store's error contract (package
// workloads): an error after which the request may have applied, such as the lost
// connection a cut leaves, is unknown. An operation's outcome is the worst of its
// attempts: after an attempt that ended unknown, a definite failure of the last one
// (a server selection error, a timeout before anything was sent) still leaves the
// operation unknown, and Done records Info. Call Fail when your code knows that nothing
// applied (it read its idempotency record and found none). After Info the worker
// continues under a fresh process id, as Jepsen's rule has it. SetClassifier puts error
// rules of your own in front of the store's.
//
// Read (ReadOn) records the final state after the workers are done, read through
// Server.DirectDSN; it is a final read the checkers count apart from the operations.
//
// # Models and values
//
//	model                      functions                 ok values                                          final read
//	Budget(initial)            decrement, read           Applied(balance), Replayed(balance), Rejected()    Balance(n)
//	                           decrement of n units: invoked with Amount(n)
//	Budgets(map[key]initial)   InvokeOn(key, ...)        the same, per key                                  ReadOn(key, "read", Balance(n))
//	Counter(before)            increment, read           Incremented(wrote)                                 Count(n)
//	Register(initial)          read, write               Ok(n), Ok(nil) for absent; write invoked with n    -
//	CASRegister(initial)       read, write, cas          cas invoked and ok with [2]int64{from, to}        -
//	ExactlyOnce()              apply                     any                                                checker.ExactlyOnceState
//	ExactlyOnceResponse()      apply                     Response(v): what your code answered               Responses
//	Bank(params)               transfer                  transfer invoked with checker.Transfer             checker.Balances
//	Bank(params with Log)      transfer                  the same; your code logs Op.ID in its transaction  checker.BankLog
//	Models(Part{...}, ...)     each part's, by its map   each part's (a map of part name to value: one each) a map of part name to final state
//	ListAppend(models...)      txn                       Txn{Append(k, v), ReadList(k)}, reads SawList      -
//	RWRegister(models...)      txn                       Txn{Write(k, v), ReadValue(k)}, reads SawValue     -
//
// ListAppend and RWRegister check your own transactions for isolation, as Jepsen's Elle
// does: invoke each as "txn" with its micro-ops (a Txn, its reads not yet known), run
// them in one transaction, fill in what each read saw, and complete it with Ok(tx). The
// verdict names the weakest consistency models the history violates and every anomaly
// with its cycle (G-single-item, G2-item, lost-update, ...); Report.Found asks for one:
//
//	tx := indoubttest.Txn{indoubttest.Append("k1", next()), indoubttest.ReadList("k2")}
//	op := w.Invoke("txn", tx)
//	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(t pgx.Tx) error {
//		... run tx[0], then read k2 into list and tx[1].SawList(list) ...
//	})
//	op.Done(tx, err)
//	...
//	indoubttest.Check(t, rec, indoubttest.ListAppend("serializable"))
//
// Models holds one history to several models at once: a reservation that takes n units
// of stock (Budget, invoked with Amount(n)) and must be made exactly once (ExactlyOnce)
// is one operation that both judge; the verdict is the worst of theirs, and each
// part's is in the Report's summary, results.json's models and report.html.
//
// Replayed says that your code answered from its record of an earlier attempt: the
// proxy's evidence then names the operation a replay, proven by its reply, instead of
// leaving a second application possible. A value the model does not read, a function it
// does not know or a final state it needs and did not get fails the test with the
// constructor or the call to use.
//
// # Verdicts
//
// Check fails the test unless the verdict is valid; Evaluate returns the same Report
// without failing it, so that a test can pin that a known-bad version stays caught, with
// its anomaly named (Report.Found). Report has the checker's verdict, summary and
// anomalies, and the proxy's Claims about single operations: applied more than once (by
// the final state's count of its op id, or by the proxy's truth for each attempt, a lower
// bound), a replay, or committed by a cut and retried with nothing proven. A history in
// which no operation completed is not valid: nothing was checked.
//
// # Run directory
//
// Check and Evaluate write history.jsonl (schemas/history.schema.json: every operation,
// its failed attempts with their connections, times, errors and classes, and the proxy's
// events), faults.jsonl (the proxy's events on the history's clock), check.json (the
// check's limits), results.json (schemas/results.schema.json, the results of indoubt
// run) and report.html, then judge the directory from its files alone, as indoubt run
// judges its own: `indoubt check DIR` gives the same verdict and claims. The directory
// is under $INDOUBT_OUT when that is set, kept, and named in the test's log; otherwise in
// the system's temporary directory, removed when the test passes and kept (and named in
// the failure) when it fails.
package indoubttest
