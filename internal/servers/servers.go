// Package servers is what indoubt's launchers of throwaway local database servers
// share: a server process started in its own process group, as an unprivileged account
// when the caller is root, with the parent-death signal that ties it to the harness
// (StartProcess), and stopped by pid; free loopback ports and readiness polling
// (FreePort, Poll, WaitTCP); temporary directories with owner markers, so that a later
// launch or `indoubt clean` removes what a killed harness left behind (FindLeftovers);
// and the lifecycle each launcher keeps in its server (Instance): the log, a Stop that
// runs once, the process faults, a filesystem mounted under the data directory.
//
// The launchers are packages of their own, so that a program links only what it
// launches: postgres (one server, several, or a primary with a streaming standby),
// redis (one server, or a primary with a replica and three Sentinels), cassandra (one
// node), mariadb (one server, or a node of a Galera cluster), ferret (FerretDB, in this
// process), etcd (a cluster of members), patroni (PostgreSQL nodes under Patroni, with
// an etcd cluster as DCS), and powerloss (the powerfs Mounter for a
// launcher's DataFS option, and the power loss itself: only it links FUSE). None needs
// a database client: readiness is checked at the wire level.
//
// PostgreSQL, Redis and MariaDB accept no client without a password made for the
// launch (in their DSN), so other local users cannot use them; FerretDB (whose embedding API
// offers no authentication) and Cassandra (AllowAllAuthenticator, for start-up time)
// still accept any local client, which can reach their throwaway data but, unlike
// PostgreSQL's superuser, run no program. Each temporary directory names the process
// that launched it (in its name, indoubt-KIND-PID-..., and in a marker file with the
// process's start time): when that process was killed before it could clean up, the
// next launch removes the directory, and FindLeftovers lists such directories for
// `indoubt clean`, whichever launcher made them. A server whose binaries are missing is
// reported with an error that satisfies errors.Is(err, ErrNotInstalled) and whose text
// names what to install.
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
