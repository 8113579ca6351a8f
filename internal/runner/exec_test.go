package runner_test

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/supervise"
)

// superviseMain is the test binary started again by runner.Exec as the program's
// supervisor (it stands in for indoubt, whose exec command calls supervise.Main): its
// arguments are supervise.SelfArgs, then the program's.
func superviseMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 || supervise.Main(ctx, os.Args[2:]) != nil {
		return 3
	}
	return 0
}

// execProgram writes a shell program that appends to its history one apply of p-1 and,
// with twice, a second apply of p-1's id under another op id, then exits with exit.
func execProgram(t *testing.T, exit string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prog.sh")
	src := `#!/bin/sh
i=0
ev() { printf '{"index":%d,"time":%s,"process":0,"type":"%s","f":"apply","op_id":"%s"}\n' "$i" "$(date +%s%N)" "$1" "$2" >>"$INDOUBT_HISTORY"; i=$((i+1)); }
ev invoke p-1
ev ok p-1
exit ` + exit + "\n"
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExecJudgesWhatTheProgramRecorded runs a program under runner.Exec (the proxy in
// front of an address nothing listens on: the program needs no server) and holds its
// results to the final read it was given: exactly once is valid, twice invalid; a
// valid history of a program that exited 3 is exit 2. The run directory is published
// whole, with nothing .partial left.
func TestExecJudgesWhatTheProgramRecorded(t *testing.T) {
	store, ok := runner.ProgramStore(string(runner.Postgres))
	if !ok {
		t.Fatal("no postgres in the program stores")
	}
	for _, c := range []struct {
		name, final, exit string
		verdict           checker.Verdict
		code              int
		says              string
	}{
		{"applied once", `{"p-1":1}`, "0", checker.Valid, 0, "prog.sh exited 0 after"},
		{"applied twice", `{"p-1":2}`, "0", checker.Invalid, 1, "prog.sh exited 0 after"},
		{"valid but the program failed", `{"p-1":1}`, "3", checker.Valid, 2, "the verdict covers only what it recorded (exit 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			var console, warn bytes.Buffer
			x, err := runner.Exec(context.Background(), runner.ExecConfig{
				Store: store, Upstream: "127.0.0.1:9", Seed: 1, Out: out, Model: checker.ExactlyOnceModel,
				FinalCmd: "echo '" + c.final + "'", Grace: time.Second, Argv: []string{execProgram(t, c.exit)},
				Console: &console, Warn: &warn,
			})
			if err != nil {
				t.Fatal(err)
			}
			if x.Results.Verdict != c.verdict || x.Code != c.code {
				t.Errorf("verdict %v exit %d, want %v exit %d: %s", x.Results.Verdict, x.Code, c.verdict, c.code, x.Results.Summary)
			}
			if !strings.Contains(console.String(), c.says) {
				t.Errorf("console %q, want it to say %q", console.String(), c.says)
			}
			entries, _ := os.ReadDir(out)
			if len(entries) != 1 || strings.HasSuffix(entries[0].Name(), ".partial") || x.Results.RunDir != filepath.Join(out, entries[0].Name()) {
				t.Fatalf("run directories %v, results name %s", entries, x.Results.RunDir)
			}
			for _, f := range []string{"history.jsonl", rundir.FaultsFile, "results.json", "report.html", rundir.ConfigFile, "program.json"} {
				if _, err := os.Stat(filepath.Join(x.Results.RunDir, f)); err != nil {
					t.Errorf("the run directory lacks %s: %v", f, err)
				}
			}
		})
	}
}
