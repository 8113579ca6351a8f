package checker

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// registerSharedDir finds shared/histories/etcd-jepsen beside the repository: the tests
// run in checker/, the repository is a folder whose sibling is shared/.
func registerSharedDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "histories", "etcd-jepsen")
	if _, err := os.Stat(filepath.Join(dir, "VERDICTS")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the etcd Jepsen histories are missing: %v (CI lays shared/ beside the repository)", err)
		}
		t.Skipf("the etcd Jepsen histories are not at %s: put the project's shared/ folder beside the repository to run this test", dir)
	}
	return dir
}

type registerEtcdCase struct {
	file string
	want Verdict
	ops  []histories.Op
}

func registerEtcdCases(t testing.TB) []registerEtcdCase {
	dir := registerSharedDir(t)
	f, err := os.Open(filepath.Join(dir, "VERDICTS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []registerEtcdCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) != 2 {
			t.Fatalf("VERDICTS: malformed line %q", sc.Text())
		}
		c := registerEtcdCase{file: fields[0]}
		switch fields[1] {
		case "linearizable":
			c.want = Valid
		case "not-linearizable":
			c.want = Invalid
		default:
			t.Fatalf("VERDICTS: unknown verdict %q", fields[1])
		}
		lf, err := os.Open(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		c.ops, err = histories.ReadJepsenLog(lf, c.file, histories.JepsenOptions{})
		lf.Close()
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestRegisterEtcdJepsen checks the 102 etcd histories against their known verdicts,
// and refuses the one without a verdict (an empty log).
func TestRegisterEtcdJepsen(t *testing.T) {
	cases := registerEtcdCases(t)
	if len(cases) != 102 {
		t.Fatalf("VERDICTS lists %d histories, want 102", len(cases))
	}
	start := time.Now()
	var slowest time.Duration
	var slowFile string
	for _, c := range cases {
		t0 := time.Now()
		res, err := CheckRegister(context.Background(), c.ops, RegisterOptions{Model: CASRegisterModel})
		took := time.Since(t0)
		if took > slowest {
			slowest, slowFile = took, c.file
		}
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if res.Verdict != c.want {
			t.Errorf("%s: verdict %v, want %v (%s)", c.file, res.Verdict, c.want, res.Summary)
			continue
		}
		if c.want == Invalid {
			if len(res.Anomalies) != 1 || len(res.Anomalies[0].Ops) == 0 || !strings.HasPrefix(res.Anomalies[0].Explanation, "the register: ") {
				t.Errorf("%s: want one anomaly naming operations, got %+v", c.file, res.Anomalies)
			}
		}
	}
	t.Logf("checked %d etcd histories in %v (GOMAXPROCS %d, slowest %s %v)", len(cases), time.Since(start), runtime.GOMAXPROCS(0), slowFile, slowest)

	empty, err := os.Open(filepath.Join(registerSharedDir(t), "etcd_095.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	// An empty log is not a history of no operations (which every checker would call
	// valid): the reader refuses it.
	ops, err := histories.ReadJepsenLog(empty, "etcd_095.log", histories.JepsenOptions{})
	if !errors.Is(err, histories.ErrEmpty) {
		t.Fatalf("etcd_095.log: %d ops, %v; want it refused as empty", len(ops), err)
	}
}

// BenchmarkRegisterEtcdJepsen checks all 102 etcd histories per iteration; run it with
// -cpu 1,2 to compare one core with porcupine's default of using them all.
func BenchmarkRegisterEtcdJepsen(b *testing.B) {
	cases := registerEtcdCases(b)
	b.ResetTimer()
	for b.Loop() {
		for _, c := range cases {
			if _, err := CheckRegister(context.Background(), c.ops, RegisterOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
