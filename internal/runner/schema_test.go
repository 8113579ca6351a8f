package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads/txn"
)

// resultsSchema compiles schemas/results.schema.json, with formats asserted.
func resultsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "schemas", "results.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(s *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// Every workload's real results.json validates against the published schema, and reads
// back into results.Results with the same final state.
func TestResultsMatchTheSchema(t *testing.T) {
	s := resultsSchema(t)
	cases := []struct {
		name string
		edit func(*runner.Config)
	}{
		{"budget on postgres under commit faults", func(c *runner.Config) {
			c.Workers, c.Ops, c.Budget = 4, 20, 50
			c.Retry, c.Faults = policy(t, "naive"), parseSchedule(t, "commit-mixed:0.3")
		}},
		{"counter on postgres", func(c *runner.Config) {
			c.Workload, c.Mechanism, c.Workers, c.Ops = "counter", "read-write", 4, 20
			c.Retry = policy(t, "conflict")
		}},
		{"register on postgres under commit faults", func(c *runner.Config) {
			c.Workload, c.Workers, c.Ops = "register", 4, 20
			c.Faults = parseSchedule(t, "commit-mixed:0.2")
		}},
		{"insert on postgres under commit faults", func(c *runner.Config) {
			c.Workload, c.Key, c.Workers, c.Ops = "insert", "bigserial", 4, 20
			c.Retry, c.Faults = policy(t, "naive"), parseSchedule(t, "commit-cut:0.2")
		}},
		{"list-append on postgres losing updates at read committed", func(c *runner.Config) {
			c.Workload, c.Isolation, c.Workers, c.Ops = "list-append", "read-committed", 8, 15
			c.Retry = policy(t, "conflict")
			c.Txn = txn.Options{Keys: 1, Pattern: txn.ReadModifyWrite, MaxWritesPerKey: 1000, ConsistencyModels: []string{"serializable"}}
		}},
		{"rw-register on postgres under commit faults", func(c *runner.Config) {
			c.Workload, c.Isolation, c.Workers, c.Ops = "rw-register", "serializable", 4, 20
			c.Retry, c.Faults = policy(t, "conflict"), parseSchedule(t, "commit-mixed:0.2")
		}},
		{"budget on a launched redis", func(c *runner.Config) {
			if err := runner.Available(runner.Redis); err != nil {
				servertest.SkipOrFail(t, err)
			}
			c.Store, c.DSN, c.Workers, c.Ops, c.Budget = "redis", "", 4, 20, 50
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budgetConfig(t)
			tc.edit(&cfg)
			began := time.Now()
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			wall := time.Since(began).Seconds()
			// The phases are the run's own wall time, measured, none left out: each
			// took some time, and together they fit in the call.
			if ph := res.Phases; ph == nil {
				t.Error("no phases_s")
			} else if sum := ph.Launch + ph.Setup + ph.Workload + ph.Check + ph.Stop; ph.Launch <= 0 || ph.Setup <= 0 ||
				ph.Workload < res.DurationS || ph.Check <= 0 || ph.Stop <= 0 || sum > wall {
				t.Errorf("phases %+v (sum %.3f s) in a call of %.3f s, a workload of %.3f s", *ph, sum, wall, res.DurationS)
			}
			// The workers' CPU is counted: a workload of operations used some.
			if c := res.PhasesCPU; c == nil || c.Workload <= 0 {
				t.Errorf("phases_cpu_s %+v: want the workload's CPU time", c)
			}
			b, err := os.ReadFile(filepath.Join(res.RunDir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(s, b); err != nil {
				t.Fatalf("results.json does not match the schema: %v", err)
			}
			if cfg.Workload == "list-append" && (res.Txn == nil || len(res.Txn.Cycles) == 0) {
				// The case is there for the cycles' part of the schema.
				t.Errorf("no cycle in the transactions section (%+v): %s", res.Txn, res.Summary)
			}
			var back results.Results
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("read results.json back: %v", err)
			}
			if back.SchemaVersion != results.SchemaVersion || !reflect.DeepEqual(back.Final, res.Final) {
				t.Errorf("read back: version %d, final %#v; want %d, %#v", back.SchemaVersion, back.Final, results.SchemaVersion, res.Final)
			}
		})
	}
}

// The schema refuses what version 1 never writes: it is not a schema that accepts all.
func TestResultsSchemaRefuses(t *testing.T) {
	s := resultsSchema(t)
	cfg := budgetConfig(t)
	cfg.Workers, cfg.Ops, cfg.Budget = 2, 5, 10
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	good, err := os.ReadFile(filepath.Join(res.RunDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(m map[string]any){
		"an unknown key":                 func(m map[string]any) { m["bogus"] = 1 },
		"no schema_version":              func(m map[string]any) { delete(m, "schema_version") },
		"a later schema_version":         func(m map[string]any) { m["schema_version"] = 2 },
		"a budget final without applied": func(m map[string]any) { delete(m["final"].(map[string]any), "applied") },
		"a counter's final under budget": func(m map[string]any) {
			m["final"] = map[string]any{"before": 0, "after": 1, "acknowledged": 1}
		},
		"a verdict out of the vocabulary": func(m map[string]any) { m["verdict"] = "maybe" },
		"a phase left out":                func(m map[string]any) { delete(m["phases_s"].(map[string]any), "check") },
		"commits without changed_rows": func(m map[string]any) {
			m["faults"].(map[string]any)["commits"] = map[string]any{"committed": 1, "unchanged": 0, "effect_unseen": 0, "not_committed": 0}
		},
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ := json.Marshal(m)
		if err := validate(s, b); err == nil {
			t.Errorf("%s: the schema accepted it", name)
		}
	}
}
