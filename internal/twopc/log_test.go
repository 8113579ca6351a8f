package twopc

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLogRoundTripAndTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Write(Record{GID: "g" + string(rune('a'+i)), Participants: []int{0, 1}, Decision: Commit}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of a write leaves a line without its newline.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"gid":"torn","decis`)
	f.Close()
	got, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Errorf("read %d decisions, want 20", len(got))
	}
	if _, ok := got["torn"]; ok {
		t.Error("a torn last line was read as a decision")
	}
	if got["ga"].Decision != Commit || len(got["ga"].Participants) != 2 {
		t.Errorf("ga = %+v", got["ga"])
	}
	if m, err := ReadLog(filepath.Join(t.TempDir(), "none")); err != nil || len(m) != 0 {
		t.Errorf("missing log: %v %v, want empty", m, err)
	}
	os.WriteFile(path, []byte("garbage\n"), 0o644)
	if _, err := ReadLog(path); err == nil {
		t.Error("a garbage line read without error")
	}
}
