// Package servers launches throwaway local database servers for tests and zero-config runs.
//
// Each server runs from the binaries installed on the machine, on a free loopback port, with
// its data in a temporary directory, as an unprivileged user when the caller is root (as
// PostgreSQL demands), in its own process group, and is stopped by pid. PostgreSQL and
// Redis accept no client without a password made for the launch (in their DSN), so other
// local users cannot use them; FerretDB (whose embedding API offers no authentication)
// and Cassandra (AllowAllAuthenticator, for start-up time) still accept any local client,
// which can reach their throwaway data but, unlike PostgreSQL's superuser, run no
// program. Each temporary directory names the process that launched
// it (in its name, indoubt-KIND-PID-..., and in a marker file with the process's start
// time): when that process was killed before it could clean up, the next launch removes
// the directory, and FindLeftovers lists such directories for `indoubt clean`. A server whose
// binaries are missing is reported with an error that satisfies errors.Is(err,
// ErrNotInstalled) and whose text names what to install.
//
// The process helpers (FreePort, ServerAccount, StartProcess, Poll, WaitTCP) are shared by
// every server in the package. The package needs no database client: readiness is checked
// at the wire level.
package servers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotInstalled is matched (errors.Is) by every error that says a server's binaries are
// missing from this machine. Tests skip on it, or fail under CI=true.
var ErrNotInstalled = errors.New("not installed")

// NotInstalledError names the missing program of a server and how to install it.
// It satisfies errors.Is(err, ErrNotInstalled); its text is one line, for example
// "postgres: initdb not found (install Debian package postgresql, or set INDOUBT_PG_BIN)".
type NotInstalledError struct {
	Server  string // the server, "postgres"
	Program string // the missing program, "initdb"
	Hint    string // how to install it, "install Debian package postgresql"
}

func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("%s: %s not found (%s)", e.Server, e.Program, e.Hint)
}

// Is reports whether target is ErrNotInstalled.
func (e *NotInstalledError) Is(target error) bool { return target == ErrNotInstalled }

// IsExecutable reports whether path is a file (not a directory) with an execute bit:
// a program a launcher can run.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// CacheDir returns the cache root that scripts/prepare-cassandra and
// scripts/prepare-postgres18 fill: INDOUBT_CACHE if set, else the user cache directory
// ($XDG_CACHE_HOME or ~/.cache) followed by "indoubt".
func CacheDir() (string, error) {
	if d := os.Getenv("INDOUBT_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	return filepath.Join(d, "indoubt"), nil
}

// NewPassword returns a random password for one launch: 128 bits from crypto/rand, in
// hex so that it needs no escaping in a URL, a shell or a config file.
func NewPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	return hex.EncodeToString(b), nil
}
