package report

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads/insert"
)

func TestWriteInsertTable(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	run := func(k insert.Key, workers int, succeeded int64, index int64, dups int64, v checker.Verdict) *results.Results {
		r := &results.Results{Store: "postgres", Retry: "naive", Workers: workers, DurationS: 10, Verdict: v,
			Faults: results.FaultCounts{Schedule: []string{"commit-cut:0.1"}},
			Final: insert.Final{Key: k, Generated: "gen " + string(k), Server: "PostgreSQL 18.1", Duplicates: dups,
				DuplicateOps: map[string]int64{"3-4": 2},
				Measures:     insert.Measures{Rows: succeeded, IndexBytes: n(index), Reindexed: n(index / 2), FPI: n(succeeded / 10)}}}
		r.Outcomes.Succeeded.Ops = succeeded
		return r
	}
	var b strings.Builder
	WriteInsertTable(&b, []*results.Results{
		run(insert.UUIDv4, 16, 5000, 2048*1024, 3, checker.Invalid),
		run(insert.Identity, 16, 10000, 1024*1024, 0, checker.Valid),
		run(insert.Identity, 16, 10000, 1024*1024, 0, checker.Valid), // a second round
	})
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	var idLine, u4Line string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "identity" {
			idLine = l
		}
		if len(f) > 0 && f[0] == "uuidv4" {
			u4Line = l
		}
	}
	// identity first (the Keys order), 1000 tx/s, ratio 1; uuidv4 500 tx/s, ratio 0.50,
	// index 2048 KiB, 1024 after REINDEX, its duplicates and verdict.
	// index bytes per row: 1 MiB / 10000 rows = 104.9; uuidv4 2 MiB / 5000 = 419.4.
	for _, want := range []string{"1000", "1.00", "1024", "512", "104.9", "valid"} {
		if !strings.Contains(idLine, want) {
			t.Errorf("identity line %q lacks %q", idLine, want)
		}
	}
	for _, want := range []string{"500", "0.50", "2048", "1024", "419.4", "invalid"} {
		if !strings.Contains(u4Line, want) {
			t.Errorf("uuidv4 line %q lacks %q", u4Line, want)
		}
	}
	if strings.Index(out, idLine) > strings.Index(out, u4Line) {
		t.Error("identity is not listed before uuidv4")
	}
	if !strings.Contains(out, "2 round(s)") || !strings.Contains(out, "3 duplicated rows, e.g. op 3-4 (2 rows)") {
		t.Errorf("header or duplicates missing:\n%s", out)
	}
}
