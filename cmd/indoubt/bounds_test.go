package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startBinaryWithin is startBinary with the child's address space bounded to kb
// kilobytes (ulimit -v): a regression that allocates without bound fails the child,
// not the machine.
func startBinaryWithin(t *testing.T, kb int, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "ulimit -v "+strconv.Itoa(kb)+` && exec "$0" "$@"`, os.Args[0], "-test.run=^TestRunAsBinary$")
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_ARGS="+strings.Join(args, "\x1f"))
	return cmd
}

// TestReportOfAHugeTimeSpanIsBounded: a history whose times span 1e17 to 1e18 ns (a
// billion seconds) is drawn in bins that widen, not one per second: it used to take
// 5.4 GB. Rendered here within a 2 GB address space.
func TestReportOfAHugeTimeSpanIsBounded(t *testing.T) {
	run := copyRun(t, naiveCut, filepath.Join(t.TempDir(), "span"))
	os.Remove(filepath.Join(run, "faults.jsonl"))
	b, err := os.ReadFile(filepath.Join(run, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var out strings.Builder
	out.WriteString(lines[0] + "\n")
	step := int64(9e17) / int64(len(lines))
	for i, l := range lines[1:] {
		at := strings.Index(l, `"time":`)
		end := at + 7 + strings.IndexAny(l[at+7:], ",}")
		out.WriteString(l[:at+7] + strconv.FormatInt(1e17+int64(i)*step, 10) + l[end:] + "\n")
	}
	os.WriteFile(filepath.Join(run, "history.jsonl"), []byte(out.String()), 0o644)
	cmd := startBinaryWithin(t, 2<<20, "report", run)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("report of a 1e9-second history within 2 GB: %v\n%s", err, cut(string(b), 2000))
	}
	if fi, err := os.Stat(filepath.Join(run, "report.html")); err != nil || fi.Size() > 20<<20 {
		t.Errorf("report.html: %v, want a page of a few megabytes at most", err)
	}
}

// TestCheckInputsAreBounded: --final /dev/zero is refused past its bound (it was read
// until memory ran out: 10 GB at 68 s), --time of a century is refused; a FIFO no
// program writes, as the history or as --final, is refused at once as empty (its open
// used to wait for a writer, even past --timeout); and a FIFO whose writer never
// writes holds check no longer than SIGTERM.
func TestCheckInputsAreBounded(t *testing.T) {
	hist := filepath.Join("..", "..", "checker", "testdata", "exactly-once", "valid.jsonl")
	wantRefused(t, "check: --final: /dev/zero is longer than", "check", "--final", "/dev/zero", hist)
	wantRefused(t, "run: --time: must be at most 168h0m0s (got 1000000h0m0s)", "run", "--time", "1000000h")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	wantRefused(t, "fifo: no history in it", "check", "--timeout", "2s", fifo)
	wantRefused(t, "fifo: no history in it", "check", "--format", "jepsen-edn", "--model", "list-append", fifo)
	wantRefused(t, "check: --final "+fifo+": not a JSON value", "check", "--final", fifo, hist)
	// A writer that holds the FIFO open and never writes (opened read-write, which
	// does not wait for a reader).
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, args := range [][]string{{"check", fifo}, {"check", "--final", fifo, hist}} {
		cmd, out, errb := startBinary(t, args...)
		waitHolding(t, cmd.Process.Pid, fifo)
		cmd.Process.Signal(syscall.SIGTERM)
		waitBinary(t, cmd, time.Minute)
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(errb.String(), "interrupted") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, interrupted", args, code, out, errb)
		}
	}
}

// waitHolding waits until process pid has path open: then it has its signal handler
// (the context), which is set up before any input is opened.
func waitHolding(t *testing.T, pid int, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == path {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process %d never opened %s", pid, path)
}

// TestShrinkWithinBudgetOverALeftover: a run whose config.json asks for a run of 1e18
// ns is shrunk within --budget (its baseline used to run on past it, still at 60 s
// with 15 s given), and the directory a killed shrink left (its marker, no
// shrink.json) does not block the next one; any other directory there does.
func TestShrinkWithinBudgetOverALeftover(t *testing.T) {
	parent := t.TempDir()
	run := copyRun(t, naiveCut, filepath.Join(parent, "run"))
	var cfg map[string]any
	readJSON(t, filepath.Join(run, "config.json"), &cfg)
	cfg["duration"], cfg["ops_per_worker"] = 1e18, 0
	writeJSON(t, filepath.Join(run, "config.json"), cfg)
	out := run + ".shrink"
	os.MkdirAll(out, 0o700)
	wantRefused(t, out+" exists", "shrink", "--budget", "5s", run)
	os.WriteFile(filepath.Join(out, ".indoubt-shrink"), nil, 0o600)
	os.WriteFile(filepath.Join(out, "left.txt"), nil, 0o600)
	code, stdout, stderr := invoke(t, "shrink", "--budget", "5s", run)
	if strings.Contains(stderr, "not installed") {
		t.Skip(stderr)
	}
	if code != 2 || !strings.Contains(stderr, "before the time budget (5s) was spent") {
		t.Errorf("shrink of a 1e18 ns run: exit %d, stdout %q, stderr %q; want 2, the budget spent", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "left.txt")); err == nil {
		t.Errorf("the leftover of a killed shrink is still there")
	}
}

// TestCheckMaxMemoryHoldsForTransactions: --max-memory bounds the transactional
// checkers as it bounds the register search: a bound the check cannot keep to ends it
// unknown, naming the bound (64 MiB asked, 214 MB used and a verdict given, before).
func TestCheckMaxMemoryHoldsForTransactions(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append"}}` + "\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":0,"type":"invoke","f":"txn","value":[["append",%d,%d],["r",%d,null]]}`+"\n", 2*i, 2*i, i%10, i, i%10)
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":0,"type":"ok","f":"txn","value":[["append",%d,%d],["r",%d,[%d]]]}`+"\n", 2*i+1, 2*i+1, i%10, i, i%10, i)
	}
	path := writeFile(t, "la.jsonl", b.String())
	code, out, errs := invoke(t, "check", "--max-memory", "1MiB", path)
	if code != 2 || !strings.Contains(out, "unknown (list-append): the 1 MiB memory bound ran out") {
		t.Errorf("exit %d, stdout %q, stderr %q; want unknown naming the 1 MiB bound", code, out, errs)
	}
}

// TestCheckConsoleOutputIsBounded: the explanation of a long cycle is shown in part on
// the console, saying how much was left out and where it all is (a cycle of 20,000
// transactions printed 2.25 MB); --json has every step.
func TestCheckConsoleOutputIsBounded(t *testing.T) {
	const n = 300
	var b strings.Builder
	b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append","params":{"consistency_models":["serializable"]}}}` + "\n")
	i := 0
	txn := func(inv, ok string) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"txn","value":%s}`+"\n", 2*i, 2*i, i, inv)
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"ok","f":"txn","value":%s}`+"\n", 2*i+1, 2*i+1, i, ok)
		i++
	}
	// Transaction k appends to keys k and k+1, each key's read orders the two appends
	// to it: a write cycle through all n.
	for k := 0; k < n; k++ {
		v := fmt.Sprintf(`[["append",%d,%d],["append",%d,%d]]`, k, 1000000+k, (k+1)%n, 2000000+k)
		txn(v, v)
	}
	for k := 0; k < n; k++ {
		txn(fmt.Sprintf(`[["r",%d,null]]`, k), fmt.Sprintf(`[["r",%d,[%d,%d]]]`, k, 2000000+(k+n-1)%n, 1000000+k))
	}
	path := writeFile(t, "cycle.jsonl", b.String())
	code, out, errs := invoke(t, "check", path)
	if code != 1 || !strings.Contains(out, "G0: a cycle of 300 transactions") || !strings.Contains(out, "lines more (--json has them all)") || len(out) > 16<<10 {
		t.Errorf("exit %d, %d bytes of stdout, stderr %q; want the G0 cycle in at most 16 KB, saying where the rest is:\n%s", code, len(out), errs, cut(out, 3000))
	}
	code, out, _ = invoke(t, "check", "--json", path)
	if code != 1 || strings.Count(out, "right after") < n {
		t.Errorf("--json: exit %d, %d steps; want all %d", code, strings.Count(out, "right after"), n)
	}
}
