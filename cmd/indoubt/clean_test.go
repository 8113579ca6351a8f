package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestCleanAfterKilledServer runs `indoubt server` in a child process, kills it with
// SIGKILL, and expects the server to die with it and `indoubt clean` to list (with
// --dry-run) and then remove the directory it left.
func TestCleanAfterKilledServer(t *testing.T) {
	if store := os.Getenv("INDOUBT_TEST_CLEAN_SERVER"); store != "" {
		os.Exit(exitCode(run(context.Background(), []string{"server", "--store", store}, os.Stdout, os.Stderr), os.Stderr))
	}
	// The directory is named by the server, not the store.
	for store, server := range map[string]string{"postgres": "postgres", "redis": "redis", "mysql": "mariadb"} {
		t.Run(store, func(t *testing.T) {
			// A parent the server's user can enter (t.TempDir's parent is root-only).
			parent := t.TempDir()
			for _, p := range []string{filepath.Dir(parent), parent} {
				if err := os.Chmod(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestCleanAfterKilledServer$")
			cmd.Env = append(os.Environ(), "INDOUBT_TEST_CLEAN_SERVER="+store, "TMPDIR="+parent)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			env := map[string]string{}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				k, v, _ := strings.Cut(sc.Text(), "=")
				env[k] = v
				if k == "PID" {
					break
				}
			}
			pid, err := strconv.Atoi(env["PID"])
			if err != nil {
				_ = cmd.Wait()
				if strings.Contains(stderr.String(), "not found") {
					servertest.SkipOrFail(t, &servers.NotInstalledError{Server: store, Program: store, Hint: stderr.String()})
				}
				t.Fatalf("indoubt server said %v; stderr %q", env, stderr.String())
			}
			defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }()
			if env["PASSWORD"] == "" || !strings.Contains(env["DSN"], ":"+env["PASSWORD"]+"@") {
				t.Errorf("DSN %q, PASSWORD %q: want the password in the DSN", env["DSN"], env["PASSWORD"])
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("server %d outlived indoubt server", pid)
				}
			}
			dirs, _ := filepath.Glob(filepath.Join(parent, "indoubt-"+server+"-"+strconv.Itoa(cmd.Process.Pid)+"-*"))
			if len(dirs) != 1 {
				t.Fatalf("left in %s: %v; want one directory of pid %d", parent, dirs, cmd.Process.Pid)
			}

			code, stdout, errs := invoke(t, "clean", "--dry-run", "--dir", parent)
			if code != 0 || !strings.HasPrefix(stdout, "would remove "+dirs[0]+" (") || strings.Count(stdout, "\n") != 1 || errs != "" {
				t.Errorf("clean --dry-run: exit %d, stdout %q, stderr %q", code, stdout, errs)
			}
			if _, err := os.Stat(dirs[0]); err != nil {
				t.Fatalf("after --dry-run: %v", err)
			}
			code, stdout, errs = invoke(t, "clean", "--dir", parent)
			if code != 0 || !strings.HasPrefix(stdout, "removed "+dirs[0]+" (") || errs != "" {
				t.Errorf("clean: exit %d, stdout %q, stderr %q", code, stdout, errs)
			}
			if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
				t.Errorf("%s after clean: %v", dirs[0], err)
			}
			if code, stdout, _ := invoke(t, "clean", "--dir", parent); code != 0 || stdout != "nothing to clean\n" {
				t.Errorf("clean again: exit %d, stdout %q", code, stdout)
			}
		})
	}
}

func TestCleanFlags(t *testing.T) {
	if code, out, _ := invoke(t, "clean", "--help"); code != 0 || !strings.Contains(out, "Usage: indoubt clean [--dry-run] [--dir DIR]") {
		t.Errorf("clean --help: exit %d:\n%s", code, out)
	}
	for _, args := range [][]string{{"clean", "extra"}, {"clean", "--dir", filepath.Join(t.TempDir(), "missing")}, {"clean", "--force"}} {
		code, out, errs := invoke(t, args...)
		if code != 3 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "indoubt: clean") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3 and one line", args, code, out, errs)
		}
	}
}

// TestCleanAfterKilledRun SIGKILLs a run mid-way: its hidden .partial directory stays in
// --out. While the run lived, clean listed nothing; after, clean --dry-run lists it
// (and removes nothing), clean removes it, and neither touches a published run or a
// .partial directory that is not indoubt's.
func TestCleanAfterKilledRun(t *testing.T) {
	srv := startPostgres(t)
	out, tmp := t.TempDir(), t.TempDir()
	published := filepath.Join(out, "20260101-000000.000-budget-postgres-nofault-none")
	foreign := filepath.Join(out, ".someone-elses.partial")
	for _, d := range []string{published, foreign} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd, _, stderr := startBinary(t, "run", "--dsn", srv.DSN, "--out", out, "--time", "2m", "--workers", "2", "--quiet")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var partial string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		hist, _ := filepath.Glob(filepath.Join(out, ".*-budget-postgres-*.partial", "history.jsonl"))
		if len(hist) == 1 {
			if fi, err := os.Stat(hist[0]); err == nil && fi.Size() > 10_000 {
				partial = filepath.Dir(hist[0])
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no history grew; stderr %q", stderr)
		}
	}
	if code, stdout, _ := invoke(t, "clean", "--dry-run", "--dir", tmp, "--out", out); code != 0 || stdout != "nothing to clean\n" {
		t.Errorf("clean --dry-run while the run lives: exit %d, stdout %q; want nothing to clean", code, stdout)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	code, stdout, errs := invoke(t, "clean", "--dry-run", "--dir", tmp, "--out", out)
	if code != 0 || !strings.HasPrefix(stdout, "would remove "+partial+" (") || !strings.Contains(stdout, "an unfinished run of gone pid "+strconv.Itoa(cmd.Process.Pid)) ||
		strings.Count(stdout, "\n") != 1 || errs != "" {
		t.Errorf("clean --dry-run: exit %d, stdout %q, stderr %q; want the killed run's %s alone", code, stdout, errs, partial)
	}
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("after --dry-run: %v", err)
	}
	code, stdout, errs = invoke(t, "clean", "--dir", tmp, "--out", out)
	if code != 0 || !strings.HasPrefix(stdout, "removed "+partial+" (") || strings.Count(stdout, "\n") != 1 || errs != "" {
		t.Errorf("clean: exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("%s after clean: %v", partial, err)
	}
	for _, d := range []string{published, foreign} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("clean touched %s: %v", d, err)
		}
	}
	if code, stdout, _ := invoke(t, "clean", "--dir", tmp, "--out", out); code != 0 || stdout != "nothing to clean\n" {
		t.Errorf("clean again: exit %d, stdout %q", code, stdout)
	}
	if code, _, errs := invoke(t, "clean", "--dir", tmp, "--out", filepath.Join(out, "missing")); code != 3 || strings.Count(errs, "\n") != 1 {
		t.Errorf("clean --out of a missing directory: exit %d, stderr %q; want exit 3 and one line", code, errs)
	}
}
