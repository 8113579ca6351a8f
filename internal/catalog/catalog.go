// Package catalog is the table of indoubt's workloads: each workload's name and how to
// read its final state back from a results.json `final` section. It is the one place
// that lists the workloads; the runner and the reports look names up here.
package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/bank"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/insert"
	"github.com/indoubt/indoubt/workloads/register"
	"github.com/indoubt/indoubt/workloads/transfer"
	"github.com/indoubt/indoubt/workloads/txn"
)

// entry is one workload of the table.
type entry struct {
	name   workloads.Name
	decode func(json.RawMessage) (workloads.Final, error)
}

var table = []entry{
	{workloads.Budget, decode[budget.Final]},
	{workloads.Register, decode[register.Final]},
	{workloads.Counter, decode[counter.Final]},
	{workloads.Insert, decode[insert.Final]},
	{workloads.Transfer, decode[transfer.Final]},
	{workloads.TwoRows, decode[transfer.Final]},
	{workloads.ListAppend, decode[txn.Final]},
	{workloads.RWRegister, decode[txn.Final]},
	{workloads.Bank, decode[bank.Final]},
}

func decode[F workloads.Final](raw json.RawMessage) (workloads.Final, error) {
	var f F
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	return f, nil
}

// Names lists the workloads in the order help texts show them.
func Names() []workloads.Name {
	ns := make([]workloads.Name, len(table))
	for i, e := range table {
		ns[i] = e.name
	}
	return ns
}

// Parse returns the workload named s, or an error that lists the names.
func Parse(s string) (workloads.Name, error) {
	for _, e := range table {
		if string(e.name) == s {
			return e.name, nil
		}
	}
	return "", fmt.Errorf("unknown workload %q (want one of %s)", s, choice.List(Names()))
}

// DecodeFinal reads the `final` section of results.json of a run of workload name back
// into its typed final state. A null or absent section gives nil.
func DecodeFinal(name workloads.Name, raw json.RawMessage) (workloads.Final, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	for _, e := range table {
		if e.name == name {
			f, err := e.decode(raw)
			if err != nil {
				return nil, fmt.Errorf("final section of a %s run: %w", name, err)
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("final section of an unknown workload %q", name)
}
