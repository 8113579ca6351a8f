package histories_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

func writeHistory(t *testing.T, ops []histories.Op) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := histories.Create(path, histories.Header{Workload: "budget", Model: "budget", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if _, err := w.Write(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTrip(t *testing.T) {
	in := []histories.Op{
		{Time: 10, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-0", Conn: "127.0.0.1:5000"},
		{Time: 20, Process: 0, Type: histories.Info, F: "decrement", OpID: "0-0", Error: "conn closed", Attempt: 1},
		{Time: 30, Process: histories.Nemesis, Type: histories.Info, F: "commit-cut", Value: histories.Value(map[string]string{"truth": "applied"})},
		{Time: 40, Process: 16, Type: histories.Invoke, F: "read", Key: "k1"},
		{Time: 50, Process: 16, Type: histories.OK, F: "read", Key: "k1", Value: histories.Value(3)},
	}
	h, got, err := histories.ReadFile(writeHistory(t, in), false)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Workload != "budget" || h.Model != "budget" || h.Seed != 7 || h.Format != histories.FormatV1 {
		t.Fatalf("header = %+v", h)
	}
	if len(got) != len(in) {
		t.Fatalf("read %d events, wrote %d", len(got), len(in))
	}
	for i := range in {
		want := in[i]
		want.Index = int64(i)
		if !sameOp(got[i], want) {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want)
		}
	}
}

func sameOp(a, b histories.Op) bool {
	return a.Index == b.Index && a.Time == b.Time && a.Process == b.Process && a.Type == b.Type &&
		a.F == b.F && a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.OpID == b.OpID &&
		a.Conn == b.Conn && a.Error == b.Error && a.Attempt == b.Attempt
}

func TestWriterIsSafeForConcurrentUseAndIndexesInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := histories.Create(path, histories.Header{Model: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	// Each event says who wrote it (process) and which of its writes it was (time):
	// the index Write returned must be the line that holds that event.
	var wg sync.WaitGroup
	given := make([][]int64, 8)
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				// Invocations and completions by turns, as a process writes them.
				typ := histories.Invoke
				if i%2 == 1 {
					typ = histories.OK
				}
				index, err := w.Write(histories.Op{Time: int64(i), Process: p, Type: typ, F: "decrement", OpID: fmt.Sprintf("%d-%d", p, i/2)})
				if err != nil {
					t.Error(err)
					return
				}
				given[p] = append(given[p], index)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, ops, err := histories.ReadFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4000 {
		t.Fatalf("read %d events, want 4000", len(ops))
	}
	for i, op := range ops {
		if op.Index != int64(i) {
			t.Fatalf("event %d has index %d", i, op.Index)
		}
	}
	for p, indexes := range given {
		for i, index := range indexes {
			if op := ops[index]; op.Process != p || op.Time != int64(i) || op.OpID != fmt.Sprintf("%d-%d", p, i/2) {
				t.Fatalf("write %d of process %d was given index %d, which holds %+v", i, p, index, op)
			}
		}
	}
}

func TestWriterSyncsInTheBackground(t *testing.T) {
	// Without Sync or Close, what was written reaches the file within SyncInterval.
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := histories.Create(path, histories.Header{Model: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 3; i++ {
		if _, err := w.Write(histories.Op{Process: i, Type: histories.Invoke, F: "decrement"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * histories.SyncInterval)
	for {
		_, ops, err := histories.ReadFile(path, false)
		if err == nil && len(ops) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the writes: %d events, %v", 3*histories.SyncInterval, len(ops), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And the writer still works after the background sync.
	if _, err := w.Write(histories.Op{Process: 3, Type: histories.Invoke, F: "decrement"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ops, err := histories.ReadFile(path, false); err != nil || len(ops) != 4 {
		t.Fatalf("after Close: %d events, %v", len(ops), err)
	}
}

func TestWriterSyncsWithoutClose(t *testing.T) {
	// A harness that dies without Close must leave what it wrote readable: Sync (and the
	// once-a-second background sync) put complete lines on disk.
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := histories.Create(path, histories.Header{Model: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(histories.Op{Process: 0, Type: histories.Invoke, F: "decrement"})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	_, ops, err := histories.ReadFile(path, false)
	if err != nil || len(ops) != 1 {
		t.Fatalf("after Sync: %d events, %v", len(ops), err)
	}
}

func TestReaderErrors(t *testing.T) {
	header := `{"header":{"format":"indoubt-history/1","workload":"budget","model":"budget","seed":1}}` + "\n"
	good := `{"index":0,"time":1,"process":0,"type":"invoke","f":"decrement"}` + "\n"
	cases := []struct {
		name, text string
		partial    bool
		wantOps    int
		wantErr    string
	}{
		{"empty file is refused", "", false, 0, "h.jsonl: no history in it"},
		{"blank lines only are refused", "\n \n", false, 0, "no history in it"},
		{"header without events is a history of no operations", header, false, 0, ""},
		{"duplicated index names the line", header + good + good, false, 0, "h.jsonl line 3: event index 0 does not increase on index 0 of line 2"},
		{"reversed index names the line", header + `{"index":5,"type":"invoke","process":0,"f":"read"}` + "\n" + `{"index":4,"type":"ok","process":0,"f":"read"}` + "\n", false, 0, "h.jsonl line 3: event index 4 does not increase on index 5"},
		{"blank lines are skipped", header + "\n" + good + "\n", false, 1, ""},
		{"malformed line names the file and line", header + good + "{nope\n", false, 0, "h.jsonl line 3: malformed event"},
		{"unknown type", header + `{"type":"maybe"}` + "\n", false, 0, "line 2"},
		{"missing type", header + `{"f":"read"}` + "\n", false, 0, "line 2: event has no type"},
		{"trailing data", header + good[:len(good)-1] + `{}` + "\n", false, 0, "trailing data"},
		{"truncated last line", header + good + `{"index":1,"ti`, false, 0, "truncated"},
		{"truncated last line, partial", header + good + `{"index":1,"ti`, true, 1, ""},
		{"malformed header", `{"header":[1]}` + "\n", false, 0, "line 1: malformed header"},
		{"future format", `{"header":{"format":"indoubt-history/9"}}` + "\n", false, 0, "unsupported history format"},
		{"history without header", good, false, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.jsonl")
			os.WriteFile(path, []byte(tc.text), 0o644)
			_, ops, err := histories.ReadFile(path, tc.partial)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if len(ops) != tc.wantOps {
					t.Fatalf("%d events, want %d", len(ops), tc.wantOps)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestTypeText(t *testing.T) {
	for _, typ := range []histories.Type{histories.Invoke, histories.OK, histories.Fail, histories.Info} {
		b, err := typ.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back histories.Type
		if err := back.UnmarshalText(b); err != nil || back != typ {
			t.Errorf("%v round-trips to %v, %v", typ, back, err)
		}
	}
	var zero histories.Type
	if _, err := zero.MarshalText(); err == nil {
		t.Error("the zero Type marshals")
	}
}

// FuzzReader: no input panics the reader, and every error names the line.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"header":{"format":"indoubt-history/1","model":"budget"}}` + "\n" + `{"index":0,"type":"invoke","f":"decrement"}` + "\n"))
	f.Add([]byte(`{"type":"ok","value":{"applied":true}}`))
	f.Add([]byte("\n\n{\"header\":null}\n"))
	f.Add([]byte(`{"type":"info","value":[1,2,{"x":null}],"time":-1,"process":-1}` + "\n" + `{"ty`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, partial := range []bool{false, true} {
			r, err := histories.NewReader(bytes.NewReader(data), "fuzz")
			if err != nil {
				if !strings.HasPrefix(err.Error(), "fuzz line ") && !errors.Is(err, histories.ErrEmpty) {
					t.Fatalf("error without file and line: %v", err)
				}
				continue
			}
			r.Partial = partial
			for {
				op, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if !strings.HasPrefix(err.Error(), "fuzz line ") {
						t.Fatalf("error without file and line: %v", err)
					}
					break
				}
				if op.Type < histories.Invoke || op.Type > histories.Info {
					t.Fatalf("reader returned an event of type %d", op.Type)
				}
			}
		}
	})
}
