package postgres

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/indoubt/indoubt/internal/servers"
)

// Kill sends SIGKILL to the postmaster and its backends at once, as a crash of the
// machine's power would not (the page cache survives) but a crash of PostgreSQL does:
// the next Start recovers from the WAL.
func (p *Server) Kill() error { return p.inst.Kill() }

// Pause stops every process of the server (SIGSTOP): connections stay open, nothing
// answers until Resume.
func (p *Server) Pause() error { return p.inst.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (p *Server) Resume() error { return p.inst.Signal(syscall.SIGCONT) }

// Start starts a killed server again on the same data directory and port, with the same
// password, and returns when it answers a query (crash recovery done).
func (p *Server) Start(ctx context.Context) error { return p.inst.StartAgain(ctx) }

// Restart shuts the server down cleanly (fast shutdown) and starts it again on the same
// data directory and port.
func (p *Server) Restart(ctx context.Context) error { return p.inst.Restart(ctx) }

// DataMount returns the filesystem the launch's DataFS mounted under the data
// directory, or nil.
func (p *Server) DataMount() servers.Mount { return p.inst.DataMount() }

// mountData mounts the DataFS under an initdb'd cluster, when the launch asked for one,
// and moves DataDir onto it: initdb ran in the backing directory, so the cluster is
// durable (initdb, with or without --no-sync, never fsyncs the data directory's own entry).
func (p *Server) mountData(m servers.Mounter) error {
	if p.mountPoint == "" {
		return nil
	}
	if err := p.inst.MountData(m, p.mountBacking, p.mountPoint); err != nil {
		return err
	}
	p.DataDir = filepath.Join(p.mountPoint, "data")
	return nil
}
