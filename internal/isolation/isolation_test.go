package isolation_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// One server of each version for the package.
var (
	pg15 = servertest.Postgres(postgres.Options{Version: "15"})
	pg18 = servertest.Postgres(postgres.Options{Version: "18"})
	rds  = servertest.New("redis", func(ctx context.Context) (*redisserver.Server, error) {
		return redisserver.Start(ctx, redisserver.Options{})
	})
)

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg15, pg18, rds)) }

var versions = []struct {
	name string
	h    interface {
		Get(testing.TB) *postgres.Server
	}
}{{"15", pg15}, {"18", pg18}}

// Hermitage's table measured on PostgreSQL 15 and 18: every cell either agrees with
// Hermitage's or is reported as a finding with the statements that show it; every
// observed anomaly comes with the checker's cycle; what each level prevents, it
// prevents by a means the steps show.
func TestHermitageTable(t *testing.T) {
	for _, srv := range versions {
		t.Run("PostgreSQL "+srv.name, func(t *testing.T) {
			s := srv.h.Get(t)
			tab, err := isolation.Measure(context.Background(), s.DSN, isolation.Levels)
			if err != nil {
				t.Fatal(err)
			}
			tab.Server = "PostgreSQL " + s.Version
			t.Logf("\n%s", tab.Text())
			if srv.name == "18" {
				pageInBrowser(t, tab)
			}
			if len(tab.Cells) != len(isolation.Anomalies())*len(isolation.Levels) {
				t.Fatalf("%d cells, want %d", len(tab.Cells), len(isolation.Anomalies())*len(isolation.Levels))
			}
			for _, c := range tab.Cells {
				if c.Agrees != (c.Observed == c.Hermitage) {
					t.Errorf("%s at %s: agrees %v though observed %v and Hermitage %v", c.Anomaly, c.Level, c.Agrees, c.Observed, c.Hermitage)
				}
				if !c.Agrees && (c.Finding == "" || !strings.Contains(c.Finding, c.Steps[0].SQL)) {
					t.Errorf("%s at %s differs from Hermitage without a finding that shows its statements: %q", c.Anomaly, c.Level, c.Finding)
				}
				if c.Observed && (c.Cycle == "" || c.How != "not prevented") {
					t.Errorf("%s at %s observed without its cycle: %+v", c.Anomaly, c.Level, c)
				}
				if !c.Observed && c.How == "not prevented" {
					t.Errorf("%s at %s prevented, said not prevented", c.Anomaly, c.Level)
				}
				if len(c.History) < 4 {
					t.Errorf("%s at %s: the history has %d events", c.Anomaly, c.Level, len(c.History))
				}
			}
		})
	}
}

// The random workloads at each level of PostgreSQL 15 and 18: list-append through
// MeasureCost (the cost columns) and rw-register through the runner, each history
// checked for its level's own model (read-committed, snapshot-isolation,
// serializable) and valid, every transaction accounted for, the serialization
// failures of the stronger levels retried and counted as aborts.
func TestRandomWorkloadAtEachLevel(t *testing.T) {
	for _, srv := range versions {
		t.Run("PostgreSQL "+srv.name, func(t *testing.T) {
			s := srv.h.Get(t)
			costs, err := isolation.MeasureCost(context.Background(), s.DSN, isolation.Levels, isolation.CostOptions{Workers: 4, TxnsPerWorker: 30, Seed: 1, Out: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range costs {
				t.Logf("list-append %s: %s; %.0f committed/s, p50 %.1f ms, aborts %v (%.2f a commit)", c.Level, c.Summary, c.CommittedPerSecond, c.LatencyP50, c.Aborts, c.AbortsPerCommit)
				if c.Verdict != checker.Valid || c.Transactions < 120 || c.Committed == 0 {
					t.Errorf("list-append %s: %v, %d transactions checked, %d committed: %s", c.Level, c.Verdict, c.Transactions, c.Committed, c.Summary)
				}
				var sum int64
				for _, n := range c.Aborts {
					sum += n
				}
				if c.Committed > 0 && c.AbortsPerCommit != float64(sum)/float64(c.Committed) {
					t.Errorf("list-append %s: %.3f aborts a commit, but %d aborts over %d commits", c.Level, c.AbortsPerCommit, sum, c.Committed)
				}
			}
			for _, l := range isolation.Levels {
				res, err := runner.Run(context.Background(), runner.Config{
					Workload: workloads.RWRegister, Store: runner.Postgres, DSN: s.DSN, Isolation: string(l),
					Workers: 4, Ops: 30, Seed: 2, Out: t.TempDir(), Retry: conflictPolicy(t),
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("rw-register %s: %s; retries %v", l, res.Summary, res.Retries.ByReason)
				if res.Verdict != checker.Valid || res.Txn == nil || res.Txn.Transactions < 120 {
					t.Errorf("rw-register %s: %v: %s", l, res.Verdict, res.Summary)
				}
			}
		})
	}
}

// SERIALIZABLE list-append under commit-mixed on PostgreSQL 15 and 18: commits cut or
// dropped at random leave transactions in doubt (info), and the checker, deciding from
// the reads which of them committed, finds the history serializable.
func TestSerializableUnderCommitMixed(t *testing.T) {
	sched, err := schedule.Parse([]string{"commit-mixed:0.2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range versions {
		t.Run("PostgreSQL "+srv.name, func(t *testing.T) {
			s := srv.h.Get(t)
			res, err := runner.Run(context.Background(), runner.Config{
				Workload: workloads.ListAppend, Store: runner.Postgres, DSN: s.DSN, Isolation: "serializable",
				Workers: 4, Ops: 40, Seed: 3, Out: t.TempDir(), Retry: conflictPolicy(t), Faults: sched, Proxy: "auto",
			})
			if err != nil {
				t.Fatal(err)
			}
			f, _ := res.Final.(txn.Final)
			t.Logf("%s; committed %d, unknown %d, failed %d; faults %v", res.Summary, f.Committed, f.Unknown, f.Failed, res.Faults.ByKind)
			if res.Verdict != checker.Valid {
				t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
			}
			if f.Unknown == 0 {
				t.Errorf("no transaction in doubt under commit-mixed: %+v, faults %+v", f, res.Faults)
			}
			if res.Txn == nil || res.Txn.Transactions < 160 {
				t.Errorf("transactions checked %+v, want all 160 and the final reads", res.Txn)
			}
		})
	}
}

func conflictPolicy(t *testing.T) runner.Policy {
	p, err := runner.ParsePolicy("conflict")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Redis transactions on the same workloads: WATCH with MULTI/EXEC and a Lua script
// keep serializability (a changed WATCHed key aborts EXEC, retried as a conflict and
// counted); MULTI/EXEC without WATCH, its reads made before MULTI, checked for
// serializability, is invalid and the checker names the anomaly (a lost update and its
// cycle, on a hot key with read-modify-write transactions).
func TestRedisTransactions(t *testing.T) {
	dsn := rds.Get(t).DSN
	run := func(t *testing.T, w workloads.Name, mech string, opt txn.Options, fault ...string) *results.Results {
		t.Helper()
		cfg := runner.Config{
			Workload: w, Store: runner.Redis, DSN: dsn, Mechanism: mech, Txn: opt,
			Workers: 6, Ops: 40, Seed: 4, Out: t.TempDir(), Retry: conflictPolicy(t),
		}
		if len(fault) > 0 {
			sched, err := schedule.Parse(fault)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Faults, cfg.Proxy = sched, "auto"
		}
		res, err := runner.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, w := range []workloads.Name{workloads.ListAppend, workloads.RWRegister} {
		for _, mech := range []string{"watch", "script"} {
			t.Run(string(w)+" "+mech, func(t *testing.T) {
				res := run(t, w, mech, txn.Options{Keys: 3, ConsistencyModels: []string{"strict-serializable"}})
				t.Logf("%s; retries %v", res.Summary, res.Retries.ByReason)
				if res.Verdict != checker.Valid || res.Txn == nil || res.Txn.Transactions < 240 {
					t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
				}
				if mech == "script" && res.Retries.Total != 0 {
					t.Errorf("a script never conflicts, yet retries %v", res.Retries.ByReason)
				}
			})
		}
		// Under commit-mixed: EXEC or the script cut after Redis ran it, or dropped
		// before, leaves the transaction in doubt; the reads decide, and the history is
		// still strictly serializable.
		t.Run(string(w)+" watch under commit-mixed", func(t *testing.T) {
			res := run(t, w, "watch", txn.Options{Keys: 3, ConsistencyModels: []string{"strict-serializable"}}, "commit-mixed:0.2")
			f, _ := res.Final.(txn.Final)
			t.Logf("%s; committed %d, unknown %d; faults %v", res.Summary, f.Committed, f.Unknown, res.Faults.ByKind)
			if res.Verdict != checker.Valid {
				t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
			}
			if f.Unknown == 0 || res.Faults.ByKind["commit-cut"] == 0 {
				t.Errorf("no transaction in doubt under commit-mixed: %+v, faults %v", f, res.Faults.ByKind)
			}
		})
		t.Run(string(w)+" multi without watch", func(t *testing.T) {
			res := run(t, w, "multi", txn.Options{Keys: 1, Pattern: txn.ReadModifyWrite, MaxWritesPerKey: 1000, ConsistencyModels: []string{"serializable"}})
			t.Logf("%s", res.Summary)
			if res.Verdict != checker.Invalid || res.AnomalyKinds["lost-update"] == 0 {
				t.Fatalf("%v: %s; kinds %v", res.Verdict, res.Summary, res.AnomalyKinds)
			}
			if res.Txn == nil || len(res.Txn.Cycles) == 0 {
				t.Errorf("no cycle drawn: %+v", res.Txn)
			}
		})
	}
}

// Reads from a hot standby: a launched PostgreSQL 15 or 18 primary with its streaming
// standby, list-append at SERIALIZABLE with the read-only transactions on the standby
// (READ ONLY, REPEATABLE READ: the standby refuses SERIALIZABLE). The result is
// reported either way: a finding with its cycle, or how many transactions, how many of
// them read on the standby, were checked without one. The same history checked for
// strict serializability counts what the replication lag makes stale.
func TestStandbyReads(t *testing.T) {
	for _, version := range []string{"15", "18"} {
		t.Run("PostgreSQL "+version, func(t *testing.T) { standbyReads(t, version) })
	}
}

// standbyReads is TestStandbyReads on one version. PostgreSQL 18's binaries here have
// no pg_basebackup: its standby is a copy of the primary stopped cleanly before the
// run (servers/postgres).
func standbyReads(t *testing.T, version string) {
	res, err := runner.Run(context.Background(), runner.Config{
		Workload: workloads.ListAppend, Store: runner.Postgres, PGVersion: version, Topology: runner.TopologyReplicated,
		ReadFrom: runner.ReadFromStandby, Isolation: "serializable",
		Workers: 4, Ops: 50, Seed: 5, Out: t.TempDir(), Retry: conflictPolicy(t),
	})
	if err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	f, ok := res.Final.(txn.Final)
	if !ok || f.ReadsOn != runner.ReadFromStandby || f.ReadOnly == 0 {
		t.Fatalf("final %+v: want read-only transactions on the standby", res.Final)
	}
	switch res.Verdict {
	case checker.Valid:
		if res.Txn == nil || res.Txn.Transactions < 200 {
			t.Fatalf("valid with %+v transactions checked", res.Txn)
		}
		t.Logf("standby reads: %d transactions checked for serializable without a cycle, %d read-only on the standby", res.Txn.Transactions, f.ReadOnly)
	case checker.Invalid:
		if res.Txn == nil || len(res.Txn.Cycles) == 0 {
			t.Fatalf("invalid without a cycle: %s", res.Summary)
		}
		t.Logf("FINDING on the standby's reads: %s", res.Summary)
		_, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Anomalies {
			var ro []int64
			for _, i := range a.Ops {
				var tx txn.Txn
				if i >= 0 && int(i) < len(ops) && json.Unmarshal(ops[i].Value, &tx) == nil && tx.ReadOnly() {
					ro = append(ro, i)
				}
			}
			t.Logf("%s among %v, read-only (so on the standby): %v\n%s", a.Kind, a.Ops, ro, a.Explanation)
		}
	default:
		t.Fatalf("undecided: %s", res.Summary)
	}
	_, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := checker.CheckListAppend(context.Background(), ops, checker.TxnOptions{ConsistencyModels: []string{"strict-serializable"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the same history for strict-serializable: %v: %s", strict.Verdict, strict.Summary)
}

// pageInBrowser renders tab's page in headless chromium and checks the DOM it built:
// the table's rows and cells as measured, a drawn cycle (a node a session, an arrow an
// edge) for each observed cell that has one, and every link leading to an element.
func pageInBrowser(t *testing.T, tab isolation.Table) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "chromium", Program: "chromium", Hint: "install Debian package chromium"})
	}
	page := filepath.Join(t.TempDir(), "isolation.html")
	var b strings.Builder
	if err := tab.WritePage(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+page).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	if n := strings.Count(dom, `<tr class="anomaly">`); n != len(isolation.Anomalies()) {
		t.Errorf("the page's table has %d anomaly rows, want %d", n, len(isolation.Anomalies()))
	}
	for _, c := range tab.Cells {
		id := "cell-" + c.Anomaly + "-" + string(c.Level)
		i := strings.Index(dom, `<section id="`+id+`"`)
		if i < 0 {
			t.Errorf("no section %s", id)
			continue
		}
		sec := dom[i:]
		sec = sec[:strings.Index(sec, "</section>")]
		if c.Observed != strings.Contains(sec, "observed: ") {
			t.Errorf("%s: observed %v, the page says otherwise", id, c.Observed)
		}
		if c.Graph != nil {
			if n := strings.Count(sec, `class="edge"`); n != len(c.Graph.Steps) {
				t.Errorf("%s: %d arrows drawn for a cycle of %d edges", id, n, len(c.Graph.Steps))
			}
			if !strings.Contains(sec, `<circle class="node"`) {
				t.Errorf("%s: the cycle's nodes are not drawn", id)
			}
		} else if c.Observed && c.CycleKind != "lost-update" && c.CycleKind != "internal" {
			t.Errorf("%s: observed %s without a cycle to draw", id, c.CycleKind)
		}
		if n := strings.Count(sec, "<tr id="); n != len(c.Steps) {
			t.Errorf("%s: %d statements shown, want %d", id, n, len(c.Steps))
		}
	}
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(dom, -1) {
		if !strings.Contains(dom, `id="`+m[1]+`"`) {
			t.Errorf("a link to #%s leads nowhere", m[1])
		}
	}
}

// The contention row as isolation on PostgreSQL 18: read-modify-write transactions on
// one hot key, checked for serializability, lose updates at READ COMMITTED (named
// lost-update, with a cycle), and SERIALIZABLE keeps them at the price of its
// serialization failures, counted a commit.
func TestHotKeyContention(t *testing.T) {
	s := pg18.Get(t)
	cs, err := isolation.MeasureContention(context.Background(), s.DSN, []isolation.Level{isolation.ReadCommitted, isolation.Serializable},
		isolation.CostOptions{Workers: 6, TxnsPerWorker: 20, Seed: 6, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rc, ser := cs[0], cs[1]
	t.Logf("read committed: %s; serializable: %s, %.2f aborts a commit", rc.Summary, ser.Summary, ser.AbortsPerCommit)
	if rc.Verdict != checker.Invalid || rc.Anomalies["lost-update"] == 0 || rc.Cycle == "" {
		t.Errorf("read committed: %v %v, cycle %q: want lost updates named with a cycle", rc.Verdict, rc.Anomalies, rc.Cycle)
	}
	if ser.Verdict != checker.Valid || ser.Committed == 0 {
		t.Errorf("serializable: %v: %s", ser.Verdict, ser.Summary)
	}
	var sum int64
	for _, n := range ser.Aborts {
		sum += n
	}
	if ser.Committed > 0 && ser.AbortsPerCommit != float64(sum)/float64(ser.Committed) {
		t.Errorf("serializable: %.3f aborts a commit, but %d aborts over %d commits", ser.AbortsPerCommit, sum, ser.Committed)
	}
}
