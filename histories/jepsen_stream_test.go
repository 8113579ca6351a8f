package histories

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// jepsenReadWith reads in with ReadJepsenEDN through src (a reader of in), with the
// fast path on or off, and returns the ops and the error's text.
func jepsenReadWith(in []byte, fast bool, src func([]byte) io.Reader, opt JepsenOptions) ([]Op, string) {
	defer func(was bool) { jepsenFastOn = was }(jepsenFastOn)
	jepsenFastOn = fast
	ops, err := ReadJepsenEDN(src(in), "h.edn", opt)
	if err != nil {
		return nil, err.Error()
	}
	return jepsenNoEmpty(ops), ""
}

// jepsenChunks returns a reader of in that hands it over in random chunks of 1 to 64
// bytes, so that values are cut by the window's end anywhere.
func jepsenChunks(seed uint64) func([]byte) io.Reader {
	return func(in []byte) io.Reader {
		return &chunkReader{b: in, r: rand.New(rand.NewPCG(seed, 3))}
	}
}

type chunkReader struct {
	b []byte
	r *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+c.r.IntN(64))], c.b)
	c.b = c.b[n:]
	return n, nil
}

func whole(in []byte) io.Reader { return bytes.NewReader(in) }

// jepsenSameEveryWay fails t when reading in with the fast path, without it, one byte
// at a time or in random chunks does not give the same ops and the same error.
func jepsenSameEveryWay(t *testing.T, in []byte, opt JepsenOptions) {
	t.Helper()
	want, werr := jepsenReadWith(in, false, whole, opt)
	for _, way := range []struct {
		name string
		fast bool
		src  func([]byte) io.Reader
	}{
		{"fast", true, whole},
		{"fast, one byte at a time", true, func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"fast, EOF with the last data", true, func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }},
		{"fast, chunks", true, jepsenChunks(uint64(len(in)))},
		{"general, chunks", false, jepsenChunks(uint64(len(in)) + 1)},
	} {
		got, gerr := jepsenReadWith(in, way.fast, way.src, opt)
		if gerr != werr || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: read differently from the general path on the whole input:\ngot  %+v %q\nwant %+v %q\ninput %q", way.name, got, gerr, want, werr, jepsenShort(in))
		}
	}
}

func jepsenShort(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// jepsenStreamCases are inputs the fast path reads, declines, or refuses.
var jepsenStreamCases = []string{
	`[{:type :invoke, :f :write, :process 0, :value 3} {:type :ok, :f :write, :process 0, :value 3}]`,
	"{:index 0 :time 5 :type :invoke :f :txn :process 3 :value [[:append 1 2] [:r 2 nil]]}\n{:index 1 :time 9 :type :ok :f :txn :process 3 :value [[:append 1 2] [:r 2 [1 2]]]}",
	`({:type :invoke :f :cas :process 2 :value [:k [1 2]]} {:type :fail :f :cas :process 2 :value [:k nil]})`,
	`[{:type :invoke :f :read :process 2 :value [12 nil]} {:type :ok :f :read :process 2 :value [12 4]} {:type :info :f :start :process :nemesis :value {:a #{1 2}}}]`,
	`#jepsen.history.Op{:index 0, :time 5, :type :invoke, :process 0, :f :add, :value #{1 2 3}, :error "x"}` + "\n#_ {:type :x}\n" + `#jepsen.history.Op {:index 1, :time 6, :type :ok, :process 0, :f :add, :value (1 "a b" true nil sym)}`,
	`{:type :invoke :f :write :process 0 :value "<a&b>" :op-id 17 :conn "127.0.0.1:5" :attempt 2 :node "n1"}`,
	`{:type :invoke :f :write :process 0 :value -0 :time 1}{:type :ok :f :write :process 0 :value +7 :time 2}{:type :ok :f :write :process 0 :value 007 :time 3}`,
	`{:type :invoke :f :write :process 0 :value 1.5 :error :timed-out :op-id nil}`,
	"{:type :invoke :f :write :process 0 :value [1 2 ; comment\n 3] :extra {:m 1}}\n{:type :ok :type :ok :f :write :process 0}",
	`{:type :invoke :f :write :process 0 :value 123456789012345678901234567890}`,
	`{:type :invoke :f :write :process 99999999999 :value 1}`,
	`{:type :invoke :f :write :process 0 :time 1234567890123456789012 :value 1}`,
	`{:type :invoke :f :write :process 0 :value :a<b}`,
	"{:type :invoke :f :write :process 0 :value \"line\nbreak\"}\n{:type :ok :f :write :process 0 :value \"\\u00e9\"}",
	`[{:type :invoke :f :read :process 0}] [{:type :invoke}]`,
	`{:type :invoke :f :write :process 0 :value [1 2)}`,
	"{:type :invoke :f :write :process 0 :value 1\x00}",
	`{:type :invoke :f :read :process :reader}`,
	`{:type "invoke" :f read :process "nemesis"} {"type" :ok :f :read :process 0}`,
	`{:type :invoke :f :read :process 0 :value [:x [:y]] :key 1}{:type :ok :f :cas :process 0 :value [:x 5]}`,
	`{:type :invoke :f :read :process 0 :value [[1] 2]}{:type :ok :f :read :process 0 :value [nil 2]}`,
	`{:type :invoke, :f :read, :process 0, :index 0} {:type :ok, :f :read, :process 0, :index 0}`,
	`{:type :invoke :f :write :process 0 :value \a}`,
	`{:type :invoke :f :write :process 0 :value [` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `]}`,
}

// TestJepsenEDNReaderEveryWay: the fast path reads every case as the general path
// does, and neither depends on where the input's reads end.
func TestJepsenEDNReaderEveryWay(t *testing.T) {
	inputs := append([]string{}, jepsenStreamCases...)
	files, _ := filepath.Glob(filepath.Join("..", "checker", "testdata", "jepsen-edn", "*.edn"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs, string(jepsenBenchEDN("register", 2000)), string(jepsenBenchEDN("txn", 2000)))
	for i, in := range inputs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			jepsenSameEveryWay(t, []byte(in), JepsenOptions{})
			jepsenSameEveryWay(t, []byte(in), JepsenOptions{SkipBadLines: true})
		})
	}
}

// TestJepsenEDNFastPathTakesJepsenOps: the shapes Jepsen and Elle write go the fast
// way (a decline would be correct, only slow).
func TestJepsenEDNFastPathTakesJepsenOps(t *testing.T) {
	for _, shape := range []string{"register", "txn"} {
		src := jepsenBenchEDN(shape, 200)
		p := jepsenParser{name: "h.edn", src: src, line: 1, final: true}
		p.pos = bytes.IndexByte(src, '{')
		var f jepsenFast
		for n := 0; n < 200; n++ {
			if _, _, ok := f.op(&p); !ok {
				t.Fatalf("%s: op %d declined at %q", shape, n, jepsenShort(src[p.pos:]))
			}
		}
	}
}

// TestJepsenEDNReaderStreams: ops come one at a time from a history with no end, with
// a window's worth read ahead; the first ops of an endless history are read without
// reading the rest.
func TestJepsenEDNReaderStreams(t *testing.T) {
	src := &countingReader{r: &endlessOps{}}
	r := NewJepsenEDNReader(src, "endless.edn", JepsenOptions{})
	for i := range 100_000 {
		op, err := r.Next()
		if err != nil || op.Index != int64(i) {
			t.Fatalf("op %d: %+v, %v", i, op, err)
		}
	}
	if src.n > 8<<20 {
		t.Fatalf("read %d bytes for 100,000 ops of about 70 bytes each", src.n)
	}
}

// TestJepsenEDNReaderRefusesEndlessValues: input that is one value without end
// (/dev/zero, an endless symbol, a vector never closed, a string never closed) is
// refused having read a bounded amount, not all of it.
func TestJepsenEDNReaderRefusesEndlessValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		fill   byte
		want   string
	}{
		{"zeros", "", 0, "z.edn line 1: byte 0x00 is not EDN"},
		{"symbol", "", 'a', "z.edn line 1: value longer than 4194304 bytes"},
		{"string", `{:type :ok :value "`, 'a', "z.edn line 1: value longer than 4194304 bytes"},
		{"inner vector", `[{:type :ok :f :read :process 0 :value [`, '1', "z.edn line 1: value longer than 4194304 bytes"},
		{"newlines", "[\n", '\n', "z.edn: no history in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &countingReader{r: io.MultiReader(strings.NewReader(tc.prefix), &filler{c: tc.fill, left: 64 << 20})}
			_, err := ReadJepsenEDN(src, "z.edn", JepsenOptions{})
			if tc.name == "newlines" {
				// A history that is only space is read to its end, in bounded memory.
				if err == nil || !strings.Contains(err.Error(), "line 67108866: unexpected end of input, missing ']'") {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if src.n > 3*MaxLine {
				t.Fatalf("read %d bytes before refusing", src.n)
			}
		})
	}
}

// TestJepsenEDNValueMayBeAsLongAsTheHistory: an op map longer than MaxLine is read
// when the history before it is longer still (a final read of many values).
func TestJepsenEDNValueMayBeAsLongAsTheHistory(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("[")
	pad := strings.Repeat("x", 1000)
	n := 0
	for b.Len() < 2*MaxLine {
		fmt.Fprintf(&b, "{:type :invoke :f :add :process 0 :value \"%s\"}\n{:type :ok :f :add :process 0 :value \"%s\"}\n", pad, pad)
		n++
	}
	b.WriteString("{:type :invoke :f :read :process 1}\n{:type :ok :f :read :process 1 :value [")
	for i := range 600_000 {
		fmt.Fprintf(&b, "%d ", 1_000_000+i)
	}
	b.WriteString("]}]")
	ops, err := ReadJepsenEDN(&b, "set.edn", JepsenOptions{})
	if err != nil || len(ops) != 2*n+2 || len(ops[len(ops)-1].Value) < MaxLine {
		t.Fatalf("%d ops, %v", len(ops), err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// filler reads left bytes c.
type filler struct {
	c    byte
	left int64
}

func (f *filler) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.left)
	for i := range p[:n] {
		p[i] = f.c
	}
	f.left -= n
	return int(n), nil
}

// endlessOps reads an endless EDN history of writes by one process.
type endlessOps struct {
	buf []byte
	i   int
}

func (e *endlessOps) Read(p []byte) (int, error) {
	for len(e.buf) < len(p) {
		typ := "invoke"
		if e.i%2 == 1 {
			typ = "ok"
		}
		e.buf = fmt.Appendf(e.buf, "{:index %d, :time %d, :type :%s, :process 0, :f :write, :value %d}\n", e.i, e.i, typ, e.i/2)
		e.i++
	}
	n := copy(p, e.buf)
	e.buf = e.buf[:copy(e.buf, e.buf[n:])]
	return n, nil
}

// FuzzJepsenEDNFast: whatever the input, the fast path reads it as the general path
// does, whole or in chunks, and the errors are the same.
func FuzzJepsenEDNFast(f *testing.F) {
	for _, s := range jepsenStreamCases {
		f.Add([]byte(s))
	}
	f.Add(jepsenBenchEDN("txn", 10))
	f.Fuzz(func(t *testing.T, in []byte) {
		jepsenSameEveryWay(t, in, JepsenOptions{})
		_, err := ReadJepsenEDN(bytes.NewReader(in), "h.edn", JepsenOptions{SkipBadLines: true})
		if err != nil && !strings.HasPrefix(err.Error(), "h.edn line ") && !errors.Is(err, ErrEmpty) {
			t.Fatalf("error without file and line: %v", err)
		}
	})
}
