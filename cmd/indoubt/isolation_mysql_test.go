package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/servers"
)

// indoubt isolation --store mysql on a MariaDB it launches, at serializable only:
// the table on stdout and in isolation.json, every cell agreeing with Hermitage's
// MySQL/InnoDB row, exit 0. Bad input is refused before a launch.
func TestIsolationMySQL(t *testing.T) {
	for _, args := range [][]string{
		{"isolation", "--store", "oracle"},
		{"isolation", "--store", "mysql", "--levels", "snapshot"},
		{"isolation", "--store", "mysql", "--pg-version", "18"},
	} {
		code, _, stderr := invoke(t, args...)
		if code != exitCouldNot || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "isolation") {
			t.Errorf("%v: exit %d, stderr %q; want exit 3 and one line", args, code, stderr)
		}
	}
	if _, err := exec.LookPath("/usr/sbin/mariadbd"); err != nil && os.Getenv("CI") != "true" {
		t.Skip(&servers.NotInstalledError{Server: "mariadb", Program: "mariadbd", Hint: "install Debian package mariadb-server"})
	}
	out := t.TempDir()
	code, stdout, stderr := invoke(t, "isolation", "--store", "mysql", "--levels", "serializable", "--out", out)
	if code != exitValid || !strings.Contains(stdout, "MariaDB") || !strings.Contains(stdout, "prevented: blocked, then aborted 40001") {
		t.Fatalf("exit %d, stderr %s, stdout:\n%s", code, stderr, stdout)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*-isolation-mariadb-*", "isolation.json"))
	if len(files) != 1 {
		t.Fatalf("isolation.json files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var tab isolation.Table
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Cells) != len(isolation.Anomalies()) || len(tab.Findings()) != 0 {
		t.Errorf("isolation.json has %d cells, %d findings", len(tab.Cells), len(tab.Findings()))
	}
}
