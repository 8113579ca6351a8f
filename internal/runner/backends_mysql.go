package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/stores/mysql"
	"github.com/indoubt/indoubt/workloads"
)

// mysqlBackend is the row of the store table for MySQL and MariaDB: locally, a launched
// MariaDB; --dsn reaches either.
var mysqlBackend = backend{
	name: MySQL, schemes: []string{"mysql", "mariadb"}, protocol: toxics.MySQL{},
	workloads: append(slices.Clone(kv), workloads.Counter, workloads.Insert, workloads.ListAppend, workloads.RWRegister, workloads.Bank),
	launch:    launchMariaDB,
	available: func() error { _, _, err := mariadb.Find(); return err },
	addr:      urlAddr,
	rewrite:   urlRewrite,
	open:      openMySQL,
	env:       mysqlEnv,
	// A Galera cluster (galera.go); one MariaDB has no nodes of its own.
	isolated: map[string]isolatedLaunch{TopologyReplicated: {threeNodes, (*topology).launchGalera}},
	mechanisms: map[workloads.Name][]string{
		workloads.Budget:  {string(mysql.Autocommit), string(mysql.Transaction)},
		workloads.Counter: names(mysql.CounterMechanisms),
	},
	isolations: map[workloads.Name][]string{
		workloads.ListAppend: names(mysql.Isolations), workloads.RWRegister: names(mysql.Isolations),
		workloads.Counter: names(mysql.Isolations), workloads.Bank: names(mysql.Isolations),
	},
}

func launchMariaDB(ctx context.Context, cfg Config, dir string) (launched, error) {
	m, err := mariadb.Start(ctx, mariadb.Options{LogPath: filepath.Join(dir, "mariadb.log")})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: m.DSN, desc: fmt.Sprintf("MariaDB %s at %s", m.Version, m.Addr), stop: m.Stop, ctl: m}, nil
}

func openMySQL(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	if isTxn(cfg.Workload) {
		c, err := mysql.Open(ctx, mysql.Config{DSN: dsn, Dial: cfg.dial})
		if err != nil {
			return nil, nil, err
		}
		store, err := mysql.NewTxns(c, mysql.TxnConfig{Model: cfg.Workload, Isolation: mysql.Isolation(cfg.Isolation),
			Galera: cfg.Topology == TopologyReplicated})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return bindTxn(cfg, store, func() { c.Close() })
	}
	if cfg.Workload == workloads.Counter || cfg.Workload == workloads.Insert || cfg.Workload == workloads.Bank {
		return openMySQLMore(ctx, cfg, dsn)
	}
	c, err := mysql.Open(ctx, mysql.Config{DSN: dsn, Dial: cfg.dial, Mechanism: mysql.Mechanism(cfg.Mechanism)})
	if err != nil {
		return nil, nil, err
	}
	return bindKV(cfg, MySQL, c, c.Register(), func() { c.Close() })
}
