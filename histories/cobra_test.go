package histories

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cobraLog encodes records: a tag, then its numbers.
func cobraLog(recs ...[]int64) []byte {
	var b []byte
	for _, r := range recs {
		b = append(b, byte(r[0]))
		for _, n := range r[1:] {
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
	}
	return b
}

func TestCobraRead(t *testing.T) {
	dir := t.TempDir()
	// Session a: transaction 1 writes key 7 (write id 100) and reads key 8 unwritten;
	// session b: transaction 2 reads write 100, then transaction 3 begins and its log
	// ends.
	a := cobraLog([]int64{'S', 1}, []int64{'W', 100, 7, 55}, []int64{'R', 0, cobraNull1, 8, 0}, []int64{'C', 1})
	b := cobraLog([]int64{'S', 2}, []int64{'R', 1, 100, 7, 55}, []int64{'C', 2}, []int64{'S', 3}, []int64{'W', 101, 8, 1})
	for name, data := range map[string][]byte{"a.log": a, "b.log": b, "notes.txt": []byte("x")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := ReadCobra(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, strings.Join([]string{o.Type.String(), string(o.Value)}, " "))
		if o.Index != int64(len(got)-1) {
			t.Errorf("op %d has index %d", len(got)-1, o.Index)
		}
	}
	want := `ok [["w",7,100],["r",8,null]]; ok [["r",7,100]]; info [["w",8,101]]`
	if s := strings.Join(got, "; "); s != want {
		t.Errorf("got %s\nwant %s", s, want)
	}
	if ops[0].Process != 0 || ops[1].Process != 1 || ops[2].Process != 1 {
		t.Errorf("processes %d %d %d, want 0 1 1", ops[0].Process, ops[1].Process, ops[2].Process)
	}
}

func TestCobraReadRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		log  []byte
		want string
	}{
		{"cut", cobraLog([]int64{'S', 1})[:5], "ends inside a record"},
		{"other tag", cobraLog([]int64{'A', 1}), "not a Cobra record"},
		{"write outside", cobraLog([]int64{'W', 1, 2, 3}), "outside a transaction"},
		{"wrong commit", cobraLog([]int64{'S', 1}, []int64{'C', 2}), "commit of transaction 2"},
		{"nested", cobraLog([]int64{'S', 1}, []int64{'S', 2}), "begins inside transaction 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "s.log"), c.log, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadCobra(dir); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := ReadCobra(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no Cobra log") {
		t.Errorf("empty directory: %v", err)
	}
}
