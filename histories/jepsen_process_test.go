package histories

import (
	"strings"
	"testing"
)

// An op with no :process, or :process nil, is no client's: jepsen.history's client-op?
// holds for an integer process only, and Elle's checkers keep the client ops alone. It
// is read as an event of the Nemesis process, which no checker checks, and the client
// ops around it are read as ever.
func TestReadJepsenEDNOpsWithoutProcess(t *testing.T) {
	in := strings.Join([]string{
		"{:index 0 :type :invoke :f :txn :value [[:append :x 1]] :process 0}",
		"{:index 1 :type :invoke :value [[:append :x 2]]}",
		"{:index 2 :type :ok :value [[:append :x 2]] :process nil}",
		"{:index 3 :type :ok :f :txn :value [[:append :x 1]] :process 0}",
	}, "\n")
	for _, fast := range []bool{true, false} {
		jepsenFastOn = fast
		ops, err := ReadJepsenEDN(strings.NewReader(in), "h.edn", JepsenOptions{})
		jepsenFastOn = true
		if err != nil {
			t.Fatalf("fast %v: %v", fast, err)
		}
		if len(ops) != 4 {
			t.Fatalf("fast %v: read %d ops, want 4", fast, len(ops))
		}
		for i, want := range []bool{true, false, false, true} {
			if ops[i].IsClient() != want || !want && ops[i].Process != Nemesis {
				t.Errorf("fast %v: op %d read as process %d (client %v), want client %v", fast, i, ops[i].Process, ops[i].IsClient(), want)
			}
		}
		if ops[3].Type != OK || string(ops[3].Value) != `[["append","x",1]]` {
			t.Errorf("fast %v: op 3 %+v", fast, ops[3])
		}
	}
}
