package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
)

func TestLiveLineNamesWhatRuns(t *testing.T) {
	base := runner.Progress{Elapsed: 4 * time.Second, Completed: 400, Duration: 10 * time.Second}
	cases := []struct {
		name      string
		p         func(runner.Progress) runner.Progress
		want, not []string
	}{
		{"no faults", func(p runner.Progress) runner.Progress { return p },
			[]string{"4.0s  400 ops  100 tx/s", "6s left"}, []string{"faults", "server"}},
		{"proxy", func(p runner.Progress) runner.Progress { p.Proxied, p.Faults = true, 7; return p },
			[]string{"7 faults fired"}, []string{"process faults"}},
		{"process faults only", func(p runner.Progress) runner.Progress {
			p.ProcessFaults, p.Server = 1, "down: kill@2s-5s"
			return p
		}, []string{"1 process faults", "server down: kill@2s-5s"}, []string{"faults fired"}},
		{"by operations", func(p runner.Progress) runner.Progress { p.Duration, p.Total = 0, 800; return p },
			[]string{"400/800  ETA 4s"}, []string{"left"}},
	}
	for _, c := range cases {
		line := liveLine(c.p(base))
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", c.name, line, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(line, n) {
				t.Errorf("%s: %q has %q", c.name, line, n)
			}
		}
	}
}

// A message printed while the live line is on screen goes above it on a line of its own,
// and the live line is drawn again below.
func TestTerminalPrintsMessagesAboveTheLiveLine(t *testing.T) {
	var out bytes.Buffer
	term := &terminal{w: &out}
	fmt.Fprintln(term, "before any line")
	term.live(runner.Progress{Elapsed: time.Second, Completed: 1}) // too early: nothing drawn
	term.live(runner.Progress{Elapsed: 3 * time.Second, Completed: 30})
	fmt.Fprintln(term, "fault kill@2s-5s: kill pid 42")
	want := "before any line\n" +
		"\r\033[K  3.0s  30 ops  10 tx/s" +
		"\r\033[Kfault kill@2s-5s: kill pid 42\n  3.0s  30 ops  10 tx/s"
	if got := out.String(); got != want {
		t.Fatalf("terminal wrote\n%q\nwant\n%q", got, want)
	}
}
