package histories

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// The hand-written encoder must give what encoding/json gives, as far as a reader can
// tell: both decode to the same event.
func FuzzAppendOp(f *testing.F) {
	f.Add(int64(7), int64(1843021), 3, uint8(1), "decrement", "", []byte(nil), "3-41", "127.0.0.1:51514", "", 0)
	f.Add(int64(9), int64(2901554), -1, uint8(4), "commit-cut", "k\"1\\", []byte(`{"truth":"applied"}`), "", "", "conn closed\n\tEOF", 2)
	f.Add(int64(0), int64(0), 0, uint8(2), "read", "\x00\x1f\u2028", []byte("[1,\n 2]"), "\xff", "é", "\u2029", -3)
	f.Fuzz(func(t *testing.T, index, tm int64, process int, typ uint8, fn, key string, value []byte, opID, conn, errText string, attempt int) {
		op := Op{Index: index, Time: tm, Process: process, Type: Type(typ), F: fn, Key: key, Value: value, OpID: opID, Conn: conn, Error: errText, Attempt: attempt}
		if attempt > 1 {
			op.Failed = []FailedAttempt{{Conn: conn, Start: tm - 1, End: tm, Error: errText, Class: key, Reason: opID}}
			op.Ended, op.Conflicts = errText, attempt
		}
		got, err := appendOp(nil, op)
		want, werr := json.Marshal(op)
		if (err != nil) != (werr != nil) {
			t.Fatalf("appendOp err %v, encoding/json err %v", err, werr)
		}
		if err != nil {
			return
		}
		for _, c := range got {
			if c == '\n' || c == '\r' {
				t.Fatalf("encoded event spans lines: %q", got)
			}
		}
		var a, b Op
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("appendOp wrote invalid JSON %q: %v", got, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("appendOp: %q decodes to %+v\nencoding/json: %q decodes to %+v", got, a, want, b)
		}
	})
}

func BenchmarkEncodeOp(b *testing.B) {
	op := Op{Index: 123456, Time: 987654321, Process: 12, Type: OK, F: "decrement", Value: Value(map[string]any{"applied": true, "balance": -1}), OpID: "12-345", Conn: "127.0.0.1:51514", Attempt: 1}
	b.Run("appendOp", func(b *testing.B) {
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf, _ = appendOp(buf[:0], op)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			json.Marshal(op)
		}
	})
}

// BenchmarkReadFile reads a whole history of 100,000 operations (200,001 lines) into
// memory, as a run does to check it.
func BenchmarkReadFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "history.jsonl")
	w, err := Create(path, Header{Workload: "budget", Model: "budget"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100_000 {
		id := "w-" + strconv.Itoa(i)
		w.Write(Op{Time: int64(i) * 1000, Process: i % 16, Type: Invoke, F: "decrement", OpID: id, Conn: "127.0.0.1:40000"})
		w.Write(Op{Time: int64(i)*1000 + 500, Process: i % 16, Type: OK, F: "decrement", OpID: id, Conn: "127.0.0.1:40000", Attempt: 1})
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ops, err := ReadFile(path, false); err != nil || len(ops) != 200_000 {
			b.Fatalf("%d events, %v", len(ops), err)
		}
	}
}

// BenchmarkWriterParallel writes events from 16 goroutines at once, as a run's workers
// do: the Writer's cost per event, its lock included.
func BenchmarkWriterParallel(b *testing.B) {
	w, err := Create(filepath.Join(b.TempDir(), "history.jsonl"), Header{Workload: "budget", Model: "budget"})
	if err != nil {
		b.Fatal(err)
	}
	op := Op{Time: 987654321, Process: 12, Type: OK, F: "decrement", Value: Value(map[string]any{"applied": true, "balance": -1}), OpID: "12-345", Conn: "127.0.0.1:51514", Attempt: 1}
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.Write(op); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
