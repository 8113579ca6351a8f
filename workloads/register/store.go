// Package register is the classic Jepsen workload: per-key compare-and-set registers
// (read, write, cas) over a small key space, checked for linearizability with porcupine,
// partitioned by key.
package register

import (
	"context"

	"github.com/indoubt/indoubt/workloads"
)

// Store is what the register workload needs: independent integer registers by key.
type Store interface {
	// Reset removes every register, so each key starts absent.
	Reset(ctx context.Context) error
	Session(ctx context.Context) (Session, error)
}

// Session is one worker's connection.
type Session interface {
	workloads.Session
	// Read returns the register's value; found is false when the key is absent. A read
	// must be linearizable (SERIAL consistency, a primary read, ...).
	Read(ctx context.Context, key string) (value int64, found bool, err error)
	// Write sets the register.
	Write(ctx context.Context, req workloads.Request, key string, value int64) error
	// CAS sets the register to to if it holds from; ok false (and nil error) when it
	// held something else or was absent.
	CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (ok bool, err error)
}
