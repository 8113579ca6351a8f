package runner_test

import (
	"os"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// A Galera cluster of three MariaDB nodes, each in a network namespace of its own, the
// budget's clients spread over them, n1 cut off from n2 and n3 (and from the clients
// beside them) for three seconds. n1, alone, leaves the primary component and refuses
// every statement (1047) until it has rejoined; a COMMIT it was replicating when the
// partition began is answered 1180 and ends unknown. The run is valid, or invalid by
// an acknowledged decrement lost, which the checker names (a finding on Galera,
// docs/findings.md: seen in some runs, not in others); anything else fails, and the
// verdict must be the one indoubt check reproduces.
//
// It runs only with INDOUBT_GALERA=1: about 45 s, and Galera's own failures (one run in
// five lost a write, another showed mariadbd's crash banner) would make it flaky.
func TestPartitionGaleraBudget(t *testing.T) {
	if os.Getenv("INDOUBT_GALERA") == "" {
		t.Skip("a Galera cluster under a partition: set INDOUBT_GALERA=1")
	}
	if err := mariadb.FindGalera(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	t.Parallel() // a topology of its own
	cfg := runner.Config{Workload: "budget", Store: runner.MySQL, Topology: runner.TopologyReplicated, Budget: 1_000_000_000,
		Workers: 3, Duration: 7 * time.Second, Seed: 1, Retry: policy(t, "none"),
		Faults: parseSchedule(t, "partition:isolate-primary@2s-5s")}
	res := partitionRun(t, cfg)
	p := res.Partitions[0]
	if len(p.Components) != 2 {
		t.Fatalf("partition %+v: want n1 apart from n2 and n3", p)
	}
	switch {
	case res.Verdict == checker.Valid:
	case res.Verdict == checker.Invalid && len(res.LostWrites) > 0:
		t.Logf("finding reproduced: Galera lost %d acknowledged decrement(s): %s", len(res.LostWrites), res.Summary)
	default:
		t.Fatalf("verdict %v (lost writes %+v): %s", res.Verdict, res.LostWrites, res.Summary)
	}
	t.Logf("%s; %s", p, res.Summary)
}
