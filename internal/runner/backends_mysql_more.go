package runner

import (
	"context"

	"github.com/indoubt/indoubt/stores/mysql"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/bank"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/insert"
)

// openMySQLMore binds the counter, insert and bank workloads on MySQL or MariaDB.
func openMySQLMore(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	c, err := mysql.Open(ctx, mysql.Config{DSN: dsn, Dial: cfg.dial})
	if err != nil {
		return nil, nil, err
	}
	switch cfg.Workload {
	case workloads.Insert:
		return insert.New(c, insert.Key(cfg.Key)), func() { c.Close() }, nil
	case workloads.Bank:
		b, err := mysql.NewBank(c, mysql.Isolation(cfg.Isolation))
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return bank.New(b), func() { c.Close() }, nil
	}
	k, err := mysql.NewCounter(c, mysql.CounterConfig{Mechanism: mysql.CounterMechanism(cfg.Mechanism), Isolation: mysql.Isolation(cfg.Isolation)})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return counter.New(k), func() { c.Close() }, nil
}
