package shrink

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// The run directories under testdata are real runs: naive-cut is PostgreSQL's budget
// with naive retries under commit-cut:0.2 (4 workers, 30 operations each); redis-kill
// is Redis's register with persistence none under a latency window, a kill, commit-cut
// at 0.1, and a partition that starts after the run ended.

func loadExplicit(t *testing.T, name string) ([]Fault, []string) {
	t.Helper()
	dir := filepath.Join("testdata", name)
	cfg, _, err := LoadRun(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	_, ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	list, notes, err := explicit(dir, cfg, ops)
	if err != nil {
		t.Fatal(err)
	}
	return list, notes
}

// Every commit fault that fired becomes the listed fault at its point, in the order
// they fired.
func TestExplicitCommitFaults(t *testing.T) {
	list, notes := loadExplicit(t, "naive-cut")
	b, err := os.ReadFile(filepath.Join("testdata", "naive-cut", "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Kind  string `json:"kind"`
			Point uint64 `json:"point"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind != "" {
			want = append(want, fmt.Sprintf("%s@commit:%d", e.Kind, e.Point))
		}
	}
	if len(want) < 2 || len(list) != len(want) || len(notes) != 0 {
		t.Fatalf("%d faults, notes %v; want %d", len(list), notes, len(want))
	}
	for i, f := range list {
		if f.Spec != want[i] || f.Kind != "commit-cut" || !strings.HasPrefix(f.Target, "commit point ") {
			t.Errorf("fault %d: %+v, want %s", i, f, want[i])
		}
		if i > 0 && f.AtS < list[i-1].AtS {
			t.Errorf("fault %d at %.3fs comes before the one before it", i, f.AtS)
		}
	}
}

// Windows that opened and process faults that were applied stay as written; a window
// that never opened is left out; all in the order they happened.
func TestExplicitMixedFaults(t *testing.T) {
	list, _ := loadExplicit(t, "redis-kill")
	var got []string
	for _, f := range list {
		got = append(got, f.Kind+" "+f.Spec)
	}
	want := []string{"latency latency:10ms@0s-0.5s", "commit-cut commit-cut@commit:4", "kill kill@0.3s-0.5s"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if list[2].Target != "the server" || list[2].DurationS != 0.2 || list[2].AtS != 0.3 {
		t.Errorf("kill: %+v", list[2])
	}
}

func TestLoadRunRefusesAMaskedDSN(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "results.json", "faults.jsonl", "history.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", "naive-cut", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			// As config.json holds the DSN of a run made with --dsn.
			b = []byte(strings.Replace(string(b), `"workers"`, `"dsn": "postgres://app:xxxxx@db.example:5432/app", "workers"`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := LoadRun(dir, "")
	if err == nil || !strings.Contains(err.Error(), "password masked") || !strings.Contains(err.Error(), "--dsn") {
		t.Fatalf("error %v, want one saying to give the DSN again", err)
	}
	cfg, _, err := LoadRun(dir, "postgres://app:secret@db.example:5432/app")
	if err != nil || cfg.DSN != "postgres://app:secret@db.example:5432/app" {
		t.Fatalf("with the DSN given: %v, %q", err, cfg.DSN)
	}
	if _, _, err := LoadRun(filepath.Join("testdata", "naive-cut"), "postgres://app:secret@db.example/app"); err == nil || !strings.Contains(err.Error(), "takes no DSN") {
		t.Errorf("a DSN for a run that launched its server: %v", err)
	}
}

func TestRerunsFollowTheBaseline(t *testing.T) {
	for n, want := range map[int]int{1: 3, 2: 5, 3: 8, 4: 10, 6: 10} {
		if got := rerunsFor(n); got != want {
			t.Errorf("baseline failed at run %d: K %d, want %d", n, got, want)
		}
	}
}
