package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestTwoPCWorkloadRouting(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"--workload", "transfer"}, true},
		{[]string{"--workload=two-rows", "--servers", "3"}, true},
		{[]string{"-workload", "transfer"}, true},
		{[]string{"--workload", "budget"}, false},
		{[]string{"--store", "postgres"}, false},
		{[]string{"--out", "transfer"}, false},
	}
	for _, tt := range tests {
		if got := twoPCWorkload(tt.args); got != tt.want {
			t.Errorf("twoPCWorkload(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestTwoPCBadInputCouldNotRun(t *testing.T) {
	for _, args := range [][]string{
		{"--workload", "transfer", "--servers", "9", "--quiet"},
		{"--workload", "transfer", "--placement", "nowhere", "--quiet"},
		{"--workload", "transfer", "--coordinator", "magic", "--quiet"},
		{"--workload", "transfer", "--fault", "coordinator-crash:0.5", "--quiet"},
		{"--workload", "transfer", "--placement", "local", "--fault", "coordinator-crash@1s", "--quiet"},
	} {
		var out, errb bytes.Buffer
		err := runCommand(context.Background(), append(args, "--out", t.TempDir()), &out, &errb)
		if code := exitCode(err, &errb); code != exitCouldNot {
			t.Errorf("%q: exit %d, want %d", args, code, exitCouldNot)
		}
		if line := strings.TrimSpace(errb.String()); strings.Count(line, "\n") != 0 || line == "" {
			t.Errorf("%q: want one line on stderr, got %q", args, errb.String())
		}
	}
}
