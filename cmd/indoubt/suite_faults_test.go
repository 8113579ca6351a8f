package main

import (
	"os"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestFaultsSuite runs suites/faults.yaml: a failover case and a partition case, whose
// topology, replication and partition only a suite that can set every run option
// expresses. Both must meet their expectations; where network namespaces cannot be made
// (no root, no nft) the partition case is skipped with a note, never passed.
func TestFaultsSuite(t *testing.T) {
	t.Parallel() // topologies of its own, launched by its cases
	if err := runner.Available(runner.Postgres); err != nil {
		servertest.SkipOrFail(t, err)
	}
	dir := t.TempDir()
	code, out, errs := invoke(t, "suite", "--quiet", "--out", dir, "../../suites/faults.yaml")
	t.Logf("\n%s", out)
	if code != 0 {
		t.Fatalf("faults suite: exit %d\n%s%s", code, out, errs)
	}
	want := "suite faults: 2 passed, 0 failed, 0 skipped"
	if err := netns.Available(); err != nil && os.Getenv("CI") != "true" {
		want = "suite faults: 1 passed, 0 failed, 1 skipped"
		if !strings.Contains(out, "the case's network cannot be made here") {
			t.Errorf("the partition case's skip does not say why:\n%s", out)
		}
	}
	if !strings.Contains(out, want) {
		t.Errorf("want %q:\n%s", want, out)
	}
}

// A case whose partitions need network namespaces this machine cannot make (here: nft
// missing) is skipped with a note, as a case whose server is missing, before anything
// is launched; under CI=true it fails.
func TestSuiteCaseWithoutNetworkSkips(t *testing.T) {
	t.Setenv("INDOUBT_NFT", "/nonexistent/nft")
	suite := writeSuite(t, `cases:
  - name: partition
    store: postgres
    workload: insert
    topology: replicated
    faults: [partition:isolate-primary@1s-2s]
    time: 3s
    expect: valid
`)
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		out := t.TempDir()
		code, stdout, errs := invoke(t, "suite", "--quiet", "--out", out, suite)
		note := "the case's network cannot be made here: nft not found"
		if !strings.Contains(stdout, note) {
			t.Errorf("CI=%q: no note %q:\n%s%s", ci, note, stdout, errs)
		}
		switch {
		case ci == "true" && code != 1, ci == "" && (code != 0 || !strings.Contains(stdout, "0 passed, 0 failed, 1 skipped")):
			t.Errorf("CI=%q: exit %d:\n%s%s", ci, code, stdout, errs)
		}
		if left, _ := os.ReadDir(out); len(left) > 1 { // the summary page at most
			t.Errorf("CI=%q: --out holds %d entries: something ran", ci, len(left))
		}
	}
}
