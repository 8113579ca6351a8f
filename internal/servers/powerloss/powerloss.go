// Package powerloss simulates a power loss under a launched server: its data directory
// is kept on powerfs, and Cut kills the server, undoes everything it wrote but never
// fsynced, and starts it again on what survived.
//
// Launch the server with FS as its DataFS option (postgres.Options, redis.Options,
// cassandra.Options), then call Cut as often as the test needs:
//
//	pg, err := postgres.Start(ctx, postgres.Options{DataFS: powerloss.FS{}})
//	...
//	err = powerloss.Cut(ctx, pg, powerfs.PowerLossOptions{})
//
// The package is apart from the launchers so that a program that launches servers
// without power loss does not link powerfs and its FUSE library. Mounting needs root and
// /dev/fuse: without them the launch fails with an error matching powerfs.ErrUnavailable.
package powerloss

import (
	"context"
	"errors"
	"fmt"

	"github.com/indoubt/indoubt/internal/powerfs"
	"github.com/indoubt/indoubt/internal/servers"
)

// FS mounts powerfs under a launched server's data directory: pass it as the launcher's
// DataFS option. The zero value is ready to use.
type FS struct {
	// Entries is the mount's rule for directory entries: powerfs.PerDirectory (the zero
	// value, the POSIX rule: a new name is durable once its directory is fsynced) or
	// powerfs.Ordered (a journaling filesystem's: any fsync makes every earlier entry
	// change durable).
	Entries powerfs.EntryDurability
}

var _ servers.Mounter = FS{}

// Mount mounts powerfs from backing at mountpoint. The error matches
// powerfs.ErrUnavailable where FUSE cannot be used.
func (f FS) Mount(backing, mountpoint string) (servers.Mount, error) {
	m, err := powerfs.Mount(backing, mountpoint, &powerfs.Options{Entries: f.Entries})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Server is a launched server whose data directory may be on FS: a *postgres.Server,
// *redis.Server or *cassandra.Server.
type Server interface {
	// Kill sends SIGKILL to every process of the server and waits for them to go.
	Kill() error
	// Start starts a killed server again on its data, port and password, and returns
	// once it answers.
	Start(ctx context.Context) error
	// DataMount returns the filesystem the launch's DataFS mounted, or nil.
	DataMount() servers.Mount
}

// ErrNotOnPowerFS is returned by Cut for a server launched without FS.
var ErrNotOnPowerFS = errors.New("the data directory is not on powerfs (launch it with powerloss.FS as DataFS)")

// Cut cuts the power under srv: it kills the server (SIGKILL to every process of it),
// brings its data directory back to what was fsynced (powerfs.FS.PowerLoss, which opts
// configures), and starts it again on the same data, port and password, returning once
// it answers (PostgreSQL's crash recovery done, Redis's AOF loaded, Cassandra's commit
// log replayed). A server that does not start again on what survived is reported with
// its log's tail in the error. A server not launched with FS is left running, and the
// error matches ErrNotOnPowerFS.
func Cut(ctx context.Context, srv Server, opts powerfs.PowerLossOptions) error {
	if err := Down(srv, opts); err != nil {
		return err
	}
	return srv.Start(ctx)
}

// Down is the first half of Cut: the server killed and its data directory brought back
// to what was fsynced, not started again. Whoever records the power loss does so here,
// before the server answers again (and clients' acknowledgements follow), then calls
// srv.Start.
func Down(srv Server, opts powerfs.PowerLossOptions) error {
	fs, ok := srv.DataMount().(*powerfs.FS)
	if !ok {
		return fmt.Errorf("power loss: %w", ErrNotOnPowerFS)
	}
	if err := srv.Kill(); err != nil {
		return err
	}
	if err := fs.PowerLoss(opts); err != nil {
		return fmt.Errorf("power loss: %w", err)
	}
	return nil
}

// Stats returns the counts of the powerfs under srv's data directory: what a Cut now
// would undo, and what earlier ones did. ok is false when srv is not on powerfs.
func Stats(srv Server) (st powerfs.Stats, ok bool) {
	fs, ok := srv.DataMount().(*powerfs.FS)
	if !ok {
		return st, false
	}
	return fs.Stats(), true
}
