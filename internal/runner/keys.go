package runner

import (
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

// maxKeys bounds Config.Keys: every register is read at the end and checked on its own.
const maxKeys = 1 << 16

// checkKeys refuses a number of registers out of range, or given to a workload that has
// none.
func (c *Config) checkKeys() error {
	switch {
	case c.Keys == 0:
		return nil
	case c.Workload != workloads.Register:
		return refuse("Keys", "is the register workload's number of registers, not %s's", c.Workload)
	case c.Keys < 0 || c.Keys > maxKeys:
		return refuse("Keys", "must be from 1 to %d (got %d)", maxKeys, c.Keys)
	}
	return nil
}

// register is the register workload over s with the run's number of registers.
func (c Config) register(s register.Store) *register.Workload {
	w := register.New(s)
	if c.Keys > 0 {
		w.Keys = c.Keys
	}
	return w
}
