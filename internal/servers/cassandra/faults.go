package cassandra

import (
	"context"
	"syscall"

	"github.com/indoubt/indoubt/internal/servers"
)

// Kill sends SIGKILL to the JVM: no drain, no flush of memtables; the next Start replays
// the commit log (what its sync mode had written to it; the kernel keeps the rest).
func (c *Server) Kill() error { return c.inst.Kill() }

// Pause stops the JVM (SIGSTOP) until Resume: connections stay open, nothing answers.
func (c *Server) Pause() error { return c.inst.Signal(syscall.SIGSTOP) }

// Resume continues a paused JVM (SIGCONT).
func (c *Server) Resume() error { return c.inst.Signal(syscall.SIGCONT) }

// Start starts a killed node again on the same data directories and ports and returns
// when it serves CQL (commit log replayed). The JVM's start takes seconds.
func (c *Server) Start(ctx context.Context) error { return c.inst.StartAgain(ctx) }

// Restart shuts the node down cleanly (SIGTERM: Cassandra's shutdown hook drains it and
// flushes its memtables, within the stop grace) and starts it again.
func (c *Server) Restart(ctx context.Context) error { return c.inst.Restart(ctx) }

// DataMount returns the filesystem the launch's DataFS mounted under the data
// directories, or nil.
func (c *Server) DataMount() servers.Mount { return c.inst.DataMount() }
