package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
)

// settingFlags declares a flag of fs for every run setting (runner.Settings), of the
// setting's kind, with its default and help, and returns what reads the options given
// once fs is parsed: by Config field, each as its flag writes it. A flag parses its
// value as the flag package does (an int flag refuses "x"); the setting reads it again
// (runner.Configure), from the text the flag writes.
func settingFlags(fs *flag.FlagSet) func() map[string][]string {
	lists := map[string]*multiFlag{}
	for _, s := range runner.Settings {
		switch s.Kind {
		case runner.KindInt:
			fs.Int64(s.Flag, mustParse(strconv.ParseInt(or(s.Default, "0"), 10, 64)), s.Help)
		case runner.KindFloat:
			fs.Float64(s.Flag, mustParse(strconv.ParseFloat(or(s.Default, "0"), 64)), s.Help)
		case runner.KindDuration:
			fs.Duration(s.Flag, mustParse(time.ParseDuration(or(s.Default, "0s"))), s.Help)
		case runner.KindBool:
			fs.Bool(s.Flag, mustParse(strconv.ParseBool(or(s.Default, "false"))), s.Help)
		case runner.KindList:
			lists[s.Flag] = new(multiFlag)
			fs.Var(lists[s.Flag], s.Flag, s.Help)
		default:
			fs.String(s.Flag, s.Default, s.Help)
		}
	}
	return func() map[string][]string {
		given := map[string][]string{}
		fs.Visit(func(f *flag.Flag) {
			s, ok := runner.SettingByFlag(f.Name)
			switch {
			case !ok:
			case lists[f.Name] != nil:
				given[s.Field] = *lists[f.Name]
			default:
				given[s.Field] = []string{f.Value.String()}
			}
		})
		return given
	}
}

func or(v, otherwise string) string {
	if v == "" {
		return otherwise
	}
	return v
}

// mustParse is a setting's default parsed as its flag's: a default its own flag
// cannot parse is a mistake in runner.Settings, which every test of indoubt run meets.
func mustParse[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("indoubt run: a default of runner.Settings: %v", err))
	}
	return v
}

// sweepHead puts the first of a sweep option's comma list (--workers 1,4,16) in its
// place among the options given: the run is configured with it, and checked, and the
// command makes a run of each.
func sweepHead(given map[string][]string) {
	for _, s := range runner.Settings {
		if v, ok := given[s.Field]; ok && s.Sweep {
			given[s.Field] = []string{strings.SplitN(v[0], ",", 2)[0]}
		}
	}
}
