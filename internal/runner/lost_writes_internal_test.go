package runner

import (
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// The lost-write rule on hand-made histories: a read after the restart that returns
// neither the last acknowledged write nor anything that may follow it names that write;
// an unknown write of the value read, or a later write, explains the read.
func TestLostRegisterWrites(t *testing.T) {
	s := int64(time.Second)
	op := func(tm int64, p int, typ histories.Type, f, id string, v string) histories.Op {
		o := histories.Op{Time: tm, Process: p, Type: typ, F: f, Key: "k", OpID: id}
		if v != "" {
			o.Value = []byte(v)
		}
		return o
	}
	kill := []results.ProcessFault{{Fault: "kill@1s-2s", Action: "kill", StartS: 1, EndS: 2}}
	base := []histories.Op{
		op(s/10, 0, histories.Invoke, "write", "0-0", "3"),
		op(s/5, 0, histories.OK, "write", "0-0", ""),
	}
	cases := []struct {
		name string
		more []histories.Op
		lost bool
	}{
		{"read absent after the kill", []histories.Op{op(3*s, 1, histories.Invoke, "read", "1-0", ""), op(3*s+1, 1, histories.OK, "read", "1-0", "null")}, true},
		{"read the write", []histories.Op{op(3*s, 1, histories.Invoke, "read", "1-0", ""), op(3*s+1, 1, histories.OK, "read", "1-0", "3")}, false},
		{"an unknown write of the value read", []histories.Op{
			op(s/2, 2, histories.Invoke, "write", "2-0", "4"), op(s, 2, histories.Info, "write", "2-0", ""),
			op(3*s, 1, histories.Invoke, "read", "1-0", ""), op(3*s+1, 1, histories.OK, "read", "1-0", "4")}, false},
		{"a cas after the restart", []histories.Op{
			op(5*s/2, 2, histories.Invoke, "cas", "2-0", "[3,1]"), op(5*s/2+1, 2, histories.OK, "cas", "2-0", ""),
			op(3*s, 1, histories.Invoke, "read", "1-0", ""), op(3*s+1, 1, histories.OK, "read", "1-0", "1")}, false},
		{"a read during the downtime does not count", []histories.Op{op(3*s/2, 1, histories.Invoke, "read", "1-0", ""), op(3*s, 1, histories.OK, "read", "1-0", "null")}, false},
	}
	for _, tc := range cases {
		ops := append(append([]histories.Op(nil), base...), tc.more...)
		for i := range ops {
			ops[i].Index = int64(i)
		}
		got := lostRegisterWrites(kill, ops)
		if (len(got) > 0) != tc.lost {
			t.Errorf("%s: lost %+v, want lost=%v", tc.name, got, tc.lost)
		}
		if tc.lost && (got[0].OpID != "0-0" || got[0].AckBeforeFaultS != 0.8) {
			t.Errorf("%s: %+v", tc.name, got[0])
		}
	}
}
