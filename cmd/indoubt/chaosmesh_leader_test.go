package main

import (
	"strings"
	"testing"
)

// TestChaosMeshLeaderTopologies: on etcd and Patroni the faults aimed at the leader
// select it by the labels given, partition:dcs names the DCS pods, and a fault that
// cannot be aimed is refused with one line, exit 3.
func TestChaosMeshLeaderTopologies(t *testing.T) {
	pods := []string{"chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--pod", "n2=pg-1", "--pod", "n3=pg-2"}
	code, out, errs := invoke(t, append(pods, "--topology", "patroni", "--leader-label", "role=master", "--cluster-label", "cluster-name=pg",
		"--dcs-pod", "etcd-0", "--dcs-pod", "etcd-1", "--dcs-pod", "etcd-2", "--fault", "kill@1s-2s", "--fault", "partition:dcs:n2@3s-9s")...)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"name: indoubt-0-kill-leader", "role: master", "cluster-name: pg", "name: indoubt-1-dcs", "- etcd-2", "direction: both", "duration: 6s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the objects do not hold %q:\n%s", want, out)
		}
	}
	wantRefused(t, `fault "kill@1s-2s": on etcd it aims at the leader`, append(pods, "--topology", "etcd", "--fault", "kill@1s-2s")...)
	wantRefused(t, `fault "partition:dcs@1s-2s": partition:dcs needs the pods of the DCS`, append(pods, "--topology", "patroni", "--fault", "partition:dcs@1s-2s")...)
	wantRefused(t, `the leader's label "role": want KEY=VALUE`, append(pods, "--topology", "patroni", "--leader-label", "role", "--cluster-label", "a=b", "--fault", "kill@1s-2s")...)
}
