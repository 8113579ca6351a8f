package histories

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func jepsenFuzzSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
}

// FuzzReadJepsenEDN: the EDN reader never panics, what it accepts has valid types, and
// its export reads back to the same ops.
func FuzzReadJepsenEDN(f *testing.F) {
	for _, s := range []string{
		`[{:type :invoke, :f :write, :process 0, :value 3} {:type :ok, :f :write, :process 0, :value 3}]`,
		"; c\n({:type :invoke :f :cas :process 2 :value [1 2] :time 5 :index 0})",
		`{:type :info :f :start :process :nemesis :value {:isolated #{"n1"}} :error "x\n"}`,
		`#jepsen.history.Op{:index 0 :type :ok :process 1 :f :read :value [:k 1.5e3] :c \space :n 12N}`,
		`{:type :ok :f :read :process 0 :value [12 nil]} #_ {:x 1} {:type :fail :f :cas :process 0 :value ["a" [1 2]]}`,
		`[{:type :ok :process 0 :f "add" :value [##Inf 1/2 -0 +7 "\u00e9"] :op-id 3 :conn "c" :attempt 2}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ops, err := ReadJepsenEDN(bytes.NewReader(in), "fuzz.edn", JepsenOptions{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.edn line ") && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		for _, op := range ops {
			if op.Type < Invoke || op.Type > Info {
				t.Fatalf("op %d has type %d", op.Index, op.Type)
			}
		}
		var out bytes.Buffer
		if err := WriteJepsenEDN(&out, ops); err != nil {
			t.Fatalf("export: %v", err)
		}
		again, err := ReadJepsenEDN(bytes.NewReader(out.Bytes()), "export.edn", JepsenOptions{})
		if err != nil {
			t.Fatalf("export does not read back: %v\n%s", err, out.Bytes())
		}
		if !reflect.DeepEqual(jepsenNoEmpty(ops), jepsenNoEmpty(again)) {
			t.Fatalf("export reads back differently:\n%+v\n%+v\n%s", ops, again, out.Bytes())
		}
	})
}

// jepsenNoEmpty makes empty and nil values compare equal.
func jepsenNoEmpty(ops []Op) []Op {
	out := append([]Op{}, ops...)
	for i := range out {
		if len(out[i].Value) == 0 {
			out[i].Value = nil
		}
	}
	return out
}

// FuzzReadJepsenLog: the log reader never panics, errors name the file and the line,
// and ops are numbered in order.
func FuzzReadJepsenLog(f *testing.F) {
	jepsenFuzzSeeds(f, filepath.Join("..", "..", "shared", "histories", "etcd-jepsen", "etcd_00*.log"))
	for _, s := range []string{
		"INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\t3\n",
		"INFO  jepsen.util - 3 :invoke :cas [3 0]\nINFO  jepsen.util - 3 :fail :cas [3 0]\n",
		"INFO  jepsen.util - 4\t:info\t:write\t:timed-out\nx\nINFO  jepsen.util - :nemesis :info :start {:a 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ops, err := ReadJepsenLog(bytes.NewReader(in), "fuzz.log", JepsenOptions{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.log line ") && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		for i, op := range ops {
			if op.Index != int64(i) || op.Time != int64(i) || op.Type < Invoke || op.Type > Info || op.F == "" {
				t.Fatalf("op %d: %+v", i, op)
			}
		}
	})
}
