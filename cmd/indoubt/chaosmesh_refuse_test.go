package main

import "testing"

// TestChaosMeshRefusesWhatItCannotWrite: a node named twice (nothing at all used to be
// written, exit 0), a pod two nodes share, and a primary that is not a node (a PodChaos
// selecting pod "") are refused with one line, exit 3.
func TestChaosMeshRefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"node n1 is given twice", []string{"--pod", "n1=pg-0", "--pod", "n1=pg-1"}},
		{"pod pg-0 is named for nodes n1 and n2", []string{"--pod", "n1=pg-0", "--pod", "n2=pg-0"}},
		{`the primary "n3" is not one of the nodes`, []string{"--pod", "n1=pg-0", "--pod", "n2=pg-1", "--primary", "n3"}},
	} {
		args := append([]string{"chaos-mesh", "--namespace", "db", "--fault", "kill@1s-2s"}, tc.args...)
		wantRefused(t, tc.want, args...)
	}
}
