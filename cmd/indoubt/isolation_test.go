package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// Bad input to indoubt isolation is one line on stderr and exit 3, before any server
// is launched.
func TestIsolationBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"isolation", "--levels", "snapshot"},
		{"isolation", "--dsn", "postgres://x@127.0.0.1:1/x", "--pg-version", "18"},
		{"isolation", "--txns", "-1"},
		{"isolation", "extra"},
		{"isolation", "--bogus"},
	} {
		code, _, stderr := invoke(t, args...)
		if code != exitCouldNot || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "isolation") {
			t.Errorf("%v: exit %d, stderr %q; want exit 3 and one line", args, code, stderr)
		}
	}
}

// indoubt isolation on a server it launches: the table on stdout, isolation.json in
// the measurement's directory with every cell of the level asked for and the cost of
// the random workload, exit 0 when the table agrees with Hermitage's.
func TestIsolationCommand(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := invoke(t, "isolation", "--pg-version", "15", "--levels", "read-committed", "--txns", "10", "--workers", "2", "--out", out)
	if code == exitCouldNot {
		if strings.Contains(stderr, "no PostgreSQL 15") {
			servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "postgres", Program: "postgres", Hint: stderr})
		}
		t.Fatalf("exit 3: %s", stderr)
	}
	if !strings.Contains(stdout, "P4") || !strings.Contains(stdout, "OBSERVED (lost-update)") || !strings.Contains(stdout, "committed/s") {
		t.Errorf("the table lacks P4 observed or the cost rows:\n%s", stdout)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*-isolation-postgresql-15*", "isolation.json"))
	if len(files) != 1 {
		t.Fatalf("isolation.json files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var tab isolation.Table
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Cells) != len(isolation.Anomalies()) || len(tab.Costs) != 1 || tab.Costs[0].Committed == 0 {
		t.Errorf("isolation.json has %d cells and costs %+v", len(tab.Cells), tab.Costs)
	}
	want := exitValid
	if len(tab.Findings()) > 0 {
		want = exitInvalid
	}
	if code != want {
		t.Errorf("exit %d with %d findings: %s", code, len(tab.Findings()), stderr)
	}
}

// The transactional workloads' flags of indoubt run refuse bad values in one line that
// names the flag, exit 3, before anything is launched.
func TestTxnRunFlagsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--workload", "list-append", "--txn-keys", "-1"}, "--txn-keys"},
		{[]string{"--workload", "rw-register", "--pattern", "sideways"}, "--pattern"},
		{[]string{"--workload", "list-append", "--consistency-models", "bogus"}, "--consistency-models"},
		{[]string{"--workload", "budget", "--read-from", "standby"}, "--read-from"},
		{[]string{"--workload", "list-append", "--read-from", "standby"}, "--read-from"},
	} {
		code, _, stderr := invoke(t, append([]string{"run", "--store", "postgres", "--out", t.TempDir()}, c.args...)...)
		if code != exitCouldNot || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.flag) {
			t.Errorf("%v: exit %d, stderr %q; want exit 3, one line naming %s", c.args, code, stderr, c.flag)
		}
	}
}
