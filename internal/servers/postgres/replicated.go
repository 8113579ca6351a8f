package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// Replication modes of a replicated PostgreSQL (ReplicatedOptions.Replication).
const (
	// ReplicationAsync acknowledges a commit once the primary has flushed it: the
	// standby may lack it when the primary dies.
	ReplicationAsync = "async"
	// ReplicationSync acknowledges a commit once the standby has flushed it too
	// (synchronous_standby_names '*', synchronous_commit on).
	ReplicationSync = "sync"
)

// ReplicatedOptions configures StartReplicated.
type ReplicatedOptions struct {
	// Postgres configures both servers (Settings apply to both; LogPath is the
	// primary's log, the standby's is beside it with ".standby" added).
	Postgres Options
	// Replication is ReplicationAsync (also "") or ReplicationSync.
	Replication string
	// StandbyNode is the standby's node when Postgres.Node places the primary on one
	// (both or neither); see Options.Node.
	StandbyNode *servers.Node
	// PrimaryVia, when set, is the host:port the standby streams from in place of the
	// primary's own address: a link proxy in front of the primary, for slow or lossy
	// replication. pg_basebackup copies the primary directly.
	PrimaryVia string
}

// Replicated is a primary and a streaming standby made from it with
// pg_basebackup, both launched like Start's server (same password). Its fields
// are read-only. Stop ends both.
type Replicated struct {
	Primary, Standby *Server
	Replication      string
	// DSN names both servers, for a client that must find the one that takes writes
	// (pgx: target_session_attrs=read-write).
	DSN string
	// Promoted is set once Failover has promoted the standby: from then on Standby
	// is the primary.
	Promoted bool
	// Rejoined is set once Rejoin has made the old primary a standby of the promoted
	// one: Primary streams from Standby.
	Rejoined bool
}

// rewindSettings are what pg_rewind needs of both servers to make a killed primary
// follow the promoted standby (Rejoin), unless ReplicatedOptions' Settings
// say otherwise:
//   - wal_log_hints: every hint-bit change in the WAL, so that pg_rewind sees every
//     page the old primary changed after the two diverged (data checksums would do
//     too, but initdb would have to make them);
//   - wal_keep_size: pg_rewind reads the old primary's WAL back from the last
//     checkpoint before the divergence, and the rewound server replays the new
//     primary's from there, so neither may have recycled it. A checkpoint comes at
//     the latest every max_wal_size (1 GB by default) of WAL: keeping as much covers
//     it. Only WAL a run writes is kept; a short run writes megabytes.
var rewindSettings = map[string]string{"wal_log_hints": "on", "wal_keep_size": "1GB"}

// StartReplicated starts a primary, copies it with pg_basebackup -R into a
// standby that streams from it, and, for ReplicationSync, makes every commit wait for
// the standby. It returns when the standby answers queries and streams.
func StartReplicated(ctx context.Context, opt ReplicatedOptions) (*Replicated, error) {
	switch opt.Replication {
	case "", ReplicationAsync, ReplicationSync:
	default:
		return nil, fmt.Errorf("postgres: replication %q is not async or sync", opt.Replication)
	}
	if (opt.Postgres.Node == nil) != (opt.StandbyNode == nil) {
		return nil, errors.New("postgres: a primary and standby on nodes need a node each")
	}
	popt := opt.Postgres
	popt.Settings = map[string]string{}
	for k, v := range rewindSettings {
		popt.Settings[k] = v
	}
	for k, v := range opt.Postgres.Settings {
		popt.Settings[k] = v
	}
	primary, err := Start(ctx, popt)
	if err != nil {
		return nil, err
	}
	rp := &Replicated{Primary: primary, Replication: opt.Replication}
	if rp.Replication == "" {
		rp.Replication = ReplicationAsync
	}
	// Also in the file, which pg_basebackup copies: pg_rewind finishes the crash
	// recovery of a killed server in single-user mode, without the -c settings; it
	// then refuses a cluster whose last run had wal_log_hints off, and that run's
	// shutdown checkpoint must keep the WAL too.
	var conf []string
	for _, k := range []string{"wal_log_hints", "wal_keep_size"} {
		conf = append(conf, fmt.Sprintf("%s = '%s'", k, popt.Settings[k]))
	}
	if err := appendConf(primary, strings.Join(conf, "\n")); err != nil {
		_ = primary.Stop()
		return nil, err
	}
	sopt := popt
	if sopt.LogPath != "" {
		sopt.LogPath += ".standby"
	}
	sopt.Node = opt.StandbyNode
	rp.Standby, err = startStandby(ctx, primary, sopt, opt.PrimaryVia)
	if err != nil {
		_ = primary.Stop()
		return nil, err
	}
	if rp.Replication == ReplicationSync {
		if err := requireSyncStandby(primary); err != nil {
			_ = rp.Stop()
			return nil, err
		}
	}
	rp.DSN = fmt.Sprintf("postgres://%s:%s@%s,%s/%s?sslmode=disable&target_session_attrs=read-write",
		User, primary.Password, primary.Addr, rp.Standby.Addr, Database)
	return rp, nil
}

// startStandby makes a standby of primary in a temporary directory of its own.
// via, when not empty, is the host:port the standby streams from in place of the
// primary's (ReplicatedOptions.PrimaryVia).
func startStandby(ctx context.Context, primary *Server, opt Options, via string) (*Server, error) {
	extra, err := settingArgs(opt.Settings)
	if err != nil {
		return nil, err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Server{BinDir: primary.BinDir, Version: primary.Version, Password: primary.Password, LogPath: opt.LogPath,
		node: opt.Node, inst: servers.Instance{Name: "pgstandby", Keep: opt.Keep, StopSignal: syscall.SIGINT, StopGrace: stopGrace}}
	s.Handle = s.inst.Handle()
	dir, err := s.inst.MakeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	s.Dir, s.DataDir, s.SocketDir = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if s.LogPath == "" {
		s.LogPath = filepath.Join(dir, "postgres.log")
	}
	fail := func(err error) (*Server, error) { return nil, s.inst.Abandon(err) }
	if err := s.makeSocketDir(); err != nil {
		return fail(err)
	}
	if err := acct.Own(s.Dir, s.SocketDir); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	if err := s.inst.OpenLog(s.LogPath); err != nil {
		return fail(err)
	}
	// The standby reconnects to the primary with this file (pg_basebackup -R names it
	// in primary_conninfo): the password never appears on a command line.
	passfile, err := writePassfile(dir, primary, acct)
	if err != nil {
		return fail(err)
	}
	conn := fmt.Sprintf("host=%s port=%d user=%s passfile=%s application_name=standby", primary.host(), primary.Port, User, passfile)
	if _, err := os.Stat(filepath.Join(primary.BinDir, "pg_basebackup")); err == nil {
		if err := s.run(ctx, acct, nil, "pg_basebackup", "-d", conn, "-D", s.DataDir, "-R", "-c", "fast", "-X", "stream", "--no-sync"); err != nil {
			return fail(err)
		}
	} else if err := coldCopy(ctx, primary, s, acct, conn); err != nil {
		return fail(err)
	}
	if via != "" {
		host, port, err := net.SplitHostPort(via)
		if err != nil {
			return fail(fmt.Errorf("postgres: primary via %q: %w", via, err))
		}
		// Set after pg_basebackup's -R: the last primary_conninfo in the file wins.
		vconn := fmt.Sprintf("primary_conninfo = 'host=%s port=%s user=%s passfile=%s application_name=standby'", host, port, User, passfile)
		if err := appendAutoConf(s, vconn); err != nil {
			return fail(err)
		}
	}
	if err := s.listenSomewhere(ctx, acct, extra, func(string, ...any) {}); err != nil {
		return fail(err)
	}
	s.inst.SetRelaunch(func(ctx context.Context) error { return s.listen(ctx, acct, s.Port, extra) })
	return s, nil
}

// coldCopy makes standby's data directory a copy of primary's without pg_basebackup,
// which the server binaries from Maven Central (PostgreSQL 18 here) do not have: the
// primary, which has no client yet, is shut down cleanly, its directory copied whole
// (WAL included, the shutdown checkpoint last in it), and started again; the copy gets
// standby.signal and conn as its primary_conninfo, as pg_basebackup -R writes them, and
// streams from that checkpoint on. It is PostgreSQL's documented way to make a standby
// from a stopped primary.
func coldCopy(ctx context.Context, primary, standby *Server, acct servers.Account, conn string) error {
	copyData := func(context.Context) error {
		if err := copyTree(primary.DataDir, standby.DataDir, acct); err != nil {
			return fmt.Errorf("postgres: copy the primary for its standby: %w", err)
		}
		if err := os.WriteFile(filepath.Join(standby.DataDir, "standby.signal"), nil, 0o600); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if err := acct.Own(filepath.Join(standby.DataDir, "standby.signal")); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return appendAutoConf(standby, fmt.Sprintf("primary_conninfo = '%s'", conn))
	}
	if err := primary.inst.RestartAfter(ctx, copyData); err != nil {
		return fmt.Errorf("postgres: standby by a copy of the stopped primary: %w", err)
	}
	return nil
}

// copyTree copies directory src to dst (which must not exist), files with their
// modes, everything given to acct; a server's lock and options files
// (postmaster.pid, postmaster.opts) are left out.
func copyTree(src, dst string, acct servers.Account) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "postmaster.pid" || rel == "postmaster.opts" {
			return nil
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, to, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a file or directory", path)
		}
		return acct.Own(to)
	})
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// requireSyncStandby makes every commit on p wait until a standby has flushed it
// (synchronous_standby_names '*', synchronous_commit on). It is set in the file and
// reloaded, not with -c: a command-line setting would make p wait for a standby from
// its start, before there is one.
func requireSyncStandby(p *Server) error {
	err := appendConf(p, "synchronous_standby_names = '*'\nsynchronous_commit = on")
	if err == nil {
		err = p.inst.Signal(syscall.SIGHUP)
	}
	if err != nil {
		return fmt.Errorf("postgres: synchronous replication: %w", err)
	}
	return nil
}

// appendConf appends lines to p's postgresql.conf (read at the next start or reload).
func appendConf(p *Server, lines string) error {
	f, err := os.OpenFile(filepath.Join(p.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("\n" + lines + "\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// appendAutoConf appends a line to s's postgresql.auto.conf, where pg_basebackup -R
// and pg_rewind -R write primary_conninfo.
func appendAutoConf(s *Server, line string) error {
	f, err := os.OpenFile(filepath.Join(s.DataDir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(line + "\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// writePassfile writes dir/pgpass, readable by acct alone, with the password of
// server, for a client or standby of it run as acct, and returns its path.
func writePassfile(dir string, server *Server, acct servers.Account) (string, error) {
	passfile := filepath.Join(dir, "pgpass")
	// Any host and port: the standby may reach the server through a link proxy.
	line := fmt.Sprintf("*:*:*:%s:%s\n", User, server.Password)
	if err := os.WriteFile(passfile, []byte(line), 0o600); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if err := acct.Own(passfile); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return passfile, nil
}

// Failover kills the primary (SIGKILL to all its processes) unless it is down already,
// and promotes the standby (pg_ctl promote, waiting until it takes writes). The old
// primary stays down until Rejoin: started again as it was, it would be a second
// primary on a diverged timeline.
func (rp *Replicated) Failover(ctx context.Context) error {
	if rp.Promoted {
		return errors.New("postgres: failover: the standby was already promoted")
	}
	if err := rp.Primary.Kill(); err != nil && !errors.Is(err, servers.ErrDown) {
		return err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := rp.Standby.run(ctx, acct, nil, "pg_ctl", "promote", "-w", "-t", strconv.Itoa(60), "-D", rp.Standby.DataDir); err != nil {
		return fmt.Errorf("postgres: promote: %w", err)
	}
	rp.Promoted = true
	return nil
}

// rejoinedName is the application_name the rejoined old primary streams under.
const rejoinedName = "rejoined"

// Rejoin brings the old primary that Failover killed back as a standby of the promoted
// one, as an operator (or Patroni) does after a failover:
//
//  1. CHECKPOINT on the new primary, so that its control file names the timeline it
//     was promoted to, which is what pg_rewind reads to find where the two diverged;
//  2. pg_rewind -R from the new primary: it first runs the killed server once in
//     single-user mode to finish its crash recovery (pg_rewind wants a clean
//     shutdown), then throws away what the old primary wrote after the point where
//     the standby was promoted (its WAL, and commits it may have acknowledged, that
//     the standby never received), copies what changed on the new primary, and writes
//     standby.signal and a primary_conninfo naming the new primary;
//  3. the old primary starts on its data directory and port as a hot standby, and
//     Rejoin waits until the new primary's pg_stat_replication shows it streaming.
//
// With ReplicationSync, the new primary then requires the rejoined standby for every
// commit (synchronous_standby_names '*', reloaded) and Rejoin waits until it is the
// synchronous standby. Between the promotion and that moment the new primary commits
// alone: it has no standby to wait for, as with Patroni's synchronous_mode (not
// strict). After Rejoin, Standby is the primary and Primary its standby; the DSN still
// names both. It fails when Failover did not run, when pg_rewind is not installed
// beside the server binaries, or when the old primary cannot stream again; the old
// primary is then left down.
func (rp *Replicated) Rejoin(ctx context.Context) error {
	switch {
	case !rp.Promoted:
		return errors.New("postgres: rejoin: no failover to rejoin after")
	case rp.Rejoined:
		return errors.New("postgres: rejoin: the old primary rejoined already")
	}
	old, primary := rp.Primary, rp.Standby
	if !servers.IsExecutable(filepath.Join(old.BinDir, "pg_rewind")) {
		return &servers.NotInstalledError{Server: "postgres", Program: "pg_rewind", Hint: "not in " + old.BinDir + "; rejoin needs PostgreSQL's client tools beside the server (Debian package postgresql)"}
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	rewind := func(ctx context.Context) error {
		if _, err := queryFirst(ctx, time.Minute, primary.Addr, User, primary.Password, Database, "checkpoint"); err != nil {
			return fmt.Errorf("postgres: rejoin: checkpoint on the new primary: %w", err)
		}
		// The password reaches pg_rewind, and the standby it writes the settings
		// of, through a file only the server's account reads.
		passfile, err := writePassfile(old.Dir, primary, acct)
		if err != nil {
			return err
		}
		conn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s passfile=%s application_name=%s",
			primary.host(), primary.Port, User, Database, passfile, rejoinedName)
		// --no-sync as for pg_basebackup: the cluster goes with its directory, and
		// the server itself keeps fsync on from here.
		if err := old.run(ctx, acct, nil, "pg_rewind", "-D", old.DataDir, "--source-server="+conn, "-R", "--no-sync"); err != nil {
			return fmt.Errorf("postgres: rejoin: pg_rewind: %w", err)
		}
		return nil
	}
	if err := old.inst.StartAgainAfter(ctx, rewind); err != nil {
		return err
	}
	logStart, _ := old.inst.Log().Seek(0, io.SeekEnd)
	if err := rp.waitRejoined(ctx, "async", logStart); err != nil {
		return err
	}
	if rp.Replication == ReplicationSync {
		if err := requireSyncStandby(primary); err != nil {
			return err
		}
		if err := rp.waitRejoined(ctx, "sync", logStart); err != nil {
			return err
		}
	}
	rp.Rejoined = true
	return nil
}

// waitRejoined polls the new primary until its pg_stat_replication shows the rejoined
// standby streaming with sync_state syncState, for at most 30 s; the error quotes the
// standby's log from logStart.
func (rp *Replicated) waitRejoined(ctx context.Context, syncState string, logStart int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	primary := rp.Standby
	q := "select state || ' ' || sync_state from pg_stat_replication where application_name = '" + rejoinedName + "'"
	want := "streaming " + syncState
	var got string
	err := servers.Poll(ctx, 50*time.Millisecond, rp.Primary.Exited(), func(ctx context.Context) error {
		var err error
		if got, err = queryFirst(ctx, 2*time.Second, primary.Addr, User, primary.Password, Database, q); err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("replication state %q", got)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: rejoin: the old primary is not a %s streaming standby of the new one: %w: %s", syncState, err, logTail(rp.Primary.LogPath, logStart))
	}
	return nil
}

// Pid returns the process id of the primary's postmaster, which a failover kills.
func (rp *Replicated) Pid() int { return rp.Primary.Pid() }

// Stop stops both servers and removes their directories.
func (rp *Replicated) Stop() error {
	var errs []error
	if rp.Standby != nil {
		errs = append(errs, rp.Standby.Stop())
	}
	errs = append(errs, rp.Primary.Stop())
	return errors.Join(errs...)
}

// Role asks server s for its own view of its role: "primary" when it takes writes,
// "standby" while it replays WAL (pg_is_in_recovery). After a failover inside a
// partition the old primary still answers "primary" until it is stopped: two servers
// that each say so are a split brain.
func (s *Server) Role(ctx context.Context) (string, error) {
	v, err := queryFirst(ctx, time.Second, s.Addr, User, s.Password, Database, "select pg_is_in_recovery()")
	if err != nil {
		return "", err
	}
	if v == "t" {
		return "standby", nil
	}
	return "primary", nil
}
