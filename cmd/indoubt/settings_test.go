package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/shrink"
)

// runFlagDefaults reads indoubt run's flags and their defaults from its help.
func runFlagDefaults(t *testing.T) map[string]string {
	t.Helper()
	_, help, _ := invoke(t, "run", "--help")
	flags := map[string]string{}
	line := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	def := regexp.MustCompile(`\(default "?([^")]*)"?\)`)
	locs := line.FindAllStringSubmatchIndex(help, -1)
	for i, m := range locs {
		end := len(help)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		name, text := help[m[2]:m[3]], help[m[1]:end]
		flags[name] = ""
		if d := def.FindStringSubmatch(text); d != nil {
			flags[name] = d[1]
		}
	}
	if len(flags) < 30 {
		t.Fatalf("read %d flags from indoubt run --help", len(flags))
	}
	return flags
}

// TestSettingsDescribeEveryOption: runner.Settings holds every field of runner.Config
// (each of Txn's too), with the key config.json writes it under; every flag of indoubt
// run is a setting's, with the default the table says; every setting has a suite key
// (the output directory aside: indoubt suite --out).
func TestSettingsDescribeEveryOption(t *testing.T) {
	flags := runFlagDefaults(t)
	rt := reflect.TypeFor[runner.Config]()
	var fields []string
	jsonOf := map[string]string{}
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if !f.IsExported() || (tag == "-" && f.Name != "Faults") || f.Name == "DSNs" {
			continue // Progress, OnProgress: not configuration; DSNs is DSN's flag and key
		}
		switch f.Name {
		case "Faults":
			tag = "faults" // MarshalJSON writes the schedule as written
		case "Retry":
			tag = "retry.Name" // the policy's name; the rest follows from it (runner.ParsePolicy)
		}
		if f.Name == "Txn" {
			for j := range f.Type.NumField() {
				tf := f.Type.Field(j)
				name := "Txn." + tf.Name
				fields = append(fields, name)
				jsonOf[name] = tag + "." + strings.Split(tf.Tag.Get("json"), ",")[0]
			}
			continue
		}
		fields = append(fields, f.Name)
		jsonOf[f.Name] = tag
	}
	for _, field := range fields {
		s, ok := runner.SettingByField(field)
		if !ok || s.Field != field {
			t.Errorf("Config.%s has no setting in runner.Settings", field)
			continue
		}
		if s.JSON != jsonOf[field] {
			t.Errorf("Config.%s: the table's config.json key %q, written as %q", field, s.JSON, jsonOf[field])
		}
	}
	cmdOnly := []string{"quiet", "json", "rounds"} // the command line's own: output, and insert's rounds of runs
	for flag := range flags {
		if _, ok := runner.SettingByFlag(flag); !ok && !slices.Contains(cmdOnly, flag) {
			t.Errorf("--%s is a flag of indoubt run but no setting's", flag)
		}
	}
	for _, s := range runner.Settings {
		if _, ok := flags[s.Flag]; !ok {
			t.Errorf("setting %s: indoubt run has no flag --%s", s.Field, s.Flag)
		}
		if s.Key == "" && s.Field != "Out" {
			t.Errorf("setting %s (--%s) has no suite key", s.Field, s.Flag)
		}
	}
	// The defaults: indoubt run with no option of a workload's runs as runner.NewConfig
	// of it says, and so does a suite case that sets none.
	for _, w := range []string{"budget", "counter", "register", "insert", "transfer", "two-rows", "list-append", "rw-register"} {
		a, err := parseRunArgs([]string{"--workload", w}, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		got := a.cfg
		got.Workers, got.Progress, got.OnProgress = a.counts[0], nil, nil
		if w == "insert" {
			got.Key = string(a.keys[0])
		}
		want := runner.NewConfig(got.Workload)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: indoubt run's defaults\n%+v\nthe table's\n%+v", w, got, want)
		}
		_, runs, err := loadSuite(writeSuite(t, fmt.Sprintf("cases:\n  - name: a\n    store: postgres\n    workload: %s\n    expect: valid\n", w)))
		if err != nil {
			t.Fatal(err)
		}
		want.Store = runner.Postgres
		if !reflect.DeepEqual(runs[0].cfg, want) {
			t.Errorf("%s: a suite case's defaults\n%+v\nthe table's\n%+v", w, runs[0].cfg, want)
		}
	}
}

// settingSamples are a value for each setting, and the workload it applies to.
var settingSamples = map[string]struct{ workload, value string }{
	"workload": {"counter", "counter"}, "dsn": {"budget", "postgres://app@127.0.0.1:1/app"},
	"workers": {"budget", "3"}, "ops": {"budget", "7"}, "time": {"budget", "2500ms"}, "seed": {"budget", "9"},
	"retry": {"budget", "naive"}, "mechanism": {"budget", "transaction"}, "isolation": {"counter", "read-committed"},
	"budget": {"budget", "50"}, "key": {"insert", "uuidv4"}, "keys": {"register", "3"},
	"persistence": {"budget", "always"}, "synchronous-commit": {"budget", "off"}, "fsync": {"budget", "off"},
	"commitlog-sync": {"budget", "batch"}, "powerfs": {"budget", "true"}, "powerfs-entries": {"budget", "ordered"},
	"topology": {"budget", "replicated"}, "replication": {"budget", "sync"}, "network": {"budget", "isolated"},
	"pg-version": {"budget", "15"}, "fault": {"budget", "commit-cut:0.2"}, "proxy": {"budget", "on"},
	"check-timeout": {"budget", "30s"}, "recovery-wait": {"budget", "5s"}, "max-anomalies": {"budget", "3"},
	"servers": {"transfer", "3"}, "placement": {"transfer", "local"}, "coordinator": {"transfer", "naive"},
	"reads": {"transfer", "0.3"}, "rows-per-worker": {"transfer", "10"}, "recover-after": {"transfer", "2s"},
	"read-from": {"list-append", "standby"}, "txn-keys": {"list-append", "5"}, "txn-ops": {"list-append", "3"},
	"read-fraction": {"list-append", "0.7"}, "distribution": {"list-append", "zipf"},
	"pattern": {"list-append", "read-modify-write"}, "max-writes-per-key": {"list-append", "4"},
	"consistency-models": {"list-append", "serializable,snapshot-isolation"},
}

// TestSuiteSetsEveryFlag: every run option a flag of indoubt run sets, a suite case
// sets under its key, to the same configuration (defaults included).
func TestSuiteSetsEveryFlag(t *testing.T) {
	var body strings.Builder
	body.WriteString("cases:\n")
	var order []runner.Setting
	for _, s := range runner.Settings {
		if s.Key == "" || s.Field == "Store" {
			continue
		}
		sample, ok := settingSamples[s.Flag]
		if !ok {
			t.Errorf("no sample value for --%s", s.Flag)
			continue
		}
		fmt.Fprintf(&body, "  - name: %s\n    store: postgres\n    %s: %q\n    expect: valid\n", s.Key, s.Key, sample.value)
		if s.Key != "workload" {
			fmt.Fprintf(&body, "    workload: %s\n", sample.workload)
		}
		order = append(order, s)
	}
	_, runs, err := loadSuite(writeSuite(t, body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range order {
		sample := settingSamples[s.Flag]
		args := []string{"--store", "postgres", "--workload", sample.workload}
		if s.Kind == runner.KindBool {
			args = append(args, "--"+s.Flag+"="+sample.value)
		} else {
			args = append(args, "--"+s.Flag, sample.value)
		}
		a, err := parseRunArgs(args, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("indoubt run %s: %v", strings.Join(args, " "), err)
			continue
		}
		want := a.cfg
		want.Store, want.Workers = runner.StoreName(a.store), a.counts[0]
		want.Progress, want.OnProgress = nil, nil
		if sample.workload == "insert" {
			want.Key = string(a.keys[0]) // indoubt run makes a run per key shape
		}
		got := runs[i].cfg
		if !reflect.DeepEqual(specsOf(got.Faults), specsOf(want.Faults)) {
			t.Errorf("%s: faults %v, the flag's %v", s.Key, specsOf(got.Faults), specsOf(want.Faults))
		}
		got.Faults, want.Faults = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q in a suite gives\n%+v\n--%s gives\n%+v", s.Key, sample.value, got, s.Flag, want)
		}
	}
}

// A value out of bounds is refused alike by the command line and a suite, each naming
// the setting its own way: --workers, workers:.
func TestSettingBoundsAlike(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"workers", "0", "is not a worker count from 1 to 4096"},
		{"workers", "4097", "is not a worker count from 1 to 4096"},
		{"ops", "-1", "must not be negative"},
		{"time", "0s", "must be positive"},
		{"budget", "-5", "must not be negative"},
		{"check-timeout", "0s", "must be positive"},
		{"recovery-wait", "-1s", "must be positive"},
		{"max-anomalies", "0", "must be at least 1, or -1 for all"},
		{"recover-after", "0s", "must be positive"},
	} {
		s, ok := runner.SettingByFlag(tc.flag)
		if !ok {
			t.Fatalf("no setting --%s", tc.flag)
		}
		workload := "budget"
		if !s.AppliesTo("budget") {
			workload = "transfer"
		}
		_, err := parseRunArgs([]string{"--workload", workload, "--" + tc.flag, tc.value}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--"+tc.flag) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--%s %s: %v, want it refused naming --%s: %s", tc.flag, tc.value, err, tc.flag, tc.want)
		}
		p := writeSuite(t, fmt.Sprintf("cases:\n  - name: a\n    store: postgres\n    workload: %s\n    %s: %q\n    expect: valid\n", workload, s.Key, tc.value))
		_, _, err = loadSuite(p)
		if err == nil || !strings.Contains(err.Error(), s.Key+": ") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ":2:") {
			t.Errorf("suite %s: %s: %v, want it refused on line 2 naming %s: %s", s.Key, tc.value, err, s.Key, tc.want)
		}
	}
}

// A suite's default that does not apply to a case's workload is left out (a budget for
// a counter case); the same key given by the case itself is refused, as the flag is.
func TestSuiteDefaultsApplyWhereTheyApply(t *testing.T) {
	p := writeSuite(t, "defaults:\n  budget: 70\n  workers: 2\ncases:\n  - name: c\n    store: postgres\n    workload: counter\n    expect: valid\n  - name: b\n    store: postgres\n    expect: valid\n")
	_, runs, err := loadSuite(p)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].cfg.Budget != 0 || runs[0].cfg.Workers != 2 || runs[1].cfg.Budget != 70 || runs[1].cfg.Workers != 2 {
		t.Errorf("counter case budget %d workers %d, budget case budget %d workers %d", runs[0].cfg.Budget, runs[0].cfg.Workers, runs[1].cfg.Budget, runs[1].cfg.Workers)
	}
	p = writeSuite(t, "cases:\n  - name: c\n    store: postgres\n    workload: counter\n    budget: 70\n    expect: valid\n")
	if _, _, err := loadSuite(p); err == nil || !strings.Contains(err.Error(), "budget: does not apply to the counter workload") {
		t.Errorf("a counter case's budget: %v", err)
	}
	if _, err := parseRunArgs([]string{"--workload", "counter", "--budget", "70"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--budget: does not apply to the counter workload") {
		t.Errorf("--budget for a counter: %v", err)
	}
}

// docs/suites.md lists every suite key with its flag and default, as runner.Settings
// has them.
func TestSuitesDocListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../docs/suites.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range runner.Settings {
		if s.Key == "" {
			continue
		}
		def := ""
		if s.Default != "" {
			def = "`" + s.Default + "`"
		}
		row := fmt.Sprintf("| `%s` | `--%s` | %s |", s.Key, s.Flag, def)
		if s.Default == "" {
			row = fmt.Sprintf("| `%s` | `--%s` | |", s.Key, s.Flag)
		}
		if !strings.Contains(doc, row) {
			t.Errorf("docs/suites.md has no row %q", row)
		}
	}
}

// TestSettingsRoundTrip walks runner.Settings: each option, given as its flag of
// indoubt run, survives the way a run's configuration travels: flag -> Config ->
// config.json (as a run writes it) -> runner.ReadConfig (as shrink reads it) -> shrink's
// reproducer (shrink.Command) -> indoubt run's flags -> the same Config.
func TestSettingsRoundTrip(t *testing.T) {
	for _, s := range runner.Settings {
		if s.Field == "Out" || s.Field == "Store" {
			continue // the reproducer leaves the output directory out; every sample names the store
		}
		sample, ok := settingSamples[s.Flag]
		if !ok {
			t.Errorf("no sample value for --%s", s.Flag)
			continue
		}
		values := []string{sample.value}
		if s.Zero == runner.ZeroIsValue && s.Default != "" && (s.Kind == runner.KindInt || s.Kind == runner.KindFloat) {
			values = append(values, "0") // a value of its own (no reads, seed 0), not the default
		}
		for _, value := range values {
			roundTrip(t, s, sample.workload, value)
		}
	}
}

func roundTrip(t *testing.T, s runner.Setting, workload, value string) {
	t.Run(s.Flag+"="+value, func(t *testing.T) {
		parse := func(args []string) runner.Config {
			t.Helper()
			a, err := parseRunArgs(args, io.Discard, io.Discard)
			if err != nil {
				t.Fatalf("indoubt run %s: %v", strings.Join(args, " "), err)
			}
			a.cfg.Progress, a.cfg.OnProgress = nil, nil
			return a.cfg
		}
		base := []string{"--store", "postgres", "--workload", workload}
		if s.Field == "Workload" {
			base = base[:2]
		}
		given := parse(append(base, "--"+s.Flag+"="+value))
		if plain := parse(base); reflect.DeepEqual(given, plain) {
			t.Fatalf("--%s=%s changes nothing: the sample proves nothing", s.Flag, value)
		}
		b, err := json.Marshal(given)
		if err != nil {
			t.Fatal(err)
		}
		read, err := runner.ReadConfig(b)
		if err != nil {
			t.Fatalf("config.json %s: %v", b, err)
		}
		same := func(what string, got, want runner.Config) {
			t.Helper()
			got, want = got.Filled(), want.Filled()
			if !reflect.DeepEqual(specsOf(got.Faults), specsOf(want.Faults)) {
				t.Errorf("%s: faults %v, want %v", what, specsOf(got.Faults), specsOf(want.Faults))
			}
			got.Faults, want.Faults = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n%+v\nwant\n%+v", what, got, want)
			}
		}
		same("config.json read back", read, given)
		line := shrink.Command(read)
		words := shellWords(t, line)
		if len(words) < 2 || words[0] != "indoubt" || words[1] != "run" {
			t.Fatalf("not an indoubt run command: %s", line)
		}
		again := parse(words[2:])
		again.Out = given.Out // the reproducer leaves the output directory to its reader
		same("the reproducer "+line+" parsed", again, given)
	})
}
