package redis

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/indoubt/indoubt/internal/servers"
)

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
