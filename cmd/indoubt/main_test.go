package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// invoke runs the CLI in process and returns its exit code, stdout and stderr.
func invoke(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), args, &out, &errb), &errb)
	return code, out.String(), errb.String()
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"check", "--help"}, {"proxy", "--help"}, {"server", "--help"}} {
		code, out, _ := invoke(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		if !strings.Contains(out, "Example") {
			t.Errorf("%v: help has no example:\n%s", args, out)
		}
	}
}

func TestBadInputIsOneLineAndExit3(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("{\"header\":{\"model\":\"budget\",\"params\":{\"budget\":3}}}\n{not json\n"), 0o644)
	truncated := filepath.Join(dir, "truncated.jsonl")
	os.WriteFile(truncated, []byte("{\"header\":{\"model\":\"budget\",\"params\":{\"budget\":3}}}\n{\"index\":0,\"type\":\"inv"), 0o644)
	for _, args := range [][]string{
		{"frobnicate"},
		{"run", "--no-such-flag"},
		{"run", "--workers", "zero"},
		{"run", "--workers", "0"},
		{"run", "--retry", "sometimes"},
		{"run", "--store", "etcd", "--out", dir},
		{"run", "--time", "-1s"},
		{"run", "--store", "postgres", "--fault", "wobble", "--out", dir},
		{"run", "--store", "postgres", "--fault", "commit-cut:2", "--out", dir},
		{"run", "extra-arg"},
		{"run", "--workload", "insert", "--key", "serial"},
		{"run", "--workload", "insert", "--rounds", "0"},
		{"run", "--store", "postgres", "--workload", "insert", "--pg-version", "99", "--out", dir},
		{"run", "--store", "postgres", "--workload", "insert", "--pg-version", "fifteen", "--out", dir},
		{"check"},
		{"check", filepath.Join(dir, "missing.jsonl")},
		{"check", garbage},
		{"check", truncated},
		{"check", "--format", "csv", garbage},
		{"check", "--initial", "x", garbage},
		{"check", "--format", "jepsen-log", garbage},
	} {
		code, out, errs := invoke(t, args...)
		if code != 3 {
			t.Errorf("%v: exit %d, want 3 (stderr %q)", args, code, errs)
		}
		if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "indoubt: ") {
			t.Errorf("%v: stderr is not one line: %q", args, errs)
		}
		if out != "" {
			t.Errorf("%v: printed to stdout: %q", args, out)
		}
	}
}

func TestCheckExitCodesFollowTheVerdict(t *testing.T) {
	dir := filepath.Join("..", "..", "checker", "testdata", "budget")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(e.Name(), ".jsonl")+".verdict"))
		if err != nil {
			t.Fatal(err)
		}
		wantCode := map[string]int{"valid": 0, "invalid": 1, "unknown": 2}[strings.Fields(string(want))[0]]
		code, out, errs := invoke(t, "check", filepath.Join(dir, e.Name()))
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d (%s%s)", e.Name(), code, wantCode, out, errs)
		}
		seen[code] = true
	}
	if !seen[0] || !seen[1] {
		t.Errorf("golden histories cover exit codes %v; want both 0 and 1", seen)
	}
}
