package postgres

import (
	"path/filepath"

	"github.com/indoubt/indoubt/internal/servers"
)

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
