package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// escapees is a program body that starts two processes outside its process group, as
// daemons do: one in a new session (setsid), one in a process group of its own (job
// control), and writes their pids to path once both run.
func escapees(path string) string {
	return `setsid sleep 300 &
s=$!
set -m
sleep 300 &
g=$!
set +m
echo $s $g > ` + path + `
`
}

// TestExecContainsWhatLeavesItsGroup: what the program started in a new session or a
// process group of its own ends when the program does (a setsid daemon used to
// survive it and write into its history after it exited).
func TestExecContainsWhatLeavesItsGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	prog := script(t, escapees(pids)+`
ev invoke apply 0 p-1
ev ok apply 0 p-1
ev invoke read 1 final
ev ok read 1 final ',"value":{"p-1":1}'
`)
	code, stdout, stderr := invoke(t, execArgsFor(t.TempDir(), "--", prog)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	waitGone(t, "after the program ended", readPids(t, pids)...)
}

// TestExecKilledContainsWhatLeavesItsGroup: indoubt killed with SIGKILL takes with it
// what the program started outside its process group (a child that changed its group
// used to survive).
func TestExecKilledContainsWhatLeavesItsGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	prog := script(t, escapees(pids)+"wait\n")
	cmd, _, _ := startBinary(t, execArgsFor(t.TempDir(), "--", prog)...)
	ps := readPids(t, pids)
	cmd.Process.Kill()
	defer cmd.Wait()
	waitGone(t, "after indoubt was killed", ps...)
}

// TestExecRefusesWhatTheProgramMayNotDo: an op id reserved for the final read on
// another operation (a whole history was "nothing was checked"), a header rewritten to
// another model than --model (which it silently overrode), and a --store that the
// DSN's scheme contradicts are refused with one line, exit 3.
func TestExecRefusesWhatTheProgramMayNotDo(t *testing.T) {
	reserved := script(t, `ev invoke apply 0 final
ev ok apply 0 final
`)
	code, _, stderr := invoke(t, execArgsFor(t.TempDir(), "--final-cmd", `echo '{"final":1}'`, "--", reserved)...)
	if code != 3 || !strings.Contains(stderr, `op id "final" is reserved for the final read, and this is a apply`) {
		t.Errorf("reserved op id: exit %d, stderr %q", code, stderr)
	}
	rewrite := script(t, `printf '{"header":{"format":"indoubt-history/1","model":"register"}}\n' > "$INDOUBT_HISTORY"
ev invoke read 0 r-1
ev ok read 0 r-1 ',"value":null'
`)
	code, _, stderr = invoke(t, execArgsFor(t.TempDir(), "--", rewrite)...)
	if code != 3 || !strings.Contains(stderr, `the program's history names model "register", but --model is exactly-once`) {
		t.Errorf("rewritten header: exit %d, stderr %q", code, stderr)
	}
	prog := script(t, "true\n")
	wantRefused(t, "exec: --store redis, but the DSN's scheme postgres:// is postgres's", "exec", "--store", "redis", "--dsn", "postgres://app@127.0.0.1:1/app", "--", prog)
	// CockroachDB speaks PostgreSQL's protocol: its postgres:// DSN agrees, and the run
	// goes on to the program (which records nothing).
	code, _, stderr = invoke(t, "exec", "--quiet", "--out", t.TempDir(), "--store", "cockroach", "--dsn", "postgres://root@127.0.0.1:1/app", "--", prog)
	if code != 3 || !strings.Contains(stderr, "exec: the program (exited 0) wrote no history") {
		t.Errorf("--store cockroach with a postgres:// DSN: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(prog); err != nil {
		t.Fatal(err)
	}
}
