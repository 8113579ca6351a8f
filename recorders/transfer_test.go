package recorders_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// TestTransfersThroughExec: each client makes transfers in explicit transactions
// (BEGIN; UPDATE; UPDATE; INSERT; COMMIT) under commit-cut. Naive, exec and `indoubt
// check --faults` of its run directory say "took effect N times" for exactly the
// transfers the final state holds N >= 2 times, with the statement tags of the cut
// COMMIT as proof. Idempotent, every cut retry is a replay and no cut whose
// transaction changed nothing (INSERT 0 0) is called an application.
func TestTransfersThroughExec(t *testing.T) {
	py := []string{"python3", filepath.Join("python", "examples", "transfer.py")}
	js := []string{"node", filepath.Join("js", "examples", "transfer.mjs")}
	for _, c := range []struct {
		name   string
		need   func(*testing.T)
		client []string
	}{{"python-psycopg", needPsycopg, py}, {"node-pg", needPG, js}} {
		t.Run(c.name+"/naive", func(t *testing.T) {
			c.need(t)
			srv := pg.Get(t)
			code, out, run := transfers(t, srv.DSN, "commit-cut:0.3", append(c.client, "20")...)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (invalid)", code)
			}
			final := finalRead(t, filepath.Join(run, "history.jsonl"))
			dups := map[string]int{}
			for id, n := range final {
				if n >= 2 {
					dups[id] = int(n)
				}
			}
			if len(dups) == 0 {
				t.Fatalf("no transfer made twice: the case is not exercised")
			}
			if !strings.Contains(out, "COMMIT after UPDATE 1, UPDATE 1, INSERT 0 1") {
				t.Errorf("the output does not give the statement tags as proof")
			}
			for name, ev := range map[string]*results.Evidence{"exec's results.json": runEvidence(t, run), "indoubt check --faults --json": checkEvidence(t, run)} {
				named := map[string]int{}
				for _, a := range ev.AppliedTwice {
					named[a.OpID] = a.Times
					if !strings.Contains(a.Sentence, "took effect") || !strings.Contains(a.Sentence, "COMMIT after UPDATE 1, UPDATE 1, INSERT 0 1") {
						t.Errorf("%s: %s: %q", name, a.OpID, a.Sentence)
					}
				}
				if len(named) != len(dups) {
					t.Errorf("%s names %d transfers applied more than once (%v); the final state holds %d twice or more (%v)", name, len(named), named, len(dups), dups)
				}
				for id, n := range dups {
					if named[id] != n {
						t.Errorf("%s: %s is %d times in the final state, said %d", name, id, n, named[id])
					}
				}
			}
		})
		t.Run(c.name+"/idempotent", func(t *testing.T) {
			c.need(t)
			srv := pg.Get(t)
			code, out, run := transfers(t, srv.DSN, "commit-cut:0.6", append(c.client, "--idempotent", "20")...)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (valid)", code)
			}
			if !regexp.MustCompile(`[1-9]\d* changed nothing`).MatchString(out) {
				t.Errorf("no replay was cut: the case is not exercised")
			}
			for name, ev := range map[string]*results.Evidence{"exec's results.json": runEvidence(t, run), "indoubt check --faults --json": checkEvidence(t, run)} {
				if len(ev.AppliedTwice) != 0 || len(ev.Replays) == 0 {
					t.Errorf("%s: %d applied more than once, %d replays; want none and some", name, len(ev.AppliedTwice), len(ev.Replays))
				}
				for _, a := range ev.Ambiguous {
					if strings.Contains(a.Sentence, "INSERT 0 0") && !strings.Contains(a.Sentence, "whose writes changed nothing") {
						t.Errorf("%s: a replay's cut reads %q", name, a.Sentence)
					}
				}
			}
			if strings.Contains(out, "took effect") {
				t.Errorf("a transfer is said to have taken effect more than once")
			}
		})
	}
}

// transfers runs a transfer client under indoubt exec with the fault on the server dsn
// names, and returns the exit code, the output and the run directory.
func transfers(t *testing.T, dsn, fault string, client ...string) (int, string, string) {
	t.Helper()
	bin, err := indoubtBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := []string{"exec", "--quiet", "--out", out, "--fault", fault, "--seed", "3", "--dsn", dsn}
	if client[0] == "python3" {
		args = append(args, "--model", "exactly-once", "--final-sql", "SELECT op_id, count(*) FROM transfers GROUP BY op_id")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append(args, "--"), client...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDeps)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("indoubt %s:\n%s", strings.Join(cmd.Args[1:], " "), buf.String())
	runs, _ := filepath.Glob(filepath.Join(out, "*-exec-postgres-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories: %v", runs)
	}
	followsSchema(t, filepath.Join(runs[0], "history.jsonl"))
	return code, buf.String(), runs[0]
}

// finalRead returns the exactly-once final read of a history: each op id's count.
func finalRead(t *testing.T, path string) map[string]int64 {
	t.Helper()
	_, ops, err := histories.ReadFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]int64
	for _, op := range ops {
		if op.F == "read" && op.Type == histories.OK {
			if err := json.Unmarshal(op.Value, &st); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st == nil {
		t.Fatalf("%s has no final read", path)
	}
	return st
}

// runEvidence reads the evidence of a run directory's results.json.
func runEvidence(t *testing.T, run string) *results.Evidence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Evidence == nil {
		t.Fatalf("%s/results.json has no evidence", run)
	}
	return r.Evidence
}

// checkEvidence re-checks a run directory with indoubt check --faults --json and reads
// the evidence it prints.
func checkEvidence(t *testing.T, run string) *results.Evidence {
	t.Helper()
	bin, _ := indoubtBinary()
	out, _ := exec.Command(bin, "check", "--json", "--faults", filepath.Join(run, "faults.jsonl"), filepath.Join(run, "history.jsonl")).Output()
	var r struct {
		GroundTruth struct {
			Evidence *results.Evidence `json:"evidence"`
		} `json:"ground_truth"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.GroundTruth.Evidence == nil {
		t.Fatalf("indoubt check --json: %v: %s", err, out)
	}
	return r.GroundTruth.Evidence
}
