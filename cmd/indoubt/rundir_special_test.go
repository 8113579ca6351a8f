package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBinary runs the binary with args to its end (killed, and the test failed, if it
// is still running after limit) and returns its exit code, stdout and stderr.
func runBinary(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	cmd, out, errb := startBinary(t, args...)
	waitBinary(t, cmd, limit)
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestRunDirSpecialFilesAreRefused: a run directory whose check.json, faults.jsonl or
// history.jsonl is a FIFO no program writes, or a link to /dev/zero, holds no command:
// check RUNDIR refuses it in one line naming the file, report refuses it (or, for
// check.json, renders the run unconfirmed and says why), and compare shows the run
// unconfirmed and says why. check.json was read whole by every one of them (/dev/zero:
// until memory ran out; a FIFO: forever), and faults.jsonl and history.jsonl by check
// RUNDIR and compare.
func TestRunDirSpecialFilesAreRefused(t *testing.T) {
	parent := t.TempDir()
	good := copyRun(t, naiveCut, filepath.Join(parent, "good"))
	for _, name := range []string{"check.json", "faults.jsonl", "history.jsonl"} {
		for _, kind := range []string{"FIFO", "device"} {
			t.Run(name+" "+kind, func(t *testing.T) {
				run := copyRun(t, naiveCut, filepath.Join(t.TempDir(), "run"))
				path := filepath.Join(run, name)
				os.Remove(path)
				if kind == "FIFO" {
					if err := syscall.Mkfifo(path, 0o600); err != nil {
						t.Skipf("no FIFO: %v", err)
					}
				} else if err := os.Symlink("/dev/zero", path); err != nil {
					t.Fatal(err)
				}
				want := name + " is a " + map[string]string{"FIFO": "FIFO", "device": "device"}[kind] + ", not a regular file"
				code, out, errs := runBinary(t, 2*time.Minute, "check", run)
				if code != 3 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, want) {
					t.Errorf("check RUNDIR: exit %d, stdout %q, stderr %q; want 3 and one line holding %q", code, out, errs, want)
				}
				code, _, errs = runBinary(t, 2*time.Minute, "report", run)
				if name == "check.json" {
					if code != 0 || !strings.Contains(errs, "could not be judged again") || !strings.Contains(errs, want) {
						t.Errorf("report: exit %d, stderr %q; want 0, unconfirmed because %q", code, errs, want)
					}
				} else if code != 3 || !strings.Contains(errs, want) {
					t.Errorf("report: exit %d, stderr %q; want 3 and %q", code, errs, want)
				}
				code, _, errs = runBinary(t, 2*time.Minute, "compare", run, good)
				if code != 0 || !strings.Contains(errs, "could not be judged again") || !strings.Contains(errs, want) {
					t.Errorf("compare: exit %d, stderr %q; want 0, unconfirmed because %q", code, errs, want)
				}
			})
		}
	}
}

// TestOutputPathsCheckedWithoutLeavingAnything: a FIFO no program reads, given as
// check --html or suite --junit, is refused in one line (opening it for writing used
// to wait for a reader, past any signal); a dangling link given as --html is left as
// it was when the check is refused, its target not created (the test file was removed
// in place of the file the open made: the link went, and an empty target stayed).
func TestOutputPathsCheckedWithoutLeavingAnything(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	hist := filepath.Join(naiveCut, "history.jsonl")
	for _, args := range [][]string{
		{"check", "--html", fifo, hist},
		{"suite", "--junit", fifo, filepath.Join("..", "..", "suites", "faults.yaml")},
	} {
		code, out, errs := runBinary(t, 2*time.Minute, args...)
		if code != 3 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "out.fifo is a FIFO no program reads") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and one line naming the FIFO", args, code, out, errs)
		}
	}
	link, target := filepath.Join(dir, "page.html"), filepath.Join(dir, "elsewhere.html")
	os.Symlink(target, link)
	code, _, errs := invoke(t, "check", "--html", link, hist)
	if code != 3 || !strings.Contains(errs, "--html applies to the register") {
		t.Fatalf("check --html of a budget history: exit %d, %s; want 3, refused", code, errs)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("the link given as --html is gone: %v", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("the dangling link's target %s was created", target)
	}
}

// TestSignalStopsTheJudgementOfARunDirectory: SIGTERM while report, compare or check
// RUNDIR reads a run directory's history of 600,000 events ends the command,
// interrupted (exit 2), and report draws no page: the history was read to its end
// whatever the signal, and report and compare then went on, exit 0, showing
// results.json as if the judgement had said unknown.
func TestSignalStopsTheJudgementOfARunDirectory(t *testing.T) {
	run := copyRun(t, naiveCut, filepath.Join(t.TempDir(), "big"))
	os.Remove(filepath.Join(run, "faults.jsonl"))
	var b strings.Builder
	const n = 300000
	fmt.Fprintf(&b, `{"header":{"format":"indoubt-history/1","workload":"budget","model":"budget","params":{"budget":%d}}}`+"\n", n)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"decrement","op_id":"%d"}`+"\n", 2*i, 2*i+1, i%64, i)
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"ok","f":"decrement","op_id":"%d","value":{"applied":true,"balance":%d}}`+"\n", 2*i+1, 2*i+2, i%64, i, n-i-1)
	}
	hist := filepath.Join(run, "history.jsonl")
	if err := os.WriteFile(hist, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"report", run}, {"compare", run, naiveCut}, {"check", run}} {
		cmd, out, errb := startBinary(t, args...)
		waitHolding(t, cmd.Process.Pid, hist)
		cmd.Process.Signal(syscall.SIGTERM)
		waitBinary(t, cmd, 2*time.Minute)
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(errb.String(), "interrupted") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, interrupted", args, code, cut(out.String(), 200), errb)
		}
	}
	if _, err := os.Stat(filepath.Join(run, "report.html")); err == nil {
		t.Errorf("an interrupted report drew report.html")
	}
}
