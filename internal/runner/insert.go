package runner

import (
	"context"
	"fmt"
	"os"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
)

// InsertTable runs the insert workload for every key shape at every worker count, in
// rounds: round r runs the shapes in insert.Rotate order r, so that no shape always
// goes first, and every run drops and recreates its table and checkpoints before it
// starts (insert.Store.PrepareInsert). One server serves every run: the one --dsn names,
// or one launched for the table, so that the shapes are compared on the same server
// and the runs differ only in the key. The results come back in the order run.
func InsertTable(ctx context.Context, cfg Config, keys []insert.Key, counts []int, rounds int) ([]*results.Results, error) {
	cfg.Workload = workloads.Insert
	if rounds < 1 {
		return nil, couldNotRun("rounds must be at least 1 (got %d)", rounds)
	}
	if len(keys) == 0 || len(counts) == 0 {
		return nil, couldNotRun("no key shape or no worker count to run")
	}
	probe := cfg
	probe.Workers = counts[0]
	if err := probe.defaults(); err != nil {
		return nil, err
	}
	b, _ := lookupBackend(probe.Store)
	if cfg.DSN == "" {
		if err := os.MkdirAll(probe.Out, 0o755); err != nil {
			return nil, couldNotRun("create %s: %w", probe.Out, err)
		}
		dir, err := os.MkdirTemp(probe.Out, ".insert-server-")
		if err != nil {
			return nil, couldNotRun("server directory: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.progressf("launching a local %s for the insert table ...", b.name)
		srv, err := b.launch(ctx, cfg, dir)
		if err != nil {
			return nil, couldNotRun("%w", err)
		}
		defer srv.stop()
		cfg.progressf("%s", srv.desc)
		cfg.DSN = srv.dsn
	}
	var all []*results.Results
	for round := range rounds {
		for _, n := range counts {
			for _, k := range insert.Rotate(keys, round) {
				c := cfg
				c.Workers, c.Key = n, string(k)
				cfg.progressf("round %d/%d: key %s, %d workers", round+1, rounds, k, n)
				res, err := Run(ctx, c)
				if err != nil {
					return all, fmt.Errorf("key %s, %d workers: %w", k, n, err)
				}
				all = append(all, res)
				if ctx.Err() != nil {
					return all, nil
				}
			}
		}
	}
	return all, nil
}
