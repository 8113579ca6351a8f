package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/supervise"
)

// script writes a shell program for exec to run and returns its path. Its events are
// appended with ev: ev TYPE F PROCESS OP_ID [EXTRA].
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prog.sh")
	src := `#!/bin/bash
i=0
ev() { printf '{"index":%d,"time":%s,"process":%d,"type":"%s","f":"%s","op_id":"%s"%s}\n' "$i" "$(date +%s%N)" "$3" "$1" "$2" "$4" "${5:-}" >>"$INDOUBT_HISTORY"; i=$((i+1)); }
` + body
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// execArgsFor is exec's flags for a program that needs no database: the proxy goes in
// front of an address nothing listens on.
func execArgsFor(out string, extra ...string) []string {
	return append([]string{"exec", "--quiet", "--out", out, "--upstream", "127.0.0.1:9", "--model", "exactly-once"}, extra...)
}

// published returns the run directories under out, failing on a .partial left behind.
func published(t *testing.T, out string) []string {
	t.Helper()
	entries, _ := os.ReadDir(out)
	var runs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".partial") {
			t.Errorf("left behind: %s", e.Name())
			continue
		}
		runs = append(runs, filepath.Join(out, e.Name()))
	}
	return runs
}

func TestExecBadInputIsOneLineAndExit3(t *testing.T) {
	out := t.TempDir()
	prog := script(t, "exit 0\n")
	for _, args := range [][]string{
		{"exec"},
		{"exec", "--", "no-such-program-anywhere"},
		{"exec", "--dsn", "postgres://a@127.0.0.1:5432/b", "--upstream", "127.0.0.1:5432", "--", prog},
		{"exec", "--fault", "kill@1s-2s", "--", prog},
		{"exec", "--fault", "wobble", "--", prog},
		{"exec", "--store", "etcd", "--", prog},
		{"exec", "--store", "cockroach", "--", prog},
		{"exec", "--store", "redis", "--final-sql", "SELECT 1", "--", prog},
		{"exec", "--upstream", "127.0.0.1:9", "--final-sql", "SELECT 1", "--", prog},
		{"exec", "--params", `{"budget":1}`, "--", prog},
		{"exec", "--model", "budget", "--params", "[1]", "--", prog},
		{"exec", "--model", "frobnicate", "--", prog},
		{"exec", "--model", "register", "--final-cmd", "echo 1", "--", prog},
		{"exec", "--final-sql", "SELECT 1", "--final-cmd", "echo {}", "--", prog},
		{"exec", "--grace", "0s", "--", prog},
		{"exec", "--match", "(", "--", prog},
		{"exec", "--dsn", "nonsense", "--", prog},
	} {
		args = append(args[:1], append([]string{"--out", out}, args[1:]...)...)
		code, stdout, stderr := invoke(t, args...)
		if code != 3 {
			t.Errorf("%v: exit %d, want 3 (stderr %q)", args, code, stderr)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "indoubt: exec: ") {
			t.Errorf("%v: stderr is not one line: %q", args, stderr)
		}
		if stdout != "" {
			t.Errorf("%v: printed to stdout: %q", args, stdout)
		}
	}
	if runs := published(t, out); len(runs) != 0 {
		t.Errorf("run directories for refused input: %v", runs)
	}
}

// TestExecProgramWithoutHistory: a program that records nothing is exit 3 in one line,
// and no run directory is published or left half-written.
func TestExecProgramWithoutHistory(t *testing.T) {
	out := t.TempDir()
	for _, body := range []string{"exit 0\n", "exit 4\n", "echo '{not json' >> \"$INDOUBT_HISTORY\"\n"} {
		code, _, stderr := invoke(t, execArgsFor(out, "--", script(t, body))...)
		if code != 3 {
			t.Errorf("%q: exit %d, want 3 (%q)", body, code, stderr)
		}
		if strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: stderr is not one line: %q", body, stderr)
		}
	}
	if runs := published(t, out); len(runs) != 0 {
		t.Errorf("published: %v", runs)
	}
}

// TestExecChecksWhatACrashedProgramRecorded: a program killed by a signal, and one that
// exits with an error, each after recording operations: the history up to the crash is
// checked, the crash is said so, and a valid history gives exit 2, never 0; an invalid
// one gives 1.
func TestExecChecksWhatACrashedProgramRecorded(t *testing.T) {
	for _, c := range []struct {
		name, end, said string
		dup             bool
		want            int
	}{
		{"killed", "kill -SEGV $$\n", "was killed by SIGSEGV", false, 2},
		{"exit-status", "exit 3\n", "exited 3", false, 2},
		{"invalid", "exit 3\n", "exited 3", true, 1},
		{"clean", "exit 0\n", "exited 0", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			count := "1"
			if c.dup {
				count = "2"
			}
			// p-2 never completes: the crash leaves it open, unknown.
			prog := script(t, `ev invoke apply 0 p-1
ev ok apply 0 p-1
ev invoke apply 0 p-2
ev invoke read 1 final
ev ok read 1 final ',"value":{"p-1":`+count+`}'
`+c.end)
			code, stdout, stderr := invoke(t, execArgsFor(out, "--", prog)...)
			if code != c.want {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.want, stdout, stderr)
			}
			if !strings.Contains(stdout, "prog.sh "+c.said) {
				t.Errorf("the program's end is not said (%q):\n%s", c.said, stdout)
			}
			runs := published(t, out)
			if len(runs) != 1 {
				t.Fatalf("run directories: %v", runs)
			}
			for _, f := range []string{"history.jsonl", "faults.jsonl", "results.json", "report.html", "config.json", "program.json"} {
				if _, err := os.Stat(filepath.Join(runs[0], f)); err != nil {
					t.Errorf("run directory: %v", err)
				}
			}
			// The run directory is judged again to its results.json, and re-checked to
			// the same verdict.
			judgetest.Recheck(t, runs[0])
			code2, _, _ := invoke(t, "check", filepath.Join(runs[0], "history.jsonl"))
			if code2 != min(c.want, 1) && !(c.want == 2 && code2 == 0) {
				t.Errorf("indoubt check of the run directory: exit %d", code2)
			}
			var ended struct {
				Code   int    `json:"exit_code"`
				Signal string `json:"signal"`
			}
			b, _ := os.ReadFile(filepath.Join(runs[0], "program.json"))
			if err := json.Unmarshal(b, &ended); err != nil {
				t.Fatal(err)
			}
			if c.name == "killed" && ended.Signal != "SIGSEGV" || c.name == "exit-status" && ended.Code != 3 {
				t.Errorf("program.json: %s", b)
			}
		})
	}
}

// TestExecGivesTheProgramItsEnvironment: the proxied address in the variables libpq
// and drivers read, the history's path, the direct DSN, and nothing that would send
// libpq around the proxy.
func TestExecGivesTheProgramItsEnvironment(t *testing.T) {
	out := t.TempDir()
	t.Setenv("PGHOSTADDR", "10.9.9.9")
	envFile := filepath.Join(t.TempDir(), "env")
	prog := script(t, `env > `+envFile+`
ev invoke apply 0 p-1
ev ok apply 0 p-1
`)
	code, stdout, stderr := invoke(t, execArgsFor(out, "--final-cmd", `echo '{"p-1":1}'`, "--", prog)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	b, _ := os.ReadFile(envFile)
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	if env["PGHOST"] != "127.0.0.1" || env["PGPORT"] == "" || env["INDOUBT_PROXY_ADDR"] != "127.0.0.1:"+env["PGPORT"] {
		t.Errorf("PGHOST %q PGPORT %q INDOUBT_PROXY_ADDR %q", env["PGHOST"], env["PGPORT"], env["INDOUBT_PROXY_ADDR"])
	}
	if _, ok := env["PGHOSTADDR"]; ok {
		t.Errorf("PGHOSTADDR reaches the program: libpq would go around the proxy")
	}
	if !strings.HasSuffix(env["INDOUBT_HISTORY"], "program.jsonl") || env["INDOUBT_SEED"] != "1" {
		t.Errorf("INDOUBT_HISTORY %q INDOUBT_SEED %q", env["INDOUBT_HISTORY"], env["INDOUBT_SEED"])
	}
	if _, ok := env[supervise.Env]; ok {
		t.Errorf("the supervisor's marker reaches the program")
	}
	if !strings.Contains(stdout, "verdict: valid") {
		t.Errorf("the final read of --final-cmd was not checked:\n%s", stdout)
	}
}

// pidAlive reports whether process pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// waitGone waits until none of pids is alive.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for pidAlive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("%s: process %d still runs", what, pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// readPids waits for the program to write its pid and its child's to path.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if f := strings.Fields(string(b)); len(f) == 2 && strings.HasSuffix(string(b), "\n") {
			a, _ := strconv.Atoi(f[0])
			c, _ := strconv.Atoi(f[1])
			return []int{a, c}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the program never started")
	return nil
}

// TestExecInterrupt: Ctrl-C reaches the program's process group; what it recorded by
// then is checked and published, exit 2 (interrupted, never 0). A program that ignores
// it is killed after --grace. Nothing it started is left running.
func TestExecInterrupt(t *testing.T) {
	for _, c := range []struct {
		name, trap string
		said       *regexp.Regexp
	}{
		{"stops", `trap 'echo INT >> ` + "$MARK" + `; exit 130' INT`, regexp.MustCompile(`exited 130`)},
		{"ignores", `trap '' INT`, regexp.MustCompile(`was killed by SIGKILL`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			dir := t.TempDir()
			pids, mark := filepath.Join(dir, "pids"), filepath.Join(dir, "mark")
			prog := script(t, `MARK=`+mark+`
`+c.trap+`
ev invoke apply 0 p-1
ev ok apply 0 p-1
ev invoke read 1 final
ev ok read 1 final ',"value":{"p-1":1}'
sleep 300 &
echo $$ $! > `+pids+`
while :; do sleep 0.1; done
`)
			cmd, stdout, stderr := startBinary(t, execArgsFor(out, "--grace", "1s", "--", prog)...)
			ps := readPids(t, pids)
			cmd.Process.Signal(syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("indoubt did not stop after SIGINT")
			}
			if got := cmd.ProcessState.ExitCode(); got != 2 {
				t.Errorf("exit %d, want 2\n%s%s", got, stdout, stderr)
			}
			if !c.said.MatchString(stdout.String()) {
				t.Errorf("the program's end is not said:\n%s", stdout)
			}
			if c.name == "stops" {
				if b, _ := os.ReadFile(mark); string(b) != "INT\n" {
					t.Errorf("the program did not receive SIGINT")
				}
			}
			waitGone(t, "after SIGINT", ps...)
			runs := published(t, out)
			if len(runs) != 1 {
				t.Fatalf("run directories: %v", runs)
			}
			b, _ := os.ReadFile(filepath.Join(runs[0], "results.json"))
			if !strings.Contains(string(b), `"interrupted": true`) || !strings.Contains(string(b), `"verdict": "valid"`) {
				t.Errorf("results.json does not say interrupted and valid so far")
			}
		})
	}
}

// TestExecKilledLeavesNothingRunning: indoubt killed with SIGKILL takes the program
// and the children it started with it: the supervisor kills their process group.
func TestExecKilledLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	prog := script(t, `sleep 300 &
echo $$ $! > `+pids+`
wait
`)
	cmd, _, _ := startBinary(t, execArgsFor(t.TempDir(), "--", prog)...)
	ps := readPids(t, pids)
	cmd.Process.Kill()
	// Waited for after the check: Wait would also wait for whoever still holds
	// indoubt's output, a child left running among them.
	defer cmd.Wait()
	waitGone(t, "after indoubt was killed", ps...)
}

// TestExecKillsWhatTheProgramLeft: a program that ends while a child it started still
// runs: the child is killed with the program's group when the program ends.
func TestExecKillsWhatTheProgramLeft(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	prog := script(t, `sleep 300 &
echo $$ $! > `+pids+`
ev invoke apply 0 p-1
ev ok apply 0 p-1
ev invoke read 1 final
ev ok read 1 final ',"value":{"p-1":1}'
`)
	code, stdout, stderr := invoke(t, execArgsFor(t.TempDir(), "--", prog)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	waitGone(t, "after the program ended", readPids(t, pids)...)
}
