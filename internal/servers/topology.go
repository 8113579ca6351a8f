package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Replication modes of a replicated PostgreSQL (ReplicatedPostgresOptions.Replication).
const (
	// ReplicationAsync acknowledges a commit once the primary has flushed it: the
	// standby may lack it when the primary dies.
	ReplicationAsync = "async"
	// ReplicationSync acknowledges a commit once the standby has flushed it too
	// (synchronous_standby_names '*', synchronous_commit on).
	ReplicationSync = "sync"
)

// ReplicatedPostgresOptions configures StartReplicatedPostgres.
type ReplicatedPostgresOptions struct {
	// Postgres configures both servers (Settings apply to both; LogPath is the
	// primary's log, the standby's is beside it with ".standby" added).
	Postgres PostgresOptions
	// Replication is ReplicationAsync (also "") or ReplicationSync.
	Replication string
}

// ReplicatedPostgres is a primary and a streaming standby made from it with
// pg_basebackup, both launched like StartPostgres's server (same password). Its fields
// are read-only. Stop ends both.
type ReplicatedPostgres struct {
	Primary, Standby *Postgres
	Replication      string
	// DSN names both servers, for a client that must find the one that takes writes
	// (pgx: target_session_attrs=read-write).
	DSN string
	// Promoted is set once Failover has promoted the standby.
	Promoted bool
}

// StartReplicatedPostgres starts a primary, copies it with pg_basebackup -R into a
// standby that streams from it, and, for ReplicationSync, makes every commit wait for
// the standby. It returns when the standby answers queries and streams.
func StartReplicatedPostgres(ctx context.Context, opt ReplicatedPostgresOptions) (*ReplicatedPostgres, error) {
	switch opt.Replication {
	case "", ReplicationAsync, ReplicationSync:
	default:
		return nil, fmt.Errorf("postgres: replication %q is not async or sync", opt.Replication)
	}
	popt := opt.Postgres
	primary, err := StartPostgres(ctx, popt)
	if err != nil {
		return nil, err
	}
	rp := &ReplicatedPostgres{Primary: primary, Replication: opt.Replication}
	if rp.Replication == "" {
		rp.Replication = ReplicationAsync
	}
	sopt := popt
	if sopt.LogPath != "" {
		sopt.LogPath += ".standby"
	}
	rp.Standby, err = startStandby(ctx, primary, sopt)
	if err != nil {
		_ = primary.Stop()
		return nil, err
	}
	if rp.Replication == ReplicationSync {
		// Set in the file and reloaded, not with -c: a command-line setting would make
		// the primary wait for a standby before there is one.
		conf := filepath.Join(primary.DataDir, "postgresql.conf")
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("\nsynchronous_standby_names = '*'\nsynchronous_commit = on\n")
			err = errors.Join(err, f.Close())
		}
		if err == nil {
			err = primary.signal(syscall.SIGHUP)
		}
		if err != nil {
			_ = rp.Stop()
			return nil, fmt.Errorf("postgres: synchronous replication: %w", err)
		}
	}
	rp.DSN = fmt.Sprintf("postgres://%s:%s@%s,%s/%s?sslmode=disable&target_session_attrs=read-write",
		PostgresUser, primary.Password, primary.Addr, rp.Standby.Addr, PostgresDatabase)
	return rp, nil
}

// startStandby makes a standby of primary in a temporary directory of its own.
func startStandby(ctx context.Context, primary *Postgres, opt PostgresOptions) (*Postgres, error) {
	extra, err := settingArgs(opt.Settings)
	if err != nil {
		return nil, err
	}
	acct, err := ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Postgres{BinDir: primary.BinDir, Version: primary.Version, Password: primary.Password, LogPath: opt.LogPath,
		instance: instance{name: "pgstandby", keep: opt.Keep, sig: syscall.SIGINT, grace: postgresStopGrace}}
	dir, err := s.makeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	s.Dir, s.DataDir, s.SocketDir = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if s.LogPath == "" {
		s.LogPath = filepath.Join(dir, "postgres.log")
	}
	fail := func(err error) (*Postgres, error) { return nil, s.abandon(err) }
	if err := s.makeSocketDir(); err != nil {
		return fail(err)
	}
	if err := acct.Own(s.Dir, s.SocketDir); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	if err := s.openLog(s.LogPath); err != nil {
		return fail(err)
	}
	// The standby reconnects to the primary with this file (pg_basebackup -R names it
	// in primary_conninfo): the password never appears on a command line.
	passfile := filepath.Join(dir, "pgpass")
	line := fmt.Sprintf("127.0.0.1:%d:*:%s:%s\n", primary.Port, PostgresUser, primary.Password)
	if err := os.WriteFile(passfile, []byte(line), 0o600); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	if err := acct.Own(passfile); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=%s passfile=%s application_name=standby", primary.Port, PostgresUser, passfile)
	if err := s.run(ctx, acct, nil, "pg_basebackup", "-d", conn, "-D", s.DataDir, "-R", "-c", "fast", "-X", "stream", "--no-sync"); err != nil {
		return fail(err)
	}
	if err := s.listenOnFreePort(func(string, ...any) {}, func(port int) error { return s.listen(ctx, acct, port, extra) }); err != nil {
		return fail(err)
	}
	s.relaunch = func(ctx context.Context) error { return s.listen(ctx, acct, s.Port, extra) }
	return s, nil
}

// Failover kills the primary (SIGKILL to its process group) and promotes the standby
// (pg_ctl promote, waiting until it takes writes). The old primary stays down: started
// again it would be a second primary on a diverged timeline.
func (rp *ReplicatedPostgres) Failover(ctx context.Context) error {
	if rp.Promoted {
		return errors.New("postgres: failover: the standby was already promoted")
	}
	if err := rp.Primary.Kill(); err != nil {
		return err
	}
	acct, err := ServerAccount()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := rp.Standby.run(ctx, acct, nil, "pg_ctl", "promote", "-w", "-t", strconv.Itoa(60), "-D", rp.Standby.DataDir); err != nil {
		return fmt.Errorf("postgres: promote: %w", err)
	}
	rp.Promoted = true
	return nil
}

// Pid returns the process id of the primary's postmaster, which a failover kills.
func (rp *ReplicatedPostgres) Pid() int { return rp.Primary.Pid() }

// Stop stops both servers and removes their directories.
func (rp *ReplicatedPostgres) Stop() error {
	var errs []error
	if rp.Standby != nil {
		errs = append(errs, rp.Standby.Stop())
	}
	errs = append(errs, rp.Primary.Stop())
	return errors.Join(errs...)
}
