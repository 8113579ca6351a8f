package main

import "testing"

// TestChaosMeshRefusesWhatKubernetesWouldNot: a namespace or pod name Kubernetes does
// not accept, and a partition of a single node (no side to cut it from), are refused
// with one line; they were written with exit 0 (the partition as no object at all).
func TestChaosMeshRefusesWhatKubernetesWouldNot(t *testing.T) {
	part := "partition:isolate-primary@5s-20s"
	wantRefused(t, `makes no Chaos Mesh object with the nodes [n1]`, "chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--fault", part)
	wantRefused(t, `pod "PG_0;x": not a Kubernetes pod name`, "chaos-mesh", "--namespace", "db", "--pod", "n1=PG_0;x", "--pod", "n2=pg-1", "--fault", part)
	wantRefused(t, `namespace "a b": not a Kubernetes namespace`, "chaos-mesh", "--namespace", "a b", "--pod", "n1=pg-0", "--pod", "n2=pg-1", "--fault", part)
	if code, out, errs := invoke(t, "chaos-mesh", "--namespace", "db", "--pod", "n1=pg-0", "--pod", "n2=pg-1.db", "--fault", part); code != 0 || out == "" {
		t.Errorf("valid names: exit %d, %d bytes, %s", code, len(out), errs)
	}
}
