package main

import (
	"bytes"
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

// asBinary runs the real main (signal handling, exit code) inside the test binary when
// INDOUBT_TEST_ARGS is set, so that tests can start indoubt as a process of its own and
// signal it.
func asBinary() {
	args := os.Getenv("INDOUBT_TEST_ARGS")
	if args == "" {
		return
	}
	os.Args = append([]string{"indoubt"}, strings.Split(args, "\x1f")...)
	if path := os.Getenv("INDOUBT_TEST_PEAK"); path != "" {
		beforeExit = func() {
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					os.WriteFile(path, []byte(strings.TrimSuffix(strings.TrimSpace(v), " kB")), 0o600)
				}
			}
		}
	}
	main()
}

// peakKB is the peak resident memory, in KiB, of the binary startBinary started, as
// the binary saw its own (VmHWM) as it exited; -1 when it did not say (it was killed).
// The rusage its parent reads will not do: a child started from the test's process
// (vfork, then exec) begins with the test's own peak as its maxrss.
func peakKB(t *testing.T, cmd *exec.Cmd) int64 {
	t.Helper()
	for _, e := range cmd.Env {
		if path, ok := strings.CutPrefix(e, "INDOUBT_TEST_PEAK="); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return -1
			}
			kb, err := strconv.ParseInt(string(b), 10, 64)
			if err != nil {
				t.Fatalf("peak memory %q: %v", b, err)
			}
			return kb
		}
	}
	return -1
}

// startBinary starts indoubt with args as a child process.
func startBinary(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunAsBinary$")
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_ARGS="+strings.Join(args, "\x1f"),
		"INDOUBT_TEST_PEAK="+filepath.Join(t.TempDir(), "peak"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &errb
}

// TestRunAsBinary is the entry point of the child processes of startBinary; on its
// own it does nothing.
func TestRunAsBinary(t *testing.T) { asBinary() }

// hardRegisterHistory writes a cas-register history whose search runs for minutes:
// writers concurrent writes that all succeed, concurrent with a read of a value none of
// them wrote, so that every order of every subset of the writes is kept before the
// read refuses them all.
func hardRegisterHistory(t *testing.T, writers int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"register","model":"cas-register","seed":1,"params":{"initial":0}}}` + "\n")
	i := 0
	ev := func(format string, a ...any) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,`+format+"}\n", append([]any{i, i}, a...)...)
		i++
	}
	ev(`"process":0,"type":"invoke","f":"read"`)
	for w := 1; w <= writers; w++ {
		ev(`"process":%d,"type":"invoke","f":"write","value":%d`, w, w)
	}
	for w := 1; w <= writers; w++ {
		ev(`"process":%d,"type":"ok","f":"write","value":%d`, w, w)
	}
	ev(`"process":0,"type":"ok","f":"read","value":-5`)
	path := filepath.Join(t.TempDir(), "hard.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckStopsOnSignal: a check with no --timeout of a history that takes minutes
// stops on SIGINT or SIGTERM, exit 2, saying it was interrupted (not a verdict the
// search would have reached had it run on).
func TestCheckStopsOnSignal(t *testing.T) {
	path := hardRegisterHistory(t, 24)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, out, errb := startBinary(t, "check", path)
			time.Sleep(time.Second) // well into the search
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The outcome is the verdict: a search that ran on to its end would say
			// valid or invalid, not interrupted. The minute only keeps a hang from
			// holding the suite.
			select {
			case <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running a minute after %v", sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Errorf("exit %d, want 2 (stdout %q, stderr %q)", code, out, errb)
			}
			if !strings.Contains(out.String(), "unknown") || !strings.Contains(out.String(), "interrupted") {
				t.Errorf("stdout %q does not say unknown, interrupted", out)
			}
		})
	}
}

// TestCheckRefusesWhatIsNotAHistory: input with no operations of its format, or a bad
// line among good ones, or events out of order, is refused: exit 3, one line naming
// the file and what was expected, never "valid: all 0 operations".
func TestCheckRefusesWhatIsNotAHistory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(i*7919 + i/13)
	}
	header := `{"header":{"format":"indoubt-history/1","workload":"register","model":"register","seed":1}}` + "\n"
	own := write("own.jsonl", header+`{"index":0,"process":0,"type":"invoke","f":"read"}`+"\n"+`{"index":1,"process":0,"type":"ok","f":"read","value":null}`+"\n")
	empty := write("empty", "")
	logLines := "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\tnil\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--model", "register", empty}, "empty: no history in it"},
		{[]string{"check", "--format", "jepsen-edn", "--model", "register", empty}, "no history in it: expected Jepsen op maps in EDN (--format jepsen-edn)"},
		{[]string{"check", "--format", "jepsen-log", "--model", "register", empty}, "no history in it: expected jepsen.util op lines (--format jepsen-log)"},
		{[]string{"check", "--format", "jepsen-log", "--model", "register", write("random", string(random))}, "random line 1: not a jepsen.util op line"},
		{[]string{"check", "--format", "jepsen-log", "--model", "register", own}, "own.jsonl line 1: not a jepsen.util op line"},
		{[]string{"check", "--format", "jepsen-edn", "--model", "register", own}, "own.jsonl line 1: "},
		{[]string{"check", "--format", "jepsen-log", "--model", "register", write("mixed.log", logLines+"garbage here\n"+logLines)}, `mixed.log line 3: not a jepsen.util op line (--skip-bad-lines skips such lines): "garbage here"`},
		{[]string{"check", "--format", "jepsen-log", "--skip-bad-lines", "--model", "register", write("none.log", "garbage\nmore garbage\n")}, "none.log: no history in it"},
		{[]string{"check", write("dup.jsonl", header+`{"index":0,"process":0,"type":"invoke","f":"read"}`+"\n"+`{"index":0,"process":0,"type":"ok","f":"read","value":null}`+"\n")}, "dup.jsonl line 3: event index 0 does not increase on index 0 of line 2"},
		{[]string{"check", write("rev.jsonl", header+`{"index":198,"process":0,"type":"invoke","f":"read"}`+"\n"+`{"index":176,"process":0,"type":"ok","f":"read","value":null}`+"\n")}, "rev.jsonl line 3: event index 176 does not increase on index 198 of line 2"},
		{[]string{"check", "--format", "jepsen-edn", "--model", "register", write("rev.edn", "{:index 5 :type :invoke :f :read :process 0}\n{:index 5 :type :ok :f :read :process 0 :value 1}\n")}, "rev.edn line 2: :index 5 does not increase on :index 5 of line 1"},
		{[]string{"check", "--fail-means", "sometimes", own}, "unknown --fail-means"},
		{[]string{"check", "--skip-bad-lines", own}, "--skip-bad-lines is for the Jepsen formats"},
	} {
		code, out, errs := invoke(t, tc.args...)
		if code != 3 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", tc.args[1:], code, errs, tc.want)
		}
		if strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%v: stderr %q, stdout %q; want one line on stderr only", tc.args[1:], errs, out)
		}
	}
	// A well-formed history in which no operation completed is not valid: nothing was
	// checked (exit 2), whatever its format.
	for _, args := range [][]string{
		{"check", write("header-only.jsonl", header)},
		{"check", write("invoked-only.jsonl", header+`{"index":0,"process":0,"type":"invoke","f":"read"}`+"\n")},
		{"check", "--format", "jepsen-edn", "--model", "register", write("nemesis.edn", "[{:type :info :f :start :process :nemesis}]")},
		{"check", "--format", "jepsen-log", "--model", "register", write("nemesis.log", "INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n")},
	} {
		if code, out, errs := invoke(t, args...); code != 2 || !strings.Contains(out, "unknown") || !strings.Contains(out, "nothing was checked: 0 operations completed") {
			t.Errorf("%v: exit %d (%s%s), want 2, nothing was checked", args[1:], code, out, errs)
		}
	}
	// The same log lines without the bad one, or with it skipped on request, check.
	for _, args := range [][]string{
		{"check", "--format", "jepsen-log", "--model", "register", write("good.log", logLines+logLines)},
		{"check", "--format", "jepsen-log", "--skip-bad-lines", "--model", "register", filepath.Join(dir, "mixed.log")},
	} {
		if code, out, errs := invoke(t, args...); code != 0 || !strings.Contains(out, "valid") {
			t.Errorf("%v: exit %d (%s%s), want 0, valid", args[1:], code, out, errs)
		}
	}
}

// TestCheckFailMeans judges the golden EDN history whose failed cas 4→4 is harmless
// under Jepsen's meaning and impossible under porcupine's, both ways, and the verdict
// line names the reading used.
func TestCheckFailMeans(t *testing.T) {
	path := filepath.Join("..", "..", "checker", "testdata", "jepsen-edn", "failed-cas-while-holding.edn")
	for _, tc := range []struct {
		args     []string
		code     int
		readAs   string
		verdictW string
	}{
		{[]string{"--format", "jepsen-edn"}, 0, "not-applied", "valid"},
		{[]string{"--format", "jepsen-edn", "--fail-means", "not-applied"}, 0, "not-applied", "valid"},
		{[]string{"--format", "jepsen-edn", "--fail-means", "compare-failed"}, 1, "compare-failed", "invalid"},
	} {
		args := append(append([]string{"check", "--model", "cas-register"}, tc.args...), path)
		code, out, errs := invoke(t, args...)
		if code != tc.code || !strings.Contains(out, ": "+tc.verdictW+" (cas-register, a failed cas read as "+tc.readAs+")") {
			t.Errorf("%v: exit %d, %q %q; want %d, %s read as %s", tc.args, code, out, errs, tc.code, tc.verdictW, tc.readAs)
		}
	}
	// jepsen-log keeps porcupine's convention: the same history as log lines is invalid.
	log := filepath.Join(t.TempDir(), "holding.log")
	os.WriteFile(log, []byte("INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:ok\t:write\t4\n"+
		"INFO  jepsen.util - 1\t:invoke\t:cas\t[4 4]\nINFO  jepsen.util - 1\t:fail\t:cas\t[4 4]\n"), 0o644)
	code, out, _ := invoke(t, "check", "--format", "jepsen-log", "--model", "cas-register", log)
	if code != 1 || !strings.Contains(out, "a failed cas read as compare-failed") {
		t.Errorf("jepsen-log: exit %d, %q; want 1, read as compare-failed", code, out)
	}
}
