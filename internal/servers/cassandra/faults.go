package cassandra

import (
	"github.com/indoubt/indoubt/internal/servers"
)

// DataMount returns the filesystem the launch's DataFS mounted under the data
// directories, or nil.
func (c *Server) DataMount() servers.Mount { return c.inst.DataMount() }
