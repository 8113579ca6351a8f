package runner_test

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/patroni"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// patroniBudget is a budget run on three PostgreSQL nodes under Patroni, each on a
// node of its own with an etcd member, the leader cut off from the DCS and the
// replicas (and from the clients beside them) for long enough that Patroni fails over
// (its TTL is 10 s), then healed.
func patroniBudget(t *testing.T, replication string) runner.Config {
	if err := patroni.Available(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	return runner.Config{Workload: "budget", Store: "postgres", Topology: runner.TopologyPatroni, Replication: replication,
		Budget: 1_000_000_000, Workers: 4, Duration: 22 * time.Second, Seed: 1, Out: t.TempDir(), Retry: policy(t, "none"),
		Faults: parseSchedule(t, "partition:isolate-primary@2s-18s")}
}

// Synchronous mode on: a commit on the leader waits for the synchronous standby, so
// the isolated leader acknowledges nothing the standby Patroni promotes lacks. The
// must-hold was: no acknowledged decrement lost (valid). Measured: valid in 8 runs of
// 10, and twice invalid (docs/findings.md: the new leader demoted itself after the heal
// on reading the old leader's name in the DCS, its acknowledged decrements rewound
// away). So every run must tell the truth: valid with nothing lost, or invalid with the
// lost decrements counted and named with the partition; which one is logged. The
// verdict is reproduced from the run directory either way.
func TestPatroniSynchronousLeaderPartitioned(t *testing.T) {
	t.Parallel() // a topology of its own
	res := partitionRun(t, patroniBudget(t, "sync"))
	p := res.Partitions[0]
	t.Logf("%s; %s; acknowledged during the partition, by the node of the clients: %v", p, res.Summary, p.AckedDuring)
	isolated := ""
	for _, c := range p.Components {
		if len(c) == 1 {
			isolated = c[0]
		}
	}
	if len(p.Components) != 2 || isolated == "" {
		t.Fatalf("components %v: want the leader alone", p.Components)
	}
	leadersHold(t, res)
	writesHold(t, res)
	switch res.Verdict {
	case checker.Valid:
		if res.LostTotal() != 0 {
			t.Fatalf("valid with lost writes %+v", res.LostWrites)
		}
		t.Logf("no acknowledged decrement lost")
	case checker.Invalid:
		if res.LostTotal() == 0 || res.LostWrites[0].Fault != "partition:isolate-primary@2s-18s" || res.LostWrites[0].OpID == "" {
			t.Fatalf("invalid without the lost decrements named: %+v: %s", res.LostWrites, res.Summary)
		}
		t.Logf("finding: synchronous mode on lost writes: %s", res.LostWrites[0].Explanation)
	default:
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
}

// Synchronous mode off, the same fault: what is lost, if anything, is measured and
// named (the partition, the lost decrements' operations); not asserted either way.
// About a minute: run with INDOUBT_PATRONI_LONG=1 (scripts/ha-table runs it over
// seeds).
func TestPatroniAsynchronousLeaderPartitioned(t *testing.T) {
	longPatroni(t)
	res := partitionRun(t, patroniBudget(t, "async"))
	t.Logf("%s; %s; acknowledged during the partition, by the node of the clients: %v", res.Partitions[0], res.Summary, res.Partitions[0].AckedDuring)
	switch {
	case res.LostTotal() > 0:
		if res.Verdict != checker.Invalid || res.LostWrites[0].OpID == "" {
			t.Errorf("lost %+v, verdict %v: want the lost decrements named and the verdict invalid", res.LostWrites, res.Verdict)
		}
		t.Logf("finding: %s", res.LostWrites[0].Explanation)
	case res.Verdict != checker.Valid:
		t.Errorf("verdict %v with nothing lost: %s", res.Verdict, res.Summary)
	default:
		t.Logf("finding: no acknowledged decrement lost")
	}
}

// writesHold checks the timeline of a Patroni run read from whether each node's
// PostgreSQL takes writes, recorded beside the REST API's role: there, named by its
// signal, from the first poll to the end of the history without a gap.
func writesHold(t *testing.T, res *results.Results) {
	t.Helper()
	w := res.Leaders.Writes
	if w == nil || len(w.Timeline) == 0 {
		t.Fatalf("no timeline by writes taken in a Patroni run: %s", res.Leaders)
	}
	if !strings.Contains(res.Leaders.Signal, "Patroni REST API") || !strings.Contains(w.Signal, "pg_is_in_recovery()") {
		t.Errorf("signals %q and %q", res.Leaders.Signal, w.Signal)
	}
	at := w.FromS
	for i, s := range w.Timeline {
		if math.Abs(s.StartS-at) > 0.0015 || s.EndS < s.StartS {
			t.Errorf("span %d (%+v) does not follow the one before, which ended at %.3f s", i, s, at)
		}
		at = s.EndS
	}
	if math.Abs(at-w.ToS) > 0.0015 {
		t.Errorf("the timeline by writes ends at %.3f s, not at %.3f s", at, w.ToS)
	}
}

// On loopback (no namespaces, the default), a Patroni run records its nodes' roles
// all the same: list-append under no fault, a handful of transactions; results.json's
// leaders (re-read from the history by the recheck) name one leader from the first
// poll, by Patroni's REST API and by the PostgreSQL that takes writes alike.
func TestPatroniLoopbackLeaders(t *testing.T) {
	t.Parallel() // a cluster of its own, launched by the run
	if err := patroni.Available(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	cfg := runner.Config{Workload: "list-append", Store: "postgres", Topology: runner.TopologyPatroni, Replication: "sync",
		Workers: 2, Ops: 40, Seed: 1, Retry: policy(t, "conflict")}
	res := processRun(t, cfg)
	if res.Verdict != checker.Valid {
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
	l := leadersHold(t, res)
	writesHold(t, res)
	first, byWrites := l.Timeline[0], l.Writes.Timeline[0]
	if len(first.Leaders) != 1 || len(byWrites.Leaders) != 1 || first.Leaders[0] != byWrites.Leaders[0] {
		t.Errorf("first spans %+v (REST API) and %+v (writes taken): want the one leader in both", first, byWrites)
	}
}

// longPatroni skips a Patroni run beyond the one the suite keeps, unless
// INDOUBT_PATRONI_LONG is set: each takes about a minute on two busy cores.
func longPatroni(t *testing.T) {
	t.Helper()
	if os.Getenv("INDOUBT_PATRONI_LONG") == "" {
		t.Skip("set INDOUBT_PATRONI_LONG=1: another minute-long Patroni run")
	}
}

// The Patroni leader killed (Patroni and its PostgreSQL at once) and started again 10 s
// later, synchronous mode on: the kill hits the node that leads when it fires and says
// which; Patroni fails over by itself, the killed node rejoins, and no acknowledged
// decrement is lost.
func TestPatroniSynchronousLeaderKilled(t *testing.T) {
	longPatroni(t)
	cfg := patroniBudget(t, "sync")
	cfg.Faults = parseSchedule(t, "kill@2s-12s")
	cfg.Topology, cfg.Network = runner.TopologyPatroni, ""
	res := processRun(t, cfg)
	t.Logf("%+v; %s", res.ProcessFaults, res.Summary)
	if res.Verdict != checker.Valid || res.LostTotal() != 0 {
		t.Fatalf("verdict %v, %d lost: %s", res.Verdict, res.LostTotal(), res.Summary)
	}
	faultsHappened(t, res, "kill", "start")
}
