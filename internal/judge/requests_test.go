package judge_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/rundir"
)

// The judge says what became of the API requests a cut hit from the directory alone:
// p-1's 201 was cut and the final state holds it twice (handled twice); p-2's 201 was
// cut and its retry's reply says replayed, the final state holding it once (a replay).
func TestDirSaysWhatBecameOfCutRequests(t *testing.T) {
	dir := t.TempDir()
	hdr := histories.Header{Workload: "app", Model: "exactly-once", Store: "http", Seed: 1}
	ops := []histories.Op{
		{Time: 10, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p-1", Conn: "c1"},
		{Time: 50, Process: 0, Type: histories.OK, F: "apply", OpID: "p-1", Conn: "c2", Value: histories.Value(map[string]any{"payment": 2, "replayed": false})},
		{Time: 60, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p-2", Conn: "c2"},
		{Time: 90, Process: 0, Type: histories.OK, F: "apply", OpID: "p-2", Conn: "c3", Value: histories.Value(map[string]any{"payment": 3, "replayed": true})},
		{Time: 100, Process: 1, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
		{Time: 110, Process: 1, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: histories.Value(map[string]int64{"p-1": 2, "p-2": 1})},
	}
	if err := rundir.WriteHistory(dir, hdr, ops); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cut := func(conn, key string, runTime int64) rundir.FaultLine {
		return rundir.EventLine(toxics.Event{Time: at, Conn: conn, Protocol: "http", Kind: toxics.CommitCut, Truth: toxics.Applied, Statement: "POST /payments", Tag: "201 Created",
			Request: &toxics.Request{Method: "POST", Path: "/payments", IdempotencyKey: key, Status: 201}}, runTime)
	}
	b, err := rundir.MarshalFaults([]rundir.FaultLine{cut("c1", "p-1", 20), cut("c2", "p-2", 70)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.FaultsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rundir.WriteCheck(dir, rundir.Check{Limits: rundir.Limits{Timeout: time.Minute}, Proxied: true}); err != nil {
		t.Fatal(err)
	}
	j, err := judge.Dir(context.Background(), dir, judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"request p-1 was handled twice: its first response was cut after the service answered 201 (POST /payments)",
		"request p-2: its first response was cut after the service answered 201; the retry was answered from the key's stored response (a replay)",
	}
	if e := j.Results.Evidence; e == nil || !slices.Equal(e.Requests, want) {
		t.Fatalf("evidence %+v:\nwant requests %q", e, want)
	}
}
