package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"
)

// decodeSeeds are event lines as indoubt writes them, and near misses of that form.
var decodeSeeds = []string{
	`{"index":0,"time":1200,"process":3,"type":"invoke","f":"decrement","op_id":"3-0","conn":"127.0.0.1:40312"}`,
	`{"index":1,"time":98000,"process":3,"type":"ok","f":"decrement","value":{"applied":true,"balance":41},"op_id":"3-0","conn":"127.0.0.1:40312","attempt":1}`,
	`{"index":2,"time":99000,"process":-1,"type":"info","f":"commit-cut","conn":"127.0.0.1:40312","error":"cut after \"COMMIT\""}`,
	`{"index":3,"time":5,"process":0,"type":"ok","f":"read","key":"k1","value":null}`,
	`{"index":4,"time":5,"process":0,"type":"ok","f":"cas","value":[1,2.5e-3,"\u00e9x",{"a":[true,false,null]}]}`,
	` {"Index":4,"type":"ok"} `,
	`{"index":4,"index":5,"type":"ok"}`,
	`{"index":01,"type":"ok"}`,
	`{"index":1.0,"type":"ok"}`,
	`{"index":-0,"type":"fail","error":"h\u00e9"}`,
	`{"index":999999999999999999,"type":"ok"}`,
	`{"index":9999999999999999999,"type":"ok"}`,
	`{"type":"ok","value":{"x":1}}]`,
	`{"type":"ok","value":{"x":1}} {}`,
	`{"type":"ok","value":01}`,
	`{"type":"ok","value":"\x"}`,
	`{"type":"ok","f":"héllo","error":"\xff"}`,
	`{"type":"ok","key":null}`,
	`{"type":"OK"}`,
	"{\"type\":\"ok\",\t\"value\" : { \"a\" : 1 } }\r\n",
	`{}`,
	`{"type":"ok"`,
}

// FuzzDecodeFast holds the fast path to encoding/json: whatever it accepts, encoding/json
// accepts as the same event, and a writer's line of plain strings it does accept.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast Op
		if !decodeFast(raw, &fast) {
			return
		}
		std, err := decodeJSON(raw)
		if err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refused it: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q:\nfast %#v\njson %#v", raw, fast, std)
		}
		// What the fast path reads, the writer writes back in a form it reads again.
		if fast.Type >= Invoke && fast.Type <= Info {
			line, err := appendOp(nil, fast)
			if err != nil {
				t.Fatalf("re-encoding %#v: %v", fast, err)
			}
			var again Op
			if !decodeFast(line, &again) || !reflect.DeepEqual(again, fast) {
				t.Fatalf("the writer's %q of %q does not read back by the fast path: %#v", line, raw, again)
			}
		}
	})
}

// FuzzReaderFastPath: the Reader reads any input the same, events and errors alike,
// with the fast path as with encoding/json alone.
func FuzzReaderFastPath(f *testing.F) {
	f.Add([]byte(`{"header":{"format":"indoubt-history/1","model":"budget"}}` + "\n" + decodeSeeds[0] + "\n" + decodeSeeds[1] + "\n"))
	f.Add([]byte(decodeSeeds[1] + "\n" + decodeSeeds[0] + "\n"))
	f.Add([]byte(decodeSeeds[0] + "\n\n" + decodeSeeds[2] + "\n" + `{"index":9,"type":"ok"`))
	f.Add([]byte(decodeSeeds[12] + "\n" + decodeSeeds[4]))
	for _, s := range decodeSeeds {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer func() { fastDecode = true }()
		for _, partial := range []bool{false, true} {
			fastDecode = true
			fops, ferr := readAllOf(data, partial)
			fastDecode = false
			sops, serr := readAllOf(data, partial)
			if !reflect.DeepEqual(fops, sops) || errString(ferr) != errString(serr) {
				t.Fatalf("partial %v:\nfast %v %v\njson %v %v", partial, fops, ferr, sops, serr)
			}
		}
	})
}

func readAllOf(data []byte, partial bool) ([]Op, error) {
	r, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		return nil, err
	}
	r.Partial = partial
	return r.ReadAll()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDecodeFastTakesWriterLines: the lines indoubt writes take the fast path, so the
// speed is not lost to a silent fallback.
func TestDecodeFastTakesWriterLines(t *testing.T) {
	for _, s := range []string{decodeSeeds[0], decodeSeeds[1], decodeSeeds[3], decodeSeeds[4]} {
		var op Op
		if !decodeFast([]byte(s+"\n"), &op) {
			t.Errorf("fast path declined %s", s)
		}
	}
	ops := []Op{
		{Index: 7, Time: 123456789, Process: 15, Type: Invoke, F: "increment", OpID: "15-99", Conn: "[::1]:5432"},
		{Index: 8, Time: 123456999, Process: 15, Type: Info, F: "increment", OpID: "15-99", Conn: "[::1]:5432", Error: "read tcp: i/o timeout", Attempt: 3},
		{Index: 9, Process: Nemesis, Type: OK, F: "write", Key: "r2", Value: []byte(`{"wrote":3}`)},
	}
	for _, op := range ops {
		line, err := appendOp(nil, op)
		if err != nil {
			t.Fatal(err)
		}
		var got Op
		if !decodeFast(append(line, '\n'), &got) || !reflect.DeepEqual(got, op) {
			t.Errorf("%s: fast path gave %#v", line, got)
		}
	}
}

// TestReaderStillRefuses: the errors of the Reader stay those of encoding/json's path.
func TestReaderStillRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{decodeSeeds[1] + "\n" + decodeSeeds[0] + "\n", "fuzz line 2: event index 0 does not increase on index 1 of line 1: duplicated or reordered events"},
		{decodeSeeds[13] + "\n", "fuzz line 1: malformed event: trailing data after the object"},
		{decodeSeeds[0] + "\n" + `{"index":9,"type":"ok"`, "fuzz line 2: history ends in a truncated line"},
		{`{}` + "\n", "fuzz line 1: event has no type"},
	} {
		_, err := readAllOf([]byte(tc.in), false)
		if errString(err) != tc.want {
			t.Errorf("%q: got %v, want %s", tc.in, err, tc.want)
		}
	}
	if _, err := readAllOf([]byte(decodeSeeds[0]+"\n"+`{"index":9,"type":"ok"`), true); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("partial: %v", err)
	}
}

// BenchmarkReaderTxn reads a transactional history of 100,000 transactions (200,001
// lines) as scripts/txngen writes them, event by event, as `indoubt check` does: the
// reader's share of checking a list-append history.
func BenchmarkReaderTxn(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append"}}` + "\n")
	for i := range 100_000 {
		p, k := i%16, i%13
		fmt.Fprintf(&buf, `{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"txn","value":[["r",%d,null],["append",%d,%d],["r",%d,null]]}`+"\n", 2*i, 2000*i, p, k, k+1, i, k+2)
		fmt.Fprintf(&buf, `{"index":%d,"time":%d,"process":%d,"type":"ok","f":"txn","value":[["r",%d,[1,2,3,4,5,6,7,8,9,10,11,12]],["append",%d,%d],["r",%d,[]]]}`+"\n", 2*i+1, 2000*i+1000, p, k, k+1, i, k+2)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), "bench")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 200_000 {
			b.Fatalf("%d events", n)
		}
	}
}

// FuzzSkipValue holds skipValue to encoding/json's grammar: a value it accepts whole is
// valid JSON, and a valid value of valid UTF-8, nested less deeply than maxDepth, it
// accepts.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`[["r",3,null],["append",6,1]]`, `{"a":[true,false,null],"b":{}}`, `[{]}`, `{"a" : [ 1 , -2.5e+3 ] }`,
		`[[[[[]]]]]`, `{"a":1,}`, `[1,]`, `"\u00e9\n"`, `{"a"}`, `[}`, `{]`, `-`, `01`, `[1 2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := skipValue(b, 0, 0)
		if ok && end == len(b) && !json.Valid(b) {
			t.Fatalf("skipValue accepted %q, which is not JSON", b)
		}
		if ok && end < len(b) && json.Valid(b[:end]) == false {
			t.Fatalf("skipValue accepted %q of %q, which is not JSON", b[:end], b)
		}
		if json.Valid(b) && utf8.Valid(b) && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < maxDepth && len(bytes.TrimSpace(b)) == len(b) && (!ok || end != len(b)) {
			t.Fatalf("skipValue declined %q, valid JSON", b)
		}
	})
}
