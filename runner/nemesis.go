package runner

import (
	"context"
	"fmt"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/report"
)

// nemesis owns the fault proxy of a run and its schedule.
type nemesis struct{}

func startNemesis(ctx context.Context, cfg Config, b backend, dsn, dir string) (*nemesis, string, error) {
	return nil, "", fmt.Errorf("fault injection is being wired in")
}

func (n *nemesis) begin(r *run)                                  {}
func (n *nemesis) end()                                          {}
func (n *nemesis) close()                                        {}
func (n *nemesis) account(res *report.Results, ops []histories.Op) {}
