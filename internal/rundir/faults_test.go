package rundir_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
)

// Every kind of line written by the writer is read back as the same line by the reader.
func TestFaultLinesRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123, time.UTC)
	points := uint64(41)
	lines := []rundir.FaultLine{
		rundir.WindowLine(schedule.Window{Time: at, Fault: "commit-cut:0.3", Open: true}, 5, &points),
		rundir.EventLine(toxics.Event{Time: at, Conn: "127.0.0.1:5000", ConnIndex: 3, Point: 42, Protocol: "postgres",
			Kind: toxics.CommitCut, Truth: toxics.Applied, Statement: "commit", Tag: "COMMIT",
			Txn: &toxics.Txn{Seq: 8, Wrote: true, Digest: "5d2f0c4b9a81e637", Text: "insert ...; commit"}}, 1000),
		rundir.ProcessLine(histories.Op{Time: 2000, Process: histories.Nemesis, Type: histories.Info, F: "kill",
			Value: histories.Value(map[string]any{"fault": "kill@1s-2s", "server": "postgres", "pid": 7})}),
		rundir.CoordinatorLine("coordinator-crash", "coordinator-crash@1s", 3000, at),
		rundir.WindowLine(schedule.Window{Time: at, Fault: "commit-cut:0.3"}, 4000, &points),
	}
	b, err := rundir.MarshalFaults(lines)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rundir.ReadFaults(bytes.NewReader(b), "faults.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(lines) {
		t.Fatalf("read %d lines, wrote %d:\n%s", len(got), len(lines), b)
	}
	for i := range lines {
		want, _ := json.Marshal(lines[i])
		have, _ := json.Marshal(got[i])
		if !bytes.Equal(want, have) {
			t.Errorf("line %d: read %s, wrote %s", i+1, have, want)
		}
		if got[i].RunTime() != lines[i].RunTime() {
			t.Errorf("line %d: run time %d, wrote %d", i+1, got[i].RunTime(), lines[i].RunTime())
		}
	}
	// Every kind of line is one of schemas/faults.schema.json.
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "schemas", "faults.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("line %d %s: %v", i+1, line, err)
		}
	}
	if got[4].Window.Points != nil {
		t.Errorf("a stop window carries no points: %+v", got[4].Window)
	}
	if e := got[1].Event; e == nil || !reflect.DeepEqual(e.Txn, lines[1].Event.Txn) || e.Kind != toxics.CommitCut || *e.RunTime != 1000 {
		t.Errorf("event read back as %+v", got[1].Event)
	}
}

// A proxy's --events file (no run_time), unknown objects and blank lines are read; a
// line that is not a fault line is an error naming the file and the line.
func TestReadFaults(t *testing.T) {
	in := `{"time":"2026-12-01T10:00:00Z","conn":"127.0.0.1:5","conn_index":0,"protocol":"postgres","kind":"commit-drop","truth":"not-applied"}

{"something":"a later indoubt wrote"}
`
	got, err := rundir.ReadFaults(strings.NewReader(in), "events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Event == nil || got[0].Event.RunTime != nil || got[0].RunTime() != 0 {
		t.Fatalf("read %+v", got)
	}
	if e := got[0].Event; e.Kind != toxics.CommitDrop || e.KindName() != "commit-drop" || e.TruthName() != "not-applied" {
		t.Errorf("event kind %v (%q), truth %q", e.Kind, e.KindName(), e.TruthName())
	}
	// A kind this build does not know (a later indoubt's, or a file from elsewhere) is
	// read as its name: data, not refused.
	later, err := rundir.ReadFaults(strings.NewReader(`{"kind":"http-cut</script>","truth":"?","conn":"c","run_time":1}`+"\n"), "later.jsonl")
	if err != nil || len(later) != 1 || later[0].Event.KindName() != "http-cut</script>" || later[0].Event.Kind != 0 || later[0].Event.TruthName() != "?" {
		t.Errorf("an unknown kind: %v, %+v", err, later)
	}
	for _, bad := range []string{
		`[1,2]`,
		`{"kind":"commit-cut","truth":"applied","time":"2026-12-01T10:00:00Z"}`,
		`{"kind":"","conn":"c","run_time":1}`,
		`{"window":"start","run_time":"soon"}`,
	} {
		got, err := rundir.ReadFaults(strings.NewReader(in+bad+"\n"), "f.jsonl")
		if err == nil || !strings.Contains(err.Error(), "f.jsonl line 4") {
			t.Errorf("%s: err %v, want one naming f.jsonl line 4", bad, err)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d lines read before the bad one, want 1", bad, len(got))
		}
	}
}

// A write the disk refuses is kept: Close returns it.
func TestFaultWriterKeepsItsError(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	w := rundir.NewFaultWriter(f)
	defer f.Close()
	w.Write(rundir.CoordinatorLine("coordinator-crash", "coordinator-crash@1s", 1, time.Now()))
	if err := w.Close(); err == nil {
		t.Fatal("a write to a full disk closed without an error")
	}
	path := filepath.Join(t.TempDir(), rundir.FaultsFile)
	if lines, err := rundir.ReadFaultsFile(path); err != nil || lines != nil {
		t.Errorf("a missing faults.jsonl: %v, %v; want none and no error", lines, err)
	}
}
