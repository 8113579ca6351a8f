package postgres

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/servers"
)

// installFake makes dir/<prog> executable files, enough for the binary search to accept
// the directory (nothing runs them).
func installFake(t *testing.T, dir string, progs ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindPostgres(t *testing.T) {
	lib := t.TempDir()
	for _, v := range []string{"9.6", "15", "10"} {
		installFake(t, filepath.Join(lib, v, "bin"), "initdb", "postgres")
	}
	// The highest version lacks postgres: a broken install is passed over.
	installFake(t, filepath.Join(lib, "16", "bin"), "initdb")
	glob := filepath.Join(lib, "*", "bin")

	onPath := t.TempDir()
	installFake(t, filepath.Join(onPath, "real"), "initdb", "postgres")
	if err := os.Symlink(filepath.Join(onPath, "real", "initdb"), filepath.Join(onPath, "initdb")); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()

	tests := []struct {
		name, env, path, want string
	}{
		{"highest complete version under the lib glob", "", empty, filepath.Join(lib, "15", "bin")},
		{"INDOUBT_PG_BIN wins", filepath.Join(lib, "10", "bin"), onPath, filepath.Join(lib, "10", "bin")},
		{"PATH before the lib glob, through symlinks", "", onPath, filepath.Join(onPath, "real")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			got, err := findPostgres(tc.env, glob)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFindPostgresMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tests := []struct {
		name, env, glob string
		wantText        []string
	}{
		{"nothing installed", "", filepath.Join(t.TempDir(), "*", "bin"),
			[]string{"postgres: initdb not found", "install Debian package postgresql", "INDOUBT_PG_BIN"}},
		// A wrong INDOUBT_PG_BIN is an error even though /usr/lib/postgresql may be fine:
		// silently using another version would hide the mistake.
		{"INDOUBT_PG_BIN names no installation", "/nonexistent", pgLibGlob,
			[]string{"postgres: initdb not found", "INDOUBT_PG_BIN=/nonexistent", "Debian package postgresql"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := findPostgres(tc.env, tc.glob)
			if !errors.Is(err, servers.ErrNotInstalled) {
				t.Fatalf("got %v, want an ErrNotInstalled", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("message has several lines: %q", msg)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestVersionLess(t *testing.T) {
	got := []string{"/l/15/bin", "/l/9.6/bin", "/l/10/bin", "/l/9.5/bin", "/l/16/bin"}
	slices.SortFunc(got, func(a, b string) int {
		switch {
		case versionLess(a, b):
			return -1
		case versionLess(b, a):
			return 1
		}
		return 0
	})
	want := []string{"/l/9.5/bin", "/l/9.6/bin", "/l/10/bin", "/l/15/bin", "/l/16/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSettingArgs(t *testing.T) {
	got, err := settingArgs(map[string]string{"work_mem": "8MB", "max_connections": "64", "auto_explain.log_min_duration": "0"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-c", "max_connections=200", "-c", "auto_explain.log_min_duration=0",
		"-c", "max_connections=64", "-c", "work_mem=8MB"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"port", "Listen_Addresses", "unix_socket_directories", "data_directory", "a=b", "", "x y", "-D"} {
		if _, err := settingArgs(map[string]string{bad: "1"}); err == nil {
			t.Errorf("setting %q accepted", bad)
		}
	}
}

func TestFindPostgresVersion(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, p), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	lib := filepath.Join(root, "lib", "18", "bin")
	cache := filepath.Join(root, "cache")
	half := filepath.Join(cache, "postgres-18.2.0")
	whole := filepath.Join(cache, "postgres-18.1.0")
	mk(filepath.Join(half, "bin")) // no "complete": still being unpacked
	mk(filepath.Join(whole, "bin"))
	if err := os.WriteFile(filepath.Join(whole, "complete"), []byte("18.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findPostgresVersion("18", lib, cache); err != nil || got != filepath.Join(whole, "bin") {
		t.Errorf("cache only: got %q, %v; want the complete tree", got, err)
	}
	mk(lib)
	if got, err := findPostgresVersion("18", lib, cache); err != nil || got != lib {
		t.Errorf("Debian's and the cache's: got %q, %v; want Debian's %s", got, err, lib)
	}
	if _, err := findPostgresVersion("17", filepath.Join(root, "lib", "17", "bin"), cache); !errors.Is(err, servers.ErrNotInstalled) {
		t.Errorf("17: got %v, want ErrNotInstalled", err)
	}
}
