package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// writeFile writes text to name in a temporary directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantRefused runs indoubt with args and wants exit 3 with one line on stderr holding
// want, and nothing on stdout.
func wantRefused(t *testing.T, want string, args ...string) {
	t.Helper()
	code, out, errs := invoke(t, args...)
	if code != 3 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 || out != "" {
		t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and one line holding %q", args[1:], code, out, errs, want)
	}
}

// TestCheckEDNRefusesBytesThatAreNotEDN: a NUL (or any control byte) between the ops
// of an EDN history refuses it at its line; it used to end the history there, and the
// ops after it went unchecked ("valid ... all 1 operations").
func TestCheckEDNRefusesBytesThatAreNotEDN(t *testing.T) {
	write1 := "{:type :invoke, :f :write, :process 0, :value 1}\n{:type :ok, :f :write, :process 0, :value 1}\n"
	read2 := "{:type :invoke, :f :read, :process 0}\n{:type :ok, :f :read, :process 0, :value 2}\n"
	for _, tc := range []struct{ name, between, want string }{
		{"nul line", "\x00\n", "line 3: byte 0x00 is not EDN"},
		{"nul after a value", "\x00", "line 3: byte 0x00 is not EDN"},
		{"escape byte", "\x1b[2J\n", "line 3: byte 0x1b is not EDN"},
		{"del", "\x7f\n", "line 3: byte 0x7f is not EDN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "h.edn", write1+tc.between+read2)
			wantRefused(t, "h.edn "+tc.want, "check", "--format", "jepsen-edn", "--model", "register", path)
			vec := writeFile(t, "v.edn", "["+write1+tc.between+read2+"]")
			wantRefused(t, "v.edn "+tc.want, "check", "--format", "jepsen-edn", "--model", "register", vec)
		})
	}
	// Inside an op map too, where it used to become part of a symbol.
	inMap := writeFile(t, "m.edn", write1+"{:type :invoke, :f :read, \x00 :process 0}\n")
	wantRefused(t, "m.edn line 3: byte 0x00 is not EDN", "check", "--format", "jepsen-edn", "--model", "register", inMap)
	// Without the byte, the stale read is found.
	path := writeFile(t, "h.edn", write1+read2)
	if code, out, errs := invoke(t, "check", "--format", "jepsen-edn", "--model", "register", path); code != 1 {
		t.Errorf("without the NUL: exit %d (%s%s), want 1, invalid", code, out, errs)
	}
}

// exactlyOnceHistory writes an exactly-once history of n applies, one after another,
// then the final read that lists every op id once on one line, as a run writes it, and
// returns its path and the length of that line.
func exactlyOnceHistory(t *testing.T, n int) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "eo.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(`{"header":{"format":"indoubt-history/1","workload":"insert","model":"exactly-once","seed":1}}` + "\n")
	var b []byte
	for i := range n {
		id := strconv.Itoa(i%16) + "-" + strconv.Itoa(i/16)
		for k, typ := range []string{"invoke", "ok"} {
			b = append(b[:0], `{"index":`...)
			b = strconv.AppendInt(b, int64(2*i+k), 10)
			b = append(b, `,"time":`...)
			b = strconv.AppendInt(b, int64(2*i+k), 10)
			b = append(b, `,"process":`...)
			b = strconv.AppendInt(b, int64(i%16), 10)
			b = append(b, `,"type":"`+typ+`","f":"apply","op_id":"`+id+`"}`+"\n"...)
			w.Write(b)
		}
	}
	fmt.Fprintf(w, `{"index":%d,"time":%d,"process":16,"type":"invoke","f":"read","op_id":"final-0"}`+"\n", 2*n, 2*n)
	b = fmt.Appendf(b[:0], `{"index":%d,"time":%d,"process":16,"type":"ok","f":"read","op_id":"final-0","value":{`, 2*n+1, 2*n+1)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(i%16), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(i/16), 10)
		b = append(b, `":1`...)
	}
	b = append(b, "}}\n"...)
	w.Write(b)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, len(b)
}

// TestCheckReadsTheLongestLineARunWrites: the final read of an insert run of 16 workers
// and 25,000 operations each (400,000 op ids) is a line of over 5 MB; indoubt check
// reads it back (a line may be as long as the history before it) and the history is
// valid. It used to be refused, "line longer than 4194304 bytes", and the run that
// wrote it lost its run directory. (histories' TestReaderReadsAMillionOpIDs reads the
// 14 MB final read of a million.)
func TestCheckReadsTheLongestLineARunWrites(t *testing.T) {
	path, line := exactlyOnceHistory(t, 400_000)
	if line <= histories.MaxLine {
		t.Fatalf("the final read is %d bytes, not longer than MaxLine", line)
	}
	// A process of its own: the check holds the million operations in memory.
	cmd, out, errb := startBinary(t, "check", path)
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), ": valid (exactly-once)") {
		t.Fatalf("%d-byte final read: %v, stdout %q, stderr %q; want valid", line, err, out, errb)
	}
}

// TestCheckRefusesNumbersNoHistoryHolds: an indoubt history with a negative index, a
// process below the nemesis's -1 (which used to be taken for the nemesis, its
// operations unchecked), or a completion earlier than its invocation is refused at
// its line.
func TestCheckRefusesNumbersNoHistoryHolds(t *testing.T) {
	const header = `{"header":{"format":"indoubt-history/1","workload":"register","model":"register","seed":1,"params":{"initial":0}}}` + "\n"
	const stale = `{"index":2,"time":5,"process":0,"type":"invoke","f":"read"}` + "\n" + `{"index":3,"time":6,"process":0,"type":"ok","f":"read","value":2}` + "\n"
	for _, tc := range []struct{ name, events, want string }{
		{"negative index", `{"index":-5,"time":1,"process":0,"type":"invoke","f":"write","value":1}` + "\n" + `{"index":1,"time":2,"process":0,"type":"ok","f":"write","value":1}` + "\n",
			"h.jsonl line 2: event index -5 is negative"},
		{"process -7", `{"index":0,"time":1,"process":-7,"type":"invoke","f":"write","value":2}` + "\n" + `{"index":1,"time":2,"process":-7,"type":"ok","f":"write","value":2}` + "\n",
			"h.jsonl line 2: process -7: a process is a worker's number (0 or more) or -1 for the nemesis"},
		{"completion before invocation", `{"index":0,"time":100,"process":1,"type":"invoke","f":"write","value":1}` + "\n" + `{"index":1,"time":4,"process":1,"type":"ok","f":"write","value":1}` + "\n",
			"h.jsonl line 3: completion of process 1 at time 4 is earlier than its invocation at time 100 on line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "h.jsonl", header+tc.events+stale)
			wantRefused(t, tc.want, "check", path)
		})
	}
}

// TestCheckEDNRefusesDevZeroAtOnce: /dev/zero as an EDN history is refused at its first
// byte (it used to be read whole: 615 MB in 4 s, and SIGINT did not stop it).
func TestCheckEDNRefusesDevZeroAtOnce(t *testing.T) {
	wantRefused(t, "/dev/zero line 1: byte 0x00 is not EDN", "check", "--format", "jepsen-edn", "--model", "register", "/dev/zero")
}

// TestCheckEDNStopsOnSignal: an EDN history that never ends (a pipe a program keeps
// writing ops to) is read as it comes, and SIGINT stops the check, exit 2,
// interrupted. It used to be read whole before anything looked at the signal.
func TestCheckEDNStopsOnSignal(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "endless.edn")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	stop := make(chan struct{})
	wrote := make(chan int64, 1)
	go func() {
		var n int64
		defer func() { wrote <- n }()
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k, err := fmt.Fprintf(w, "{:type :invoke, :f :write, :process 0, :value %d}\n{:type :ok, :f :write, :process 0, :value %d}\n", i, i)
			if err != nil {
				return
			}
			n += int64(k)
		}
	}()
	cmd, out, errb := startBinary(t, "check", "--format", "jepsen-edn", "--model", "register", fifo)
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A pipe that never ends is never read whole: that the check ends at all, and
	// says interrupted, is the outcome. The minute only keeps a hang from holding
	// the suite.
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running a minute after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(out.String(), "interrupted") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, interrupted", code, out, errb)
	}
	close(stop)
	if n := <-wrote; n == 0 {
		t.Errorf("the check read nothing of the pipe")
	}
}

// TestCheckEDNRefusesOpsItCannotCheck: EDN ops whose :process is a string or a keyword
// other than :nemesis used to be dropped as the nemesis's (a stale read among them
// was valid; a file of only such ops had "no history in it"); now they are refused at
// their line, as are a negative process, a negative :index and a completion earlier
// than its invocation.
func TestCheckEDNRefusesOpsItCannotCheck(t *testing.T) {
	w1 := "{:type :invoke, :f :write, :process 0, :value 1, :time 1}\n{:type :ok, :f :write, :process 0, :value 1, :time 2}\n"
	for _, tc := range []struct{ name, ops, want string }{
		{"string process", `{:type :invoke, :f :read, :process "r1", :time 3}` + "\n" + `{:type :ok, :f :read, :process "r1", :value 2, :time 4}`,
			`h.edn line 3: :process "r1" is neither a worker's number nor :nemesis`},
		{"keyword process", "{:type :invoke, :f :read, :process :reader, :time 3}\n{:type :ok, :f :read, :process :reader, :value 2, :time 4}",
			"h.edn line 3: :process :reader is neither a worker's number nor :nemesis"},
		{"process -7", "{:type :invoke, :f :read, :process -7, :time 3}\n{:type :ok, :f :read, :process -7, :value 2, :time 4}",
			"h.edn line 3: process -7 out of range"},
		{"completion before invocation", "{:type :invoke, :f :read, :process 1, :time 30}\n{:type :ok, :f :read, :process 1, :value 2, :time 4}",
			"h.edn line 4: completion of process 1 at time 4 is earlier than its invocation at time 30 on line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, tc.want, "check", "--format", "jepsen-edn", "--model", "register", writeFile(t, "h.edn", w1+tc.ops))
		})
	}
	only := writeFile(t, "h.edn", `{:type :invoke, :f :read, :process "r1"}`+"\n"+`{:type :ok, :f :read, :process "r1", :value 2}`)
	wantRefused(t, `h.edn line 1: :process "r1" is neither`, "check", "--format", "jepsen-edn", "--model", "register", only)
	neg := writeFile(t, "h.edn", "{:index -5, :type :invoke, :f :read, :process 1}\n{:index 2, :type :ok, :f :read, :process 1, :value 2}")
	wantRefused(t, "h.edn line 1: :index -5 is negative", "check", "--format", "jepsen-edn", "--model", "register", neg)
	// The nemesis stays the nemesis.
	nem := writeFile(t, "h.edn", "{:type :info, :f :start, :process :nemesis, :time 0}\n"+w1)
	if code, out, errs := invoke(t, "check", "--format", "jepsen-edn", "--model", "register", nem); code != 0 {
		t.Errorf("with a nemesis op: exit %d (%s%s), want 0", code, out, errs)
	}
}

// waitBinary waits up to limit for cmd, killing it after.
func waitBinary(t *testing.T, cmd *exec.Cmd, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running after %v", limit)
	}
}

// TestCheckSearchBounds: a register search that needs exponential memory stops at
// --max-memory, and one that needs exponential time at --timeout: unknown (exit 2),
// the summary naming the bound, and the process's peak memory near the bound. Without
// them a search of this history grew until the machine ran out (--timeout did not bound
// the memory of a long one either: 8 GB after 28 s of a 20 s timeout).
func TestCheckSearchBounds(t *testing.T) {
	path := hardRegisterHistory(t, 24)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-memory", "128MiB"}, "unknown (cas-register, a failed cas read as compare-failed): the 128 MiB memory bound ran out before the register could be decided (1 of 1 keys)"},
		{[]string{"--timeout", "1s", "--max-memory", "2GiB"}, "unknown (cas-register, a failed cas read as compare-failed): the 1s timeout expired before the register could be decided (1 of 1 keys)"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			cmd, out, errb := startBinary(t, append(append([]string{"check"}, tc.args...), path)...)
			waitBinary(t, cmd, 2*time.Minute)
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errb, tc.want)
			}
			if kb := peakKB(t, cmd); tc.args[0] == "--max-memory" && (kb < 0 || kb > 3*128<<10) {
				t.Errorf("peak memory %d KiB, for a bound of 128 MiB", kb)
			}
		})
	}
	// A --json result says which bound ran out.
	cmd, out, _ := startBinary(t, "check", "--json", "--max-memory", "128MiB", path)
	waitBinary(t, cmd, 2*time.Minute)
	if !strings.Contains(out.String(), `"bound": "memory"`) {
		t.Errorf("--json: %s; want details.bound memory", out)
	}
	wantRefused(t, `--max-memory: "lots" is not a size`, "check", "--max-memory", "lots", path)
}

// registerSequentialHistory writes n writes of one register, one after another, in
// indoubt's JSONL or as Jepsen EDN.
func registerSequentialHistory(t *testing.T, n int, edn bool) string {
	t.Helper()
	var b strings.Builder
	if !edn {
		b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"register","model":"register","seed":1}}` + "\n")
	}
	for i := range n {
		for k, typ := range []string{"invoke", "ok"} {
			if edn {
				fmt.Fprintf(&b, "{:index %d, :time %d, :type :%s, :process 0, :f :write, :value %d}\n", 2*i+k, 2*i+k, typ, i)
			} else {
				fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":0,"type":"%s","f":"write","value":%d}`+"\n", 2*i+k, 2*i+k, typ, i)
			}
		}
	}
	return writeFile(t, "seq.history", b.String())
}

// TestCheckLongRegisterHistoryInLinearMemory: 200,000 writes of one register, one after
// another, are checked within 384 MiB, in JSONL and in EDN: the register search keeps
// one configuration between operations. porcupine, which decided them before, keeps a
// bitset as long as the history for every step (about 5 GB here). Most of what is live
// is the 400,000 events themselves: 166 MB at its peak once an event held how its
// operation ended and its conflicts (139 MB before), and a loaded machine's longer
// collections count more as live, which a 256 MiB bound (192 MiB of live heap) missed.
func TestCheckLongRegisterHistoryInLinearMemory(t *testing.T) {
	for _, edn := range []bool{false, true} {
		path := registerSequentialHistory(t, 200_000, edn)
		args := []string{"check", "--max-memory", "384MiB", path}
		if edn {
			args = []string{"check", "--format", "jepsen-edn", "--model", "register", "--max-memory", "384MiB", path}
		}
		cmd, out, errb := startBinary(t, args...)
		waitBinary(t, cmd, 2*time.Minute)
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(out.String(), "valid (register") || !strings.Contains(out.String(), "all 200000 operations") {
			t.Fatalf("edn %v: exit %d, stdout %q, stderr %q; want valid", edn, code, out, errb)
		}
	}
}

// TestCheckCounterDoesNotWrap: a counter that started at the largest 64-bit integer
// and "went" to the smallest wrapped: the checker used to compute the slot it claimed
// with wrapping arithmetic and called it valid. Values are compared without wrapping
// now, and a value more than 2^63 above the start is refused as no history's.
func TestCheckCounterDoesNotWrap(t *testing.T) {
	header := func(before string) string {
		return `{"header":{"format":"indoubt-history/1","workload":"counter","model":"counter","seed":1,"params":{"before":` + before + `}}}` + "\n"
	}
	inc := func(value string) string {
		return `{"index":0,"time":1,"process":0,"type":"invoke","f":"increment"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"increment","value":` + value + `}` + "\n"
	}
	const read = `{"index":2,"time":3,"process":0,"type":"invoke","f":"read"}` + "\n" + `{"index":3,"time":4,"process":0,"type":"ok","f":"read","value":{"value":-9223372036854775808}}` + "\n"
	for _, tc := range []struct{ name, history, want string }{
		{"wrote the smallest after the largest", header("9223372036854775807") + inc(`{"wrote":-9223372036854775808}`),
			"impossible-write: increment of process 0 (index 0) wrote -9223372036854775808, but the counter started at 9223372036854775807"},
		{"read plus one wrapped", header("9223372036854775807") + inc(`{"read":9223372036854775807,"wrote":-9223372036854775808}`) + read,
			"inconsistent-increment: increment of process 0 (index 0) read 9223372036854775807 but wrote -9223372036854775808"},
		{"read below the start", header("9223372036854775807") + inc(`{"read":9223372036854775807,"wrote":-9223372036854775808}`) + read,
			"impossible-read: read of process 0 (index 2) returned -9223372036854775808, below the value 9223372036854775807"},
		{"more than 2^63 above the start", header("-9223372036854775808") + inc(`{"wrote":9223372036854775807}`),
			"more than 2^63 increments above the start -9223372036854775808"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := invoke(t, "check", writeFile(t, "c.jsonl", tc.history))
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, tc.want)
			}
		})
	}
}
