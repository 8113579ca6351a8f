package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/shrink"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
	"github.com/indoubt/indoubt/workloads/txn"
)

// shellWords splits a command line as a POSIX shell does the words shrink.Command
// writes: plain words and single-quoted ones.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, any := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			in, any = !in, true
		case r == ' ' && !in:
			if any {
				words = append(words, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if in {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if any {
		words = append(words, cur.String())
	}
	return words
}

// The command a shrink prints is indoubt run's: parsed by indoubt run, it gives back the
// configuration it was written from, for every setting a run directory records.
func TestShrinkCommandParsesBack(t *testing.T) {
	sched := func(specs ...string) schedule.Schedule {
		s, err := schedule.Parse(specs)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	naive, _ := runner.ParsePolicy("naive")
	none, _ := runner.ParsePolicy("none")
	conflict, _ := runner.ParsePolicy("conflict")
	for _, cfg := range []runner.Config{
		{Workload: workloads.Budget, Store: runner.Postgres, Workers: 1, Ops: 3, Seed: 9, Retry: naive, Budget: 2, Mechanism: "transaction",
			Faults: sched("commit-cut@commit:4", "commit-drop@conn:2/txn:5", "latency:50ms~10ms,stream=up@0s-1.5s"), SynchronousCommit: "off", PGVersion: "15"},
		{Workload: workloads.Register, Store: runner.Redis, Workers: 2, Duration: 2500 * time.Millisecond, Seed: 1, Retry: none, Keys: 3,
			Persistence: "none", Faults: sched("kill@1s-1.2s"), CheckTimeout: 30 * time.Second},
		{Workload: workloads.Budget, Store: runner.Postgres, Workers: 16, Duration: 4 * time.Second, Seed: 1, Retry: none, Budget: 1000000000,
			Topology: runner.TopologyReplicated, Replication: "sync", Faults: sched("failover@1.5s"), Proxy: "off"},
		{Workload: workloads.Counter, Store: runner.Postgres, Workers: 4, Ops: 10, Seed: 3, Retry: conflict, Mechanism: "read-write", Isolation: "read-committed", PowerFS: true, Fsync: "on"},
		{Workload: workloads.Transfer, Store: runner.Postgres, Workers: 2, Duration: 3 * time.Second, Seed: 2, Retry: none, Servers: 3,
			Placement: transfer.Placement("local"), Coordinator: "naive", Reads: 0.25, RowsPerWorker: 10, RecoverAfter: 2 * time.Second, Faults: sched("coordinator-crash@1s")},
		{Workload: workloads.Budget, Store: runner.Postgres, DSN: "postgres://app@db.example:5432/app?sslmode=disable", Workers: 1, Ops: 1, Seed: 1, Retry: naive, Budget: 1},
		// What the reproducer once left out: the network, the recovery wait, the listing
		// bound, and the transactions' shape and where they read.
		{Workload: workloads.Insert, Store: runner.Postgres, Workers: 4, Duration: 3 * time.Second, Seed: 1, Retry: none, Topology: runner.TopologyReplicated,
			Network: "isolated", RecoveryWait: 5 * time.Second, MaxAnomalies: 3, Faults: sched("partition:isolate-primary@1s-2500ms", "failover@1500ms")},
		{Workload: workloads.ListAppend, Store: runner.Postgres, Workers: 2, Ops: 5, Seed: 4, Retry: conflict, Topology: runner.TopologyReplicated, ReadFrom: "standby",
			Txn: txn.Options{Keys: 5, MaxOps: 3, ReadFraction: 0.7, Distribution: txn.Zipf, Pattern: txn.ReadModifyWrite, MaxWritesPerKey: 4, ConsistencyModels: []string{"serializable", "snapshot-isolation"}}},
	} {
		line := shrink.Command(cfg)
		t.Run(line, func(t *testing.T) {
			words := shellWords(t, line)
			if words[0] != "indoubt" || words[1] != "run" {
				t.Fatalf("not an indoubt run command: %q", line)
			}
			a, err := parseRunArgs(words[2:], io.Discard, io.Discard)
			if err != nil {
				t.Fatalf("indoubt run refuses it: %v", err)
			}
			got := a.cfg
			got.Store, got.Workers = runner.StoreName(a.store), a.counts[0]
			got.Progress, got.OnProgress = nil, nil
			// What a run fills in by itself, the command line leaves out (runner.Settings).
			got, want := got.Filled(), cfg.Filled()
			if !reflect.DeepEqual(specsOf(got.Faults), specsOf(want.Faults)) {
				t.Errorf("faults %v, want %v", specsOf(got.Faults), specsOf(want.Faults))
			}
			got.Faults, want.Faults = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parsed back:\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	// A DSN's password is masked in the command, as everywhere a run prints it.
	if line := shrink.Command(runner.Config{Workload: workloads.Budget, Store: runner.Postgres, DSN: "postgres://app:secret@db/app", Workers: 1, Ops: 1}); strings.Contains(line, "secret") {
		t.Errorf("the command shows the password: %s", line)
	}
}

// A run that did not fail is refused, in one line, exit 3; so is a directory that is not
// a run's, and flags that make no sense.
func TestShrinkRefuses(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := invoke(t, "run", "--store", "mongo", "--workers", "1", "--ops", "3", "--quiet", "--out", dir)
	if code != 0 {
		t.Fatalf("the valid run: exit %d\n%s%s", code, out, errs)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*-budget-mongo-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v", runs)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"shrink", runs[0]}, "nothing to shrink: the run was valid"},
		{[]string{"shrink", "--budget", "1m", runs[0]}, "nothing to shrink: the run was valid"},
		{[]string{"shrink", dir}, "results.json"},
		{[]string{"shrink"}, "want one run directory"},
		{[]string{"shrink", runs[0], "--budget", "0s"}, "--budget must be positive"},
		{[]string{"shrink", "--reruns", "11", runs[0]}, "--reruns must be from 1 to 10"},
		{[]string{"shrink", runs[0], "extra"}, "unexpected argument"},
	} {
		code, out, errs := invoke(t, tt.args...)
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3 and one line saying %q", tt.args, code, out, errs, tt.want)
		}
	}
	if _, err := os.Stat(runs[0] + ".shrink"); !os.IsNotExist(err) {
		t.Errorf("a refused shrink left %s.shrink", runs[0])
	}
}

// indoubt suite --shrink on real PostgreSQL: the case whose naive retries under
// commit-cut make its run invalid is shrunk within its budget to a smaller run that
// fails the same way; the JUnit failure message carries the reproducing command; and
// that command, run again, fails with the same fingerprint.
func TestSuiteShrinkPrintsTheReproducer(t *testing.T) {
	suite := writeSuite(t, `name: shrinking
cases:
  - name: naive retry expected valid
    store: postgres
    workers: 1
    ops: 8
    budget: 4
    faults: [commit-cut:0.5]
    retry: naive
    expect: valid
`)
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	code, out, errs := invoke(t, "suite", "--quiet", "--shrink", "--shrink-budget", "3m", "--out", dir, "--junit", junit, suite)
	if strings.Contains(out, "cannot be launched") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres missing under CI:\n%s%s", out, errs)
		}
		t.Skipf("postgres cannot be launched here:\n%s", out)
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 1 || doc.Suites[0].Cases[0].Failure == nil {
		t.Fatalf("junit.xml: %v\n%s", err, b)
	}
	msg := doc.Suites[0].Cases[0].Failure.Message
	_, cmd, ok := strings.Cut(msg, "): indoubt run ")
	if !ok || !strings.Contains(out, "FAIL naive retry expected valid: reproduce (") {
		t.Fatalf("no reproducer in the failure message %q or the table:\n%s", msg, out)
	}
	shrunk, _ := filepath.Glob(filepath.Join(dir, "*.shrink", "shrink.json"))
	if len(shrunk) != 1 {
		t.Fatalf("shrink.json files: %v", shrunk)
	}
	var sr shrink.Result
	sb, _ := os.ReadFile(shrunk[0])
	if err := json.Unmarshal(sb, &sr); err != nil {
		t.Fatal(err)
	}
	if sr.Smallest.Command != "indoubt run "+cmd {
		t.Errorf("the message's command %q is not shrink.json's %q", cmd, sr.Smallest.Command)
	}
	before, after := sr.Original, sr.Smallest
	if len(after.Faults) > len(before.Faults) || after.Operations > before.Operations || after.Workers > before.Workers ||
		(len(after.Faults) == len(before.Faults) && after.Operations == before.Operations) {
		t.Errorf("not smaller: %d faults, %d operations, %d workers → %d, %d, %d", len(before.Faults), before.Operations, before.Workers,
			len(after.Faults), after.Operations, after.Workers)
	}
	if _, err := os.Stat(filepath.Join(after.RunDir, "report.html")); err != nil {
		t.Errorf("the smallest run is not a run directory with its report: %v", err)
	}
	// The smallest candidate was run again and failed again, or the shrink fell back
	// to one that did: either way shrink.json says so, and the run it names is the
	// only one left beside it.
	confirms := 0
	for _, st := range sr.Steps {
		if st.Phase == "confirm" {
			confirms++
		}
	}
	if sr.Confirmed == "" || confirms == 0 && !strings.Contains(sr.Confirmed, "baseline") {
		t.Errorf("confirmed %q after %d confirm steps: want the reproducer run again", sr.Confirmed, confirms)
	}
	if runs, _ := filepath.Glob(filepath.Join(filepath.Dir(shrunk[0]), "*", "history.jsonl")); len(runs) != 1 || filepath.Dir(runs[0]) != after.RunDir {
		t.Errorf("run directories left beside shrink.json: %v, want only %s", runs, after.RunDir)
	}
	// Its faults.jsonl, listed faults and the points before its windows included, is
	// of the schema.
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "schemas", "faults.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.ReadFile(filepath.Join(after.RunDir, "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(fb)), "\n") {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err == nil {
			err = sch.Validate(v)
		}
		if err != nil {
			t.Errorf("faults.jsonl line %s: %v", line, err)
		}
	}
	again := t.TempDir()
	args := append(shellWords(t, cmd), "--quiet", "--json", "--out", again)
	code, rout, rerr := invoke(t, append([]string{"run"}, args...)...)
	if code != 1 {
		t.Fatalf("the reproducer exits %d, want 1\n%s%s", code, rout, rerr)
	}
	var res results.Results
	if err := json.Unmarshal([]byte(rout), &res); err != nil {
		t.Fatal(err)
	}
	if !sr.Fingerprint.In(&res) {
		t.Errorf("the reproducer's run does not fail with %s: %s", sr.Fingerprint, res.Summary)
	}
}
