package runner_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
)

// TestSettingsConfigJSONReadsBack: what a run writes as config.json (Config.MarshalJSON),
// ReadConfig reads back to the same configuration, for a configuration that sets every
// kind of option (a list, a duration, a float, a bool, a nested key, the retry policy's
// name) and for a run over several servers.
func TestSettingsConfigJSONReadsBack(t *testing.T) {
	base := func(w workloads.Name) runner.Config {
		c := runner.NewConfig(w)
		c.Store = runner.Postgres
		return c
	}
	budget := base(workloads.Budget)
	budget.Duration, budget.Ops, budget.Seed, budget.Budget = 2500*time.Millisecond, 0, 0, 0
	budget.PowerFS, budget.CheckTimeout, budget.MaxAnomalies = true, 30*time.Second, -1
	for _, spec := range []string{"commit-cut:0.2@1s-2s", "latency:50ms~10ms,stream=up@0s-1.5s"} {
		s, _ := runner.SettingByField("Faults")
		if err := s.Set(&budget, spec); err != nil {
			t.Fatal(err)
		}
	}
	transfer := base(workloads.Transfer)
	transfer.Reads, transfer.DSNs = 0.25, []string{"postgres://a@h1/x", "postgres://a@h2/x"}
	list := base(workloads.ListAppend)
	list.Txn.Keys, list.Txn.ReadFraction, list.Txn.ConsistencyModels = 3, 0.7, []string{"serializable", "snapshot-isolation"}
	for _, want := range []runner.Config{budget, transfer, list, runner.Config{}.Filled()} {
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := runner.ReadConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(specs(got), specs(want)) {
			t.Errorf("faults %v, want %v", specs(got), specs(want))
		}
		got.Faults, want.Faults = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("config.json %s read back as\n%+v\nwant\n%+v", b, got, want)
		}
	}
}

func specs(c runner.Config) []string {
	var out []string
	for _, f := range c.Faults {
		out = append(out, f.Spec)
	}
	return out
}

// A config.json from elsewhere is data: a value of the wrong kind is refused naming its
// key; a key ReadConfig does not know is ignored; a duration out of any bound is read
// as written (the runner, or shrink's budget, bounds a run).
func TestSettingsReadConfigRefusesByKey(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"workers": "many"}`, `workers: "many" is not an integer`},
		{`{"duration": 1.5}`, "duration: 1.5 is not a duration in nanoseconds"},
		{`{"faults": [1]}`, "faults: want a list of strings"},
		{`{"txn": {"keys": {}}}`, "txn.keys: want a number"},
		{`{"workload": "nope"}`, "workload: "},
		{`[]`, "cannot unmarshal"},
	} {
		if _, err := runner.ReadConfig([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error holding %q", tc.doc, err, tc.want)
		}
	}
	c, err := runner.ReadConfig([]byte(`{"workload": "register", "keys": 3, "shape": "x", "duration": 1000000000000000000}`))
	if err != nil || c.Workload != workloads.Register || c.Keys != 3 || c.Duration != time.Duration(1e18) {
		t.Errorf("got %+v, %v", c, err)
	}
}

// The defaults are the table's: a Go caller's run left zero takes what indoubt run and
// a suite take when not given the option (Filled, NewConfig), and NewConfig leaves zero
// what the runner or the workload fills in where it is used (ZeroImplied).
func TestSettingsDefaultsAreTheTables(t *testing.T) {
	for _, w := range []workloads.Name{workloads.Budget, workloads.Insert, workloads.Transfer, workloads.ListAppend} {
		filled, fresh := runner.Config{Workload: w}.Filled(), runner.NewConfig(w)
		for _, s := range runner.Settings {
			if s.Default == "" || !s.AppliesTo(w) {
				continue
			}
			f, n := field(t, s.Field, filled), field(t, s.Field, fresh)
			switch s.Zero {
			case runner.ZeroFilled:
				if f.IsZero() || !reflect.DeepEqual(f.Interface(), n.Interface()) {
					t.Errorf("%s: %s is %v in a run left zero, %v in NewConfig; want the default %s in both", w, s.Field, f, n, s.Default)
				}
			case runner.ZeroImplied:
				if !n.IsZero() || !f.IsZero() {
					t.Errorf("%s: %s is %v in NewConfig, %v filled; want zero, which stands for %s", w, s.Field, n, f, s.Default)
				}
			case runner.ZeroIsValue:
				if n.IsZero() || !f.IsZero() {
					t.Errorf("%s: %s is %v in NewConfig, %v filled; want %s, and a Go caller's zero left as given", w, s.Field, n, f, s.Default)
				}
			}
		}
	}
}

// field is one field of c, by its dotted path ("Txn.Keys").
func field(t *testing.T, path string, c runner.Config) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(c)
	for _, name := range strings.Split(path, ".") {
		if v = v.FieldByName(name); !v.IsValid() {
			t.Fatalf("no field %s", path)
		}
	}
	return v
}
