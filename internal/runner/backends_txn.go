package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/stores/postgres"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// The transactional workloads, list-append and rw-register (package workloads/txn),
// on every store that has them: PostgreSQL at the three isolation levels, optionally
// with read-only transactions on a hot standby (ReadFrom); Redis by WATCH and
// MULTI/EXEC, a Lua script, or MULTI/EXEC without WATCH; MongoDB (FerretDB here) one
// document a transaction; Cassandra one partition a transaction, by lightweight
// transactions.

// txnWorkloads are the transactional workloads.
var txnWorkloads = []workloads.Name{workloads.ListAppend, workloads.RWRegister}

// isTxn reports whether w is a transactional workload.
func isTxn(w workloads.Name) bool { return slices.Contains(txnWorkloads, w) }

// Where a replicated PostgreSQL's read-only transactions run (ReadFrom).
const (
	ReadFromPrimary = "primary"
	ReadFromStandby = "standby"
)

// checkTxn refuses the transactional settings where they do not apply, and settings
// the transactional workloads cannot take.
func (c *Config) checkTxn() error {
	if !isTxn(c.Workload) {
		switch {
		case !c.Txn.IsZero():
			return refuse("Txn", "sets the transactional workloads' transactions (list-append, rw-register), not %s's", c.Workload)
		case c.ReadFrom != "":
			return refuse("ReadFrom", "applies to the transactional workloads (list-append, rw-register), not %s", c.Workload)
		}
		return nil
	}
	if err := c.Txn.Validate(); err != nil {
		var oe *txn.OptionError
		if errors.As(err, &oe) {
			return refuse("Txn."+oe.Field, "%v", oe.Err)
		}
		return refuse("Txn", "%v", err)
	}
	if len(c.Txn.ConsistencyModels) > 0 {
		if err := (checker.TxnOptions{ConsistencyModels: c.Txn.ConsistencyModels}).Validate(); err != nil {
			return refuse("Txn.ConsistencyModels", "%v", err)
		}
	}
	if c.Retry.Name == Idempotent {
		return refuse("Retry", "idempotent: the %s workload has no idempotent path (a transaction's op id is not recorded); want none, conflict, naive or driver", c.Workload)
	}
	switch c.ReadFrom {
	case "", ReadFromPrimary:
	case ReadFromStandby:
		if c.Store != Postgres || c.Topology != TopologyReplicated {
			return refuse("ReadFrom", "standby needs a launched PostgreSQL primary with its standby: --store postgres --topology replicated")
		}
	default:
		return refuse("ReadFrom", "%q: want primary or standby", c.ReadFrom)
	}
	return nil
}

// openPostgresTxn opens the transactional workload on PostgreSQL, with the standby's
// client when read-only transactions run there.
func openPostgresTxn(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: int32(cfg.Workers + 4)})
	if err != nil {
		return nil, nil, err
	}
	closer := c.Close
	tc := postgres.TxnConfig{Model: cfg.Workload, Isolation: postgres.Isolation(cfg.Isolation)}
	if cfg.ReadFrom == ReadFromStandby {
		if cfg.standbyDSN == "" {
			c.Close()
			return nil, nil, fmt.Errorf("no standby to read from")
		}
		sc, err := postgres.Open(ctx, postgres.Config{DSN: cfg.standbyDSN, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("standby: %w", err)
		}
		tc.Standby = sc
		closer = func() { sc.Close(); c.Close() }
	}
	store, err := postgres.NewTxns(c, tc)
	if err != nil {
		closer()
		return nil, nil, err
	}
	return bindTxn(cfg, store, closer)
}

// bindTxn binds the transactional workload to store, or closes it.
func bindTxn(cfg Config, store txn.Store, closer func()) (workloads.Workload, func(), error) {
	wl, err := txn.New(cfg.Workload, store, cfg.Txn)
	if err != nil {
		closer()
		return nil, nil, err
	}
	if cfg.ReadFrom == ReadFromStandby {
		wl.ReadsOn(ReadFromStandby)
	}
	return wl, closer, nil
}

// checkedModels are the consistency models a transactional workload's history is
// checked for; nil for the other workloads.
func checkedModels(wl workloads.Workload) []string {
	if t, ok := wl.(interface{ ConsistencyModels() []string }); ok {
		return t.ConsistencyModels()
	}
	return nil
}
