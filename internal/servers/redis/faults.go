package redis

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/indoubt/indoubt/internal/servers"
)

// Kill sends SIGKILL to redis-server: what the AOF had not received (or, with
// persistence none, everything) is gone.
func (r *Server) Kill() error { return r.inst.Kill() }

// Pause stops redis-server (SIGSTOP) until Resume.
func (r *Server) Pause() error { return r.inst.Signal(syscall.SIGSTOP) }

// Resume continues a paused redis-server (SIGCONT).
func (r *Server) Resume() error { return r.inst.Signal(syscall.SIGCONT) }

// Start starts a killed redis-server again in the same directory (its AOF) and on the
// same port, with the same password, and returns when it answers PING (AOF loaded).
func (r *Server) Start(ctx context.Context) error { return r.inst.StartAgain(ctx) }

// Restart shuts redis-server down cleanly (SIGTERM) and starts it again. With
// persistence none and no snapshots, a clean restart loses the data too: nothing was
// ever written to disk.
func (r *Server) Restart(ctx context.Context) error { return r.inst.Restart(ctx) }

// DataMount returns the filesystem the launch's DataFS mounted under the data
// directory, or nil.
func (r *Server) DataMount() servers.Mount { return r.inst.DataMount() }

// mountData makes the data directory on m's mount in Dir. The AOF directory is made
// before the mount, durably: Redis 7.0 creates it but never fsyncs its parent, so a
// power loss would otherwise take the whole AOF with it (a finding of package powerfs,
// left out so that what is measured is appendfsync).
func (r *Server) mountData(m servers.Mounter, acct servers.Account) error {
	backing, mnt, err := servers.MountDirs(r.Dir, acct)
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
	if err := r.inst.MountData(m, backing, mnt); err != nil {
		return err
	}
	r.DataDir = mnt
	return nil
}
