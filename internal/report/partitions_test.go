package report_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// partitionHistory writes a run directory's history of two workers, one beside n1 and
// one beside n3, with a partition between them from 1 s to 3 s during which both n1
// and n3 report primary from 2 s to 3.5 s, and each side is acknowledged throughout.
func partitionHistory(t *testing.T, dir string) []histories.Op {
	t.Helper()
	hw, err := histories.Create(filepath.Join(dir, "history.jsonl"), histories.Header{Workload: "budget", Model: "budget", Store: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	s := int64(time.Second)
	nem := func(at int64, f string, v any) {
		if _, err := hw.Write(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f, Value: histories.Value(v)}); err != nil {
			t.Fatal(err)
		}
	}
	role := func(at int64, node, r string) { nem(at, results.RoleEvent, map[string]string{"node": node, "role": r}) }
	role(0, "n1", results.RolePrimary)
	role(0, "n3", results.RoleReplica)
	clients := map[string]string{"n1": "198.18.0.101", "n3": "198.18.0.103"}
	for i := 0; i < 40; i++ {
		at := int64(i) * s / 10
		if at == s {
			nem(at, outages.PartitionAction, map[string]any{"fault": "partition:majority@1s-3s", "shape": "majority",
				"grudge": map[string][]string{"n1": {"n3"}, "n3": {"n1"}}, "reach": map[string][]string{"n1": {"n1"}, "n3": {"n3"}},
				"components": [][]string{{"n1"}, {"n3"}}, "nodes": map[string]string{"n1": "198.18.0.11", "n3": "198.18.0.13"}, "clients": clients})
		}
		if at == 2*s {
			role(at, "n3", results.RolePrimary)
		}
		if at == 3*s {
			nem(at, outages.HealAction, map[string]any{"fault": "partition:majority@1s-3s", "grudge": map[string][]string{}})
		}
		if at == 35*s/10 {
			role(at, "n1", results.RoleReplica)
		}
		for w, node := range []string{"n1", "n3"} {
			id := fmt.Sprintf("%d-%d", w, i)
			conn := fmt.Sprintf("%s:4000%d", clients[node], w)
			for _, typ := range []histories.Type{histories.Invoke, histories.OK} {
				if _, err := hw.Write(histories.Op{Time: at + int64(typ), Process: w, Type: typ, F: "decrement", OpID: id, Conn: conn, Value: histories.Value(map[string]any{"applied": true})}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := hw.Close(); err != nil {
		t.Fatal(err)
	}
	_, ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// report.html of a run with a partition between nodes, in a real browser: the
// partition shaded apart from the proxy's and the process faults' windows, the split
// brain over it, and both tables, with the ground truth and the acknowledgements each
// primary took.
func TestReportOfPartitionsInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	ops := partitionHistory(t, dir)
	res := &results.Results{SchemaVersion: results.SchemaVersion, Verdict: checker.Valid, Workload: workloads.Budget, Store: "redis", RunDir: dir,
		Faults: results.FaultCounts{Schedule: []string{"partition:majority@1s-3s"}}}
	res.Partitions, res.SplitBrain = results.PartitionTimeline(ops, nil)
	if len(res.Partitions) != 1 || len(res.SplitBrain) != 1 || !res.SplitBrain[0].WritesOnBoth {
		t.Fatalf("partitions %+v, split brain %+v", res.Partitions, res.SplitBrain)
	}
	if sb := res.SplitBrain[0]; sb.StartS != 2 || sb.EndS != 3.5 || sb.Acked["n1"] != 10 || sb.Acked["n3"] != 10 {
		t.Errorf("split brain %+v: want 2 s to 3.5 s, 10 acknowledgements through each (the partition's share)", sb)
	}
	if p := res.Partitions[0]; p.HealS == nil || *p.HealS != 0.5 || p.SplitBrainS != 1.5 || p.AckedDuring["n1"] != 20 {
		t.Errorf("partition %+v", p)
	}
	page := filepath.Join(dir, "report.html")
	if err := report.WriteHTML(page, res); err != nil {
		t.Fatal(err)
	}
	dom, _ := load(t, bin, page)
	got := regexp.MustCompile(`data-rate-areas="([^"]*)"`).FindStringSubmatch(dom)
	if want := "partition:majority@1s-3s: nodes partitioned|split brain: n1, n3 each primary"; got == nil || got[1] != want {
		t.Errorf("the rate chart's shaded areas are %q, want %q", got, want)
	}
	for _, id := range []string{"partitions", "split-brain"} {
		if !strings.Contains(dom, `<table id="`+id+`">`) {
			t.Errorf("no table %s on the page", id)
		}
	}
	if !strings.Contains(dom, "n1: 10 (first 0-") || !strings.Contains(dom, "n3: 10 (first 1-") {
		t.Errorf("the split-brain table does not name an acknowledged operation of each primary")
	}
	if strings.Contains(dom, "fired:") {
		t.Errorf("the page speaks of a proxy that was not there")
	}
}
