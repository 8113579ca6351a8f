package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyRun copies the files of run directory src into a new directory dst.
func copyRun(t *testing.T, src, dst string) string {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// naiveCut is a real failing run directory of the repository.
var naiveCut = filepath.Join("..", "..", "internal", "shrink", "testdata", "naive-cut")

// TestReportWritesNoLinkOutOfTheRun: a report.html or summary.html that a run directory
// links to a file elsewhere (or to nowhere) is replaced by the page; the file it named
// is left as it was, and a dangling link's target is not created.
func TestReportWritesNoLinkOutOfTheRun(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	os.WriteFile(outside, []byte("keep"), 0o644)
	nowhere := filepath.Join(t.TempDir(), "created.txt")
	a := copyRun(t, naiveCut, filepath.Join(parent, "a"))
	b := copyRun(t, naiveCut, filepath.Join(parent, "b"))
	os.Symlink(outside, filepath.Join(a, "report.html"))
	os.Symlink(nowhere, filepath.Join(b, "report.html"))
	os.Symlink(outside, filepath.Join(parent, "summary.html"))
	code, _, errs := invoke(t, "report", a, b)
	if code != 0 {
		t.Fatalf("report: exit %d, %s", code, errs)
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep" {
		t.Errorf("the file report.html linked to now holds %d bytes", len(got))
	}
	if _, err := os.Lstat(nowhere); err == nil {
		t.Errorf("a dangling report.html link created its target %s", nowhere)
	}
	for _, page := range []string{filepath.Join(a, "report.html"), filepath.Join(b, "report.html"), filepath.Join(parent, "summary.html")} {
		fi, err := os.Lstat(page)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			t.Errorf("%s: %v, want the page as a regular file in the run's directory", page, err)
		}
	}
}

// TestChaosMeshOutReplacesALink: --out through a link writes the objects in place of
// the link, not into the file it names.
func TestChaosMeshOutReplacesALink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.yaml")
	os.WriteFile(outside, []byte("keep"), 0o644)
	out := filepath.Join(t.TempDir(), "objects.yaml")
	os.Symlink(outside, out)
	code, _, errs := invoke(t, "chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--pod", "n2=pg-1", "--fault", "partition:isolate-primary@5s-20s", "--out", out)
	if code != 0 {
		t.Fatalf("chaos-mesh: exit %d, %s", code, errs)
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep" {
		t.Errorf("the file --out linked to was written")
	}
	if fi, err := os.Lstat(out); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("--out: %v, want a regular file", err)
	}
}

// TestReportAndCompareHoldResultsToTheSchema: a results.json that no run writes (a
// schema_version of another layout, null, a negative count) is refused with one line
// naming what is wrong, by report and by compare; a FIFO as history.jsonl is refused
// at once, not read forever.
func TestReportAndCompareHoldResultsToTheSchema(t *testing.T) {
	parent := t.TempDir()
	good := copyRun(t, naiveCut, filepath.Join(parent, "good"))
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		raw  string
		want string
	}{
		{name: "schema version", edit: func(r map[string]any) { r["schema_version"] = 999 }, want: "at /schema_version: value must be 1"},
		{name: "negative count", edit: func(r map[string]any) { r["ops"].(map[string]any)["ok"] = -5 }, want: "at /ops/ok: minimum: got -5, want 0"},
		{name: "null", raw: "null", want: "at /: got null, want object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRun(t, naiveCut, filepath.Join(parent, strings.ReplaceAll(tc.name, " ", "-")))
			path := filepath.Join(dir, "results.json")
			if tc.raw != "" {
				os.WriteFile(path, []byte(tc.raw), 0o644)
			} else {
				var r map[string]any
				readJSON(t, path, &r)
				tc.edit(r)
				writeJSON(t, path, r)
			}
			wantRefused(t, tc.want, "report", dir)
			wantRefused(t, tc.want, "compare", good, dir)
		})
	}
	fifo := copyRun(t, naiveCut, filepath.Join(parent, "fifo"))
	os.Remove(filepath.Join(fifo, "history.jsonl"))
	if err := syscall.Mkfifo(filepath.Join(fifo, "history.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wantRefused(t, "history.jsonl is a FIFO, not a regular file", "report", fifo)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Open the FIFO's other end so that a report blocked on it ends.
		f, _ := os.OpenFile(filepath.Join(fifo, "history.jsonl"), os.O_WRONLY, 0)
		f.Close()
		<-done
		t.Fatal("report waited on a FIFO as history.jsonl")
	}
}

// TestShrinkTakesNoInstructionsFromTheRun: a config.json whose pg_version names a
// directory of binaries is refused before anything runs (the directory's initdb would
// have been executed); one naming a DSN is refused unless --dsn names the server.
func TestShrinkTakesNoInstructionsFromTheRun(t *testing.T) {
	parent := t.TempDir()
	bin := filepath.Join(parent, "bin")
	marker := filepath.Join(parent, "ran")
	os.MkdirAll(bin, 0o755)
	for _, prog := range []string{"initdb", "postgres", "pg_ctl"} {
		os.WriteFile(filepath.Join(bin, prog), []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755)
	}
	run := copyRun(t, naiveCut, filepath.Join(parent, "run"))
	cfgPath := filepath.Join(run, "config.json")
	var cfg map[string]any
	readJSON(t, cfgPath, &cfg)
	cfg["pg_version"] = bin
	writeJSON(t, cfgPath, cfg)
	wantRefused(t, "shrink runs no program a run directory names", "shrink", "--budget", "10s", run)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("shrink ran a program of config.json's pg_version")
	}
	delete(cfg, "pg_version")
	cfg["dsn"] = "postgres://app@127.0.0.1:1/app"
	writeJSON(t, cfgPath, cfg)
	wantRefused(t, "shrink connects to no server a run directory names; give it with --dsn", "shrink", "--budget", "10s", run)
}

// TestReportAndCompareSayWhenResultsDisagree: a results.json that says valid over a
// history the checker finds invalid is not believed silently: report and compare say
// so, naming what the re-check found.
func TestReportAndCompareSayWhenResultsDisagree(t *testing.T) {
	run := copyRun(t, naiveCut, filepath.Join(t.TempDir(), "lie"))
	var r map[string]any
	readJSON(t, filepath.Join(run, "results.json"), &r)
	r["verdict"], r["summary"] = "valid", "valid"
	writeJSON(t, filepath.Join(run, "results.json"), r)
	for _, args := range [][]string{{"report", run}, {"compare", run, naiveCut}} {
		code, out, errs := invoke(t, args...)
		if code != 0 || !strings.Contains(errs, "results.json says valid, but the run directory judged again from its files is invalid") {
			t.Errorf("%v: exit %d, stderr %q; want a warning that results.json does not hold to its history", args, code, errs)
		}
		// What is rendered is the judgement, not the lie.
		if args[0] == "compare" && !strings.Contains(out, "A verdict: invalid") {
			t.Errorf("compare: %q; want run A shown as judged, invalid", out)
		}
	}
}
