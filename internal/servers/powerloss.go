package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/indoubt/indoubt/internal/powerfs"
)

// A launched server can keep its data directory on a powerfs mount (the PowerFS option
// of PostgresOptions and RedisOptions), so that a power loss can be simulated: the
// server is killed, everything it wrote but never fsynced is undone, and it starts again
// on what survived.
//
// The mount lives in the launch's temporary directory: "fs.backing" holds the files,
// "fs" is the mountpoint, and only the data directory is under it. The server's working
// directory, its binary, its log and its configuration stay off the mount: a child that
// touches the mount between fork and exec can deadlock the process that serves it (see
// package powerfs). Directory entries follow the POSIX rule (powerfs.PerDirectory): a new
// name is durable once its directory is fsynced. What the launcher writes before the
// server starts (an initdb'd cluster, Redis's empty AOF directory) is made in the backing
// directory before the mount, so it counts as durable, as on a machine that was set up
// and rebooted before the test.

// ErrNotOnPowerFS is returned by PowerLoss for a server launched without PowerFS.
var ErrNotOnPowerFS = errors.New("the data directory is not on powerfs (launch it with PowerFS)")

// powerDirs makes the backing directory and the mountpoint in the temporary directory
// dir and returns them; the backing directory belongs to the server's account.
func powerDirs(dir string, acct Account) (backing, mnt string, err error) {
	backing, mnt = filepath.Join(dir, "fs.backing"), filepath.Join(dir, "fs")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", "", err
		}
	}
	// The mount's root takes the backing root's owner and mode; the server's account
	// must enter it, and root (this process) serves it.
	if err := acct.Own(backing); err != nil {
		return "", "", err
	}
	if err := os.Chmod(mnt, 0o755); err != nil {
		return "", "", err
	}
	return backing, mnt, nil
}

// mountPowerFS mounts backing on mnt for this instance; cleanup unmounts it. opts may
// be nil.
func (s *instance) mountPowerFS(backing, mnt string, opts *powerfs.Options) error {
	f, err := powerfs.Mount(backing, mnt, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.pfs = f
	return nil
}

// powerLoss kills the server, undoes what it never fsynced, and starts it again on the
// same data, port and password. A server that does not start again on what survived
// is reported with its log's tail in the error (startAgain's).
func (s *instance) powerLoss(ctx context.Context, opts powerfs.PowerLossOptions) error {
	if s.pfs == nil {
		return fmt.Errorf("%s: power loss: %w", s.name, ErrNotOnPowerFS)
	}
	if err := s.kill(); err != nil {
		return err
	}
	if err := s.pfs.PowerLoss(opts); err != nil {
		return fmt.Errorf("%s: power loss: %w", s.name, err)
	}
	return s.startAgain(ctx)
}

// PowerStats returns the counts of the powerfs under the server's data directory; ok is
// false when it has none.
func (s *instance) PowerStats() (st powerfs.Stats, ok bool) {
	if s.pfs == nil {
		return st, false
	}
	return s.pfs.Stats(), true
}

// PowerLoss kills PostgreSQL (postmaster and backends, SIGKILL), brings its data
// directory back to what was fsynced (powerfs.FS.PowerLoss), and starts it again on the
// same port, returning once it answers a query (crash recovery done). It needs a server
// launched with PostgresOptions.PowerFS.
func (p *Postgres) PowerLoss(ctx context.Context, opts powerfs.PowerLossOptions) error {
	return p.powerLoss(ctx, opts)
}

// PowerLoss kills redis-server, brings its directory back to what was fsynced, and
// starts it again on the same port, returning once it answers PING (AOF loaded). It
// needs a server launched with RedisOptions.PowerFS.
func (r *Redis) PowerLoss(ctx context.Context, opts powerfs.PowerLossOptions) error {
	return r.powerLoss(ctx, opts)
}

// unmountUnder lazily unmounts every mount at or under dir (a leftover powerfs whose
// serving process died: any access would fail with ENOTCONN, and RemoveAll with it).
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	// Deepest first.
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountData mounts the powerfs under an initdb'd cluster, when the launch asked for one,
// and moves DataDir onto it: initdb ran in the backing directory, so the cluster is
// durable (initdb, with or without --no-sync, never fsyncs the data directory's own entry).
func (p *Postgres) mountData() error {
	if p.pfsMount == "" {
		return nil
	}
	if err := p.mountPowerFS(p.pfsBacking, p.pfsMount, nil); err != nil {
		return err
	}
	p.DataDir = filepath.Join(p.pfsMount, "data")
	return nil
}

// mountData makes the data directory on a powerfs mount in Dir. The AOF directory is
// made before the mount, durably: Redis 7.0 creates it but never fsyncs its parent, so a
// power loss would otherwise take the whole AOF with it (a finding of package powerfs,
// left out so that what is measured is appendfsync).
func (r *Redis) mountData(acct Account) error {
	backing, mnt, err := powerDirs(r.Dir, acct)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	aof := filepath.Join(backing, "appendonlydir")
	if err := os.Mkdir(aof, 0o755); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := acct.Own(aof); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := r.mountPowerFS(backing, mnt, nil); err != nil {
		return err
	}
	r.DataDir = mnt
	return nil
}

// PowerLoss kills the JVM, brings the node's data directories (data, commitlog,
// saved_caches, hints) back to what was fsynced, and starts it again on the same ports,
// returning once it serves CQL (commit log replayed). It needs a node launched with
// CassandraOptions.PowerFS.
func (c *Cassandra) PowerLoss(ctx context.Context, opts powerfs.PowerLossOptions) error {
	return c.powerLoss(ctx, opts)
}
