package checker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// scriptForm says how one workload's test scripts read: the fault event a "nemesis" line
// stands for, the history's f for each short f a line may name, whether each operation
// gets an op id, and how an ok's result becomes its value (num parses a number, failing
// the test on a bad one).
type scriptForm struct {
	nemesis string
	fs      map[string]string
	opIDs   bool
	value   func(op *histories.Op, result string, num func(string) int64)
}

// scriptOps builds a history from lines "<process> <type> <f> [result]": type is invoke,
// ok, fail or info; f is one of form.fs; the result of an ok is read by form.value. A
// line "nemesis" adds a fault event.
func scriptOps(t testing.TB, script string, form scriptForm) []histories.Op {
	t.Helper()
	var ops []histories.Op
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if fs[0] == "nemesis" {
			ops = append(ops, histories.Op{Index: int64(len(ops)), Process: histories.Nemesis, Type: histories.Info, F: form.nemesis})
			continue
		}
		if len(fs) < 3 {
			t.Fatalf("bad script line %q", line)
		}
		proc, err := strconv.Atoi(fs[0])
		if err != nil {
			t.Fatalf("bad script line %q: %v", line, err)
		}
		typ, err := histories.ParseType(fs[1])
		if err != nil {
			t.Fatalf("bad script line %q: %v", line, err)
		}
		op := histories.Op{Index: int64(len(ops)), Process: proc, Type: typ, F: form.fs[fs[2]]}
		if form.opIDs {
			op.OpID = fmt.Sprintf("%d-%d", proc, len(ops))
		}
		if op.F == "" {
			t.Fatalf("bad script line %q: f is %s", line, strings.Join(slices.Sorted(maps.Keys(form.fs)), " or "))
		}
		if typ == histories.OK {
			form.value(&op, fs[3], func(s string) int64 {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("bad script line %q: %v", line, err)
				}
				return n
			})
		}
		ops = append(ops, op)
	}
	return ops
}

// porcupineVerdict decides operations with a porcupine model, turning its answer into a
// Verdict. It has no time limit: the reference must decide every history, and a limit
// would turn a loaded machine's slowness into an Unknown that fails the comparison.
// The histories the tests give it are small.
func porcupineVerdict(model porcupine.Model, pops []porcupine.Operation) Verdict {
	if porcupine.CheckOperations(model, pops) {
		return Valid
	}
	return Invalid
}

// anomalyKinds lists a result's anomaly kinds in order, space separated.
func anomalyKinds(r Result) string {
	var ks []string
	for _, a := range r.Anomalies {
		ks = append(ks, a.Kind)
	}
	return strings.Join(ks, " ")
}

// dumpOps prints a history one operation a line under a heading, for a failure message.
func dumpOps(heading string, ops []histories.Op) string {
	var b strings.Builder
	fmt.Fprintln(&b, heading)
	for _, op := range ops {
		fmt.Fprintf(&b, "%3d p%-3d %-6s %-9s %s\n", op.Index, op.Process, op.Type, op.F, op.Value)
	}
	return b.String()
}

// goldenWalk checks every history under testdata/<dir> against the .verdict file beside
// it; -update rewrites them. check decides one history and says its anomaly kinds as
// the file's first line writes them ("" for none); it may assert more on its own. A
// .verdict file is the one expectation format of every checker's goldens: its first
// line is the verdict and the anomaly kinds, then one line per anomaly listed, with
// the history indices it names and its explanation.
func goldenWalk(t *testing.T, dir string, check func(t *testing.T, h *histories.Header, ops []histories.Op) (r Result, kinds string)) {
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no golden histories in testdata/%s", dir)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			h, ops, err := histories.ReadFile(path, false)
			if err != nil {
				t.Fatal(err)
			}
			r, kinds := check(t, h, ops)
			got := goldenText(r, kinds)
			vpath := strings.TrimSuffix(path, ".jsonl") + ".verdict"
			if *update {
				if err := os.WriteFile(vpath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(vpath)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("got\n%s\nwant\n%s\n%s", got, want, r.Summary)
			}
			t.Log(r.Summary)
		})
	}
}

// goldenText is what a .verdict file holds for r.
func goldenText(r Result, kinds string) string {
	var b strings.Builder
	b.WriteString(r.Verdict.String())
	if kinds != "" {
		b.WriteString(" " + kinds)
	}
	b.WriteString("\n")
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "  %s %v: %s\n", a.Kind, a.Ops, a.Explanation)
	}
	return b.String()
}

// checkAll decides a history with Check and the header's model.
func checkAll(t *testing.T, h *histories.Header, ops []histories.Op) Result {
	t.Helper()
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// interval is the set of values a porcupine model's object may hold, lo..hi: unknown
// operations make the object nondeterministic (an unknown step took effect or not), and
// tracking every value it may hold turns it deterministic. From one value, every step of
// the budget and counter models keeps that set an interval, so two numbers hold it.
type interval struct {
	lo, hi int64
}

// intervalModel returns a porcupine model whose state is an interval, starting at the one
// value start: step decides an operation from a state, describe names an operation, and
// noun names the value when a state is described.
func intervalModel(start int64, noun string, step func(s interval, input, output any) (bool, any), describe func(input, output any) string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return interval{start, start} },
		Step: func(state, input, output any) (bool, any) {
			return step(state.(interval), input, output)
		},
		Hash: func(state any) uint64 {
			s := state.(interval)
			return uint64(s.lo)*0x9e3779b97f4a7c15 ^ uint64(s.hi)
		},
		DescribeOperation: describe,
		DescribeState: func(state any) string {
			s := state.(interval)
			if s.lo == s.hi {
				return fmt.Sprintf("%s %d", noun, s.lo)
			}
			return fmt.Sprintf("%s %d..%d", noun, s.lo, s.hi)
		},
	}
}

// clientIDs numbers a history's processes 0, 1, ... in the order they first appear, for
// porcupine's ClientId.
type clientIDs map[int]int

func (c clientIDs) of(process int) int {
	id, ok := c[process]
	if !ok {
		id = len(c)
		c[process] = id
	}
	return id
}
