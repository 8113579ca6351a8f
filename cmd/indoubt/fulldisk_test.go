package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallTmpfs mounts a tmpfs of size on a temporary directory, unmounted when the test
// ends; it skips the test when not root (mount needs it) or when mount fails.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// entries lists what dir holds, recursively, as paths relative to it.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && path != dir {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestFullDiskPublishesNothingHalfWritten runs on a real 1 MB tmpfs (as root): the run
// fits but its report.html (about 1.1 MB) does not. The run is published with its
// verdict's exit code and a warning, without report.html, results.json saying so in
// not_written, no temporary file and no .partial directory left; indoubt report on the
// same disk exits 3 with one line and leaves no report.html; summary.html the same. On
// a disk too small for the history, the run exits 3 and publishes nothing.
func TestFullDiskPublishesNothingHalfWritten(t *testing.T) {
	srv := startPostgres(t)
	t.Run("report.html does not fit", func(t *testing.T) {
		out := smallTmpfs(t, "1m")
		code, _, stderr := invoke(t, "run", "--dsn", srv.DSN, "--out", out, "--workers", "2", "--ops", "20")
		if code != 0 {
			t.Fatalf("exit %d, want 0 (the verdict, valid); stderr %q", code, stderr)
		}
		if !strings.Contains(stderr, "warning: report.html not written (no space left on device)") {
			t.Errorf("no warning that report.html was not written: %q", stderr)
		}
		runs, _ := filepath.Glob(filepath.Join(out, "*-budget-postgres-*"))
		if len(runs) != 1 {
			t.Fatalf("published: %v (everything: %v)", runs, entries(t, out))
		}
		for _, e := range entries(t, out) {
			if strings.HasSuffix(e, ".tmp") || strings.HasSuffix(e, ".partial") || strings.HasSuffix(e, "report.html") || strings.Contains(e, ".indoubt-owner") {
				t.Errorf("left in --out: %s", e)
			}
		}
		var res struct {
			Verdict    string   `json:"verdict"`
			NotWritten []string `json:"not_written"`
		}
		readJSON(t, filepath.Join(runs[0], "results.json"), &res)
		if res.Verdict != "valid" || len(res.NotWritten) != 1 || res.NotWritten[0] != "report.html: no space left on device" {
			t.Errorf("results.json: verdict %q, not_written %q; want valid and report.html's reason", res.Verdict, res.NotWritten)
		}
		// Re-rendering on the same full disk fails whole: exit 3, one line, no file.
		code, stdout, stderr := invoke(t, "report", runs[0])
		if code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no space left on device") || stdout != "" {
			t.Errorf("indoubt report on a full disk: exit %d, stdout %q, stderr %q; want exit 3 and one line", code, stdout, stderr)
		}
		for _, e := range entries(t, runs[0]) {
			if strings.HasSuffix(e, ".tmp") || e == "report.html" {
				t.Errorf("indoubt report left %s", e)
			}
		}
		// summary.html of runs elsewhere, onto the full disk: the same.
		a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
		for _, d := range []string{a, b} {
			if err := exec.Command("cp", "-r", runs[0], d).Run(); err != nil {
				t.Fatal(err)
			}
		}
		summary := filepath.Join(out, "summary.html")
		code, _, stderr = invoke(t, "report", "--summary", summary, a, b)
		if code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no space left on device") {
			t.Errorf("summary.html on a full disk: exit %d, stderr %q; want exit 3 and one line", code, stderr)
		}
		if _, err := os.Stat(summary); !os.IsNotExist(err) {
			t.Errorf("summary.html on a full disk: %v, want none", err)
		}
		if fi, err := os.Stat(filepath.Join(a, "report.html")); err != nil || fi.Size() < 100_000 {
			t.Errorf("the report of a run on a disk with room was not written: %v", err)
		}
		for _, e := range entries(t, out) {
			if strings.HasSuffix(e, ".tmp") {
				t.Errorf("left in %s: %s", out, e)
			}
		}
	})
	t.Run("check's --html page does not fit", func(t *testing.T) {
		out := smallTmpfs(t, "16k")
		page := filepath.Join(out, "lin.html")
		hist := filepath.Join("..", "..", "checker", "testdata", "register", "concurrent-read-valid.jsonl")
		code, stdout, stderr := invoke(t, "check", "--html", page, hist)
		if code != 0 || !strings.Contains(stdout, "valid") || !strings.Contains(stderr, "warning") {
			t.Errorf("exit %d, stdout %q, stderr %q; want the verdict and a warning", code, stdout, stderr)
		}
		if left := entries(t, out); len(left) != 0 {
			t.Errorf("left a part of the page: %v", left)
		}
	})
	t.Run("the history does not fit", func(t *testing.T) {
		out := smallTmpfs(t, "16k")
		code, stdout, stderr := invoke(t, "run", "--dsn", srv.DSN, "--out", out, "--workers", "2", "--ops", "400", "--quiet")
		if code != 3 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("exit %d, stderr %q; want exit 3 and one line", code, stderr)
		}
		if stdout != "" {
			t.Errorf("printed a result: %q", stdout)
		}
		if left := entries(t, out); len(left) != 0 {
			t.Errorf("left in --out: %v", left)
		}
	})
}

// Without root (no tmpfs to mount), a summary whose writes fail (/dev/full) is refused
// with one line and exit 3 instead of being reported written.
func TestSummaryOnAFailingPathExits3(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	dir := t.TempDir()
	var runs []string
	for _, n := range []string{"a", "b"} {
		// Real run directories: report holds results.json to its schema.
		runs = append(runs, copyRun(t, naiveCut, filepath.Join(dir, n)))
	}
	code, _, stderr := invoke(t, append([]string{"report", "--summary", "/dev/full"}, runs...)...)
	if code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("--summary /dev/full: exit %d, stderr %q; want exit 3 and one line", code, stderr)
	}
}

// indoubt exec publishes as run does: on a 1 MB tmpfs (as root) its small files fit and
// its report.html does not; the run is published with its verdict's exit code, a
// warning, results.json's not_written, and nothing partial.
func TestExecFullDiskPublishesNothingHalfWritten(t *testing.T) {
	out := smallTmpfs(t, "1m")
	prog := script(t, `ev invoke apply 0 p-1
ev ok apply 0 p-1
ev invoke read 1 final
ev ok read 1 final ',"value":{"p-1":1}'
`)
	code, stdout, stderr := invoke(t, "exec", "--out", out, "--upstream", "127.0.0.1:9", "--model", "exactly-once", "--", prog)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (valid)\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "warning: report.html not written (no space left on device)") {
		t.Errorf("no warning that report.html was not written: %q", stderr)
	}
	runs := published(t, out)
	if len(runs) != 1 {
		t.Fatalf("published: %v", entries(t, out))
	}
	for _, e := range entries(t, out) {
		if strings.HasSuffix(e, ".tmp") || strings.HasSuffix(e, "report.html") || strings.Contains(e, ".indoubt-owner") {
			t.Errorf("left in --out: %s", e)
		}
	}
	var res struct {
		Verdict    string   `json:"verdict"`
		NotWritten []string `json:"not_written"`
	}
	readJSON(t, filepath.Join(runs[0], "results.json"), &res)
	if res.Verdict != "valid" || len(res.NotWritten) != 1 || res.NotWritten[0] != "report.html: no space left on device" {
		t.Errorf("results.json: verdict %q, not_written %q; want valid and report.html's reason", res.Verdict, res.NotWritten)
	}
}
