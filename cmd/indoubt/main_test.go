package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/rundir"
)

// invoke runs the CLI in process and returns its exit code, stdout and stderr.
func invoke(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), args, &out, &errb), &errb)
	recheckMade(t, args)
	return code, out.String(), errb.String()
}

// recheckMade judges again, from its files alone, every run directory a run, exec or
// suite command of a test published under its --out, and fails the test unless each
// gives its results.json (judgetest.Recheck): the promise holds for every directory
// the tests make.
func recheckMade(t *testing.T, args []string) {
	t.Helper()
	if len(args) == 0 || !slices.Contains([]string{"run", "exec", "suite"}, args[0]) {
		return
	}
	var out string
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "--out" && i+1 < len(args) {
			out = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--out="); ok {
			out = v
		}
	}
	if out == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*", rundir.CheckFile))
	more, _ := filepath.Glob(filepath.Join(out, "*", "*", rundir.CheckFile)) // a suite's cases
	n := 0
	for _, c := range append(dirs, more...) {
		dir := filepath.Dir(c)
		if _, err := os.Stat(filepath.Join(dir, rundir.ResultsFile)); err == nil {
			judgetest.Recheck(t, dir)
			n++
		}
	}
	if n > 0 {
		t.Logf("%s: %d run directories judged again to their results.json", args[0], n)
	}
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
		{"run", "--store", "dynamodb", "--out", dir},
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
		{"check", "--timeout", "-1s", filepath.Join("..", "..", "checker", "testdata", "register", "concurrent-read-valid.jsonl")},
		{"server", "stray-argument"},
		{"run", "--store", "cockroach", "--workload", "counter", "--out", dir},
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

// TestRunRefusesBeforeLaunch: every bad flag and combination of run is refused with one
// line and exit 3 before any server launches: nothing in --out, no progress line.
func TestRunRefusesBeforeLaunch(t *testing.T) {
	for _, args := range [][]string{
		{"--workload", "queue"},
		{"--store", "postgres", "--mechanism", "telepathy"},
		{"--store", "postgres", "--workload", "counter", "--mechanism", "autocommit"},
		{"--store", "postgres", "--workload", "counter", "--isolation", "snapshot"},
		{"--store", "postgres", "--isolation", "serializable"},
		{"--store", "postgres", "--workload", "register", "--mechanism", "transaction"},
		{"--store", "redis", "--mechanism", "transaction"},
		{"--store", "redis", "--persistence", "sometimes"},
		{"--store", "postgres", "--persistence", "sometimes"},
		{"--store", "postgres", "--proxy", "maybe"},
		{"--store", "redis", "--workload", "counter"},
		{"--store", "all", "--mechanism", "transaction"},
		{"--store", "postgres", "--workers", "1,4", "--workload", "counter", "--isolation", "snapshot"},
		{"--store", "postgres", "--time", "0s"},
		{"--store", "postgres", "--time", "-5s"},
		{"--store", "postgres", "--check-timeout", "-1s"},
		{"--store", "postgres", "--check-timeout", "0s"},
		{"--store", "postgres", "--ops", "-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := invoke(t, append([]string{"run", "--out", out}, args...)...)
			if code != 3 {
				t.Errorf("exit %d, want 3 (stderr %q)", code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "indoubt: ") {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			if stdout != "" {
				t.Errorf("printed to stdout: %q", stdout)
			}
			if left, _ := os.ReadDir(out); len(left) != 0 {
				t.Errorf("--out holds %d entries: something ran", len(left))
			}
		})
	}
}

// TestCheckHTMLKeepsTheVerdict: an --html path that cannot be written is refused,
// naming the flag, before the check; one that fails while the page is written (a full
// disk: /dev/full) costs a warning, not the verdict.
func TestCheckHTMLKeepsTheVerdict(t *testing.T) {
	hist := filepath.Join("..", "..", "checker", "testdata", "register", "concurrent-read-valid.jsonl")
	code, stdout, stderr := invoke(t, "check", "--html", filepath.Join(t.TempDir(), "no", "such", "dir.html"), hist)
	if code != 3 || !strings.Contains(stderr, "--html") || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("unwritable --html: exit %d, stdout %q, stderr %q; want exit 3 and one line naming --html", code, stdout, stderr)
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	code, stdout, stderr = invoke(t, "check", "--html", "/dev/full", hist)
	if code != 0 || !strings.Contains(stdout, "valid") {
		t.Errorf("--html /dev/full: exit %d, stdout %q; want the verdict (valid, exit 0)", code, stdout)
	}
	if !strings.Contains(stderr, "warning") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("--html /dev/full: stderr %q; want one warning line", stderr)
	}
}

// TestRunKeepsSecrets: a password in every place a DSN carries one (URL user info, a
// query parameter, a keyword=value pair) appears in no file of the run directory, nor
// on stdout or stderr, whether the run succeeds (the launched server trusts any
// password), goes through the proxy, or fails on a DSN the driver quotes in its error.
func TestRunKeepsSecrets(t *testing.T) {
	srv := startPostgres(t)
	host, port, _ := strings.Cut(srv.Addr, ":")
	// The launched server's own password is the secret a working DSN carries (in the user
	// info, in the query, as key=value); the DSNs that cannot connect carry made-up ones.
	pw := srv.Password
	secrets := []string{pw, "SECRETkv3", "SECRETcql4"}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"url", []string{"--dsn", "postgres://indoubt:" + pw + "@" + srv.Addr + "/indoubt?sslmode=disable&password=" + pw}, 0},
		{"url through the proxy", []string{"--dsn", "postgres://indoubt:" + pw + "@" + srv.Addr + "/indoubt?sslmode=disable&password=" + pw, "--fault", "commit-cut:0.3", "--retry", "idempotent"}, 0},
		{"keyword=value", []string{"--store", "postgres", "--dsn", "host=" + host + " port=" + port + " user=indoubt dbname=indoubt sslmode=disable password=" + pw}, 0},
		{"keyword=value, nothing listening", []string{"--store", "postgres", "--dsn", "host=" + host + " port=1 user=indoubt dbname=indoubt sslmode=disable connect_timeout=2 password=SECRETkv3"}, 3},
		{"cql the driver quotes", []string{"--store", "cql", "--dsn", "cql://127.0.0.1:1/ks\x7f?password=SECRETcql4"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := invoke(t, append([]string{"run", "--out", out, "--workers", "2", "--ops", "20"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			for _, s := range secrets {
				if strings.Contains(stdout, s) || strings.Contains(stderr, s) {
					t.Errorf("%s printed: stdout %q stderr %q", s, stdout, stderr)
				}
			}
			files := 0
			filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				files++
				b, err := os.ReadFile(path)
				if err != nil {
					t.Error(err)
				}
				for _, s := range secrets {
					if strings.Contains(string(b), s) {
						t.Errorf("%s holds %s", path, s)
					}
				}
				return nil
			})
			if tc.code != 0 {
				return
			}
			runs, _ := filepath.Glob(filepath.Join(out, "*-budget-postgres-*"))
			if len(runs) != 1 || files < 3 {
				t.Fatalf("run directories %v, %d files", runs, files)
			}
			cfg, err := os.ReadFile(filepath.Join(runs[0], "config.json"))
			if err != nil || !strings.Contains(string(cfg), "xxxxx") || !strings.Contains(string(cfg), "user=indoubt") && !strings.Contains(string(cfg), "indoubt:xxxxx@") {
				t.Errorf("config.json's dsn is not the DSN masked: %s (%v)", cfg, err)
			}
			for path, want := range map[string]os.FileMode{runs[0]: 0o700, filepath.Join(runs[0], "config.json"): 0o600, filepath.Join(runs[0], "results.json"): 0o600} {
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode().Perm(), want, err)
				}
			}
		})
	}
}

// TestRunInterruptedNeverPasses: SIGINT mid-run publishes the checked, interrupted run
// and exits 2 when what was recorded is valid so far, 1 when it already shows an
// anomaly (naive retries through commit cuts double-apply): never 0.
func TestRunInterruptedNeverPasses(t *testing.T) {
	srv := startPostgres(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"valid so far", nil, 2},
		{"anomaly already", []string{"--fault", "commit-cut:0.5", "--retry", "naive", "--budget", "1000000"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			cmd, stdout, stderr := startBinary(t, append([]string{"run", "--dsn", srv.DSN, "--time", "2m", "--workers", "2", "--quiet", "--out", out}, tc.args...)...)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Signal once the history holds a few hundred operations.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				hist, _ := filepath.Glob(filepath.Join(out, ".*.partial", "history.jsonl"))
				if fi, err := os.Stat(strings.Join(hist, "")); len(hist) == 1 && err == nil && fi.Size() > 40_000 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no history grew; stderr %q", stderr)
				}
			}
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-done:
			case <-time.After(90 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 90s after SIGINT; stderr %q", stderr)
			}
			if got := cmd.ProcessState.ExitCode(); got != tc.code {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", got, tc.code, stdout, stderr)
			}
			runs, _ := filepath.Glob(filepath.Join(out, "*-budget-postgres-*", "results.json"))
			if len(runs) != 1 {
				t.Fatalf("published runs: %v", runs)
			}
			b, _ := os.ReadFile(runs[0])
			if !strings.Contains(string(b), `"interrupted": true`) {
				t.Errorf("results.json does not say interrupted")
			}
		})
	}
}

// TestSecondSignalStopsAtOnce: a command blocked where no context reaches (opening a
// FIFO nobody writes) ignores nothing: the second SIGINT stops it, exit 2, one line.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	// A writer that holds the FIFO open and never writes: check waits in its read (a
	// FIFO with no writer at all is refused at once as empty).
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd, _, stderr := startBinary(t, "check", fifo)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still blocked 20s after two SIGINTs")
	}
	if got := cmd.ProcessState.ExitCode(); got != 2 {
		t.Errorf("exit %d, want 2 (stderr %q)", got, stderr)
	}
	if strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("stderr is not one line: %q", stderr)
	}
}
