package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// scanSeeds are transaction values in the form txnScan reads, and near misses of it.
var scanSeeds = []string{
	`[["append",3,7],["r",4,[1,2,5]],["w",5,9],["r",6,null],["r",7,2]]`,
	`[["r",1,[]],["append",-0,0],["r",-12,[-1,0,7]]]`,
	`null`, `[]`, `[[]]`, `[["r",1]]`, `[["q",1,2]]`, `[["w",1,null]]`, `[["append",1,[1]]]`,
	`[["r","x",[1]]]`, `[ ["r",1,[1]]]`, `[["r",1,[1, 2]]]`, `[["r",1,[01]]]`, `[["r",1,[1.5]]]`,
	`[["r",1,[123456789012345678]]]`, `[["r",1,[1234567890123456789]]]`, `[["append",1,2e3]]`,
	`[["append",1,2],]`, `[["append",1,2]`, `[["append",1,2]]]`, `nul`, `[["r",1,[1,]]]`,
	`[["r",1,[-]]]`, `[["r",1,null,2]]`, `[["append",1,2]],"op_id":"1"}`,
}

// FuzzTxnScan holds txnScan to txnDecoder: a value it reads is valid JSON, and decodes
// to the same micro-ops, list elements and interned keys, in the same order, as
// txnDecoder gives the same bytes; a value it declines leaves nothing behind.
func FuzzTxnScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		scanned := txnPrep{dec: txnDecoder{in: newTxnInterner()}}
		scanned.dec.mops = append(scanned.dec.mops, rawMop{kind: mopRead}) // a micro-op before, as in a batch
		s := txnScan{val: &scanned.dec.txnValue}
		n, ok := s.ReadValue(b)
		if !ok {
			if len(scanned.dec.mops) != 1 || len(scanned.dec.list) != 0 {
				t.Fatalf("declined %q and left %d micro-ops, %d elements", b, len(scanned.dec.mops), len(scanned.dec.list))
			}
			return
		}
		v := b[:n]
		if !json.Valid(v) {
			t.Fatalf("read %q of %q, which is not JSON", v, b)
		}
		if s.null != (string(v) == "null") {
			t.Fatalf("%q: null %v", v, s.null)
		}
		ev := txnEvent{taken: true}
		ev.mop, ev.n, ev.null = s.keep()
		rec := scanned.commit(&ev)
		for i := range scanned.dec.mops {
			scanned.dec.mops[i].rawKey = 0 // txnDecoder keeps none
		}
		plain := txnDecoder{in: newTxnInterner()}
		plain.mops = append(plain.mops, rawMop{kind: mopRead})
		if err := plain.decodeMore(v); err != nil {
			t.Fatalf("read %q, which txnDecoder refuses: %v", v, err)
		}
		if rec.mop != 1 || int(rec.n) != len(plain.mops)-1 {
			t.Fatalf("%q: record %+v, txnDecoder has %d micro-ops", v, rec, len(plain.mops)-1)
		}
		if !reflect.DeepEqual(scanned.dec.txnValue, plain.txnValue) {
			t.Fatalf("%q:\nscan    %+v\ndecoder %+v", v, scanned.dec.txnValue, plain.txnValue)
		}
		if !reflect.DeepEqual(scanned.dec.in.keyText, plain.in.keyText) {
			t.Fatalf("%q: keys %v, txnDecoder's %v", v, scanned.dec.in.keyText, plain.in.keyText)
		}
	})
}

// TestTxnScanReadsWrittenValues: the values of the histories txngen and the workloads
// write are read by txnScan, so that the single parse is not lost to a silent decline.
func TestTxnScanReadsWrittenValues(t *testing.T) {
	for _, model := range []string{ListAppendModel, RWRegisterModel} {
		for _, op := range genTxnHistory(model, 2000, 16, 8, 0.01, 3) {
			if len(op.Value) == 0 {
				continue
			}
			s := txnScan{val: &txnValue{}}
			if n, ok := s.ReadValue(append(op.Value, '}')); !ok || n != len(op.Value) {
				t.Fatalf("%s: declined %s", model, op.Value)
			}
		}
	}
}

// txnJSONL writes ops as an indoubt history of model, as the Writer writes it.
func txnJSONL(t testing.TB, model string, ops []histories.Op) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"header":{"format":"indoubt-history/1","workload":"%s","model":"%s","seed":1}}`+"\n", model, model)
	for _, op := range ops {
		line, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readerChecked checks the history data as `indoubt check` does: by CheckReader, or
// with values false by CheckStream over a Reader that reads every value itself, the
// rest of the file read for an error of its own when the check stopped early. It
// returns the result, the check's error, and the Reader's.
func readerChecked(data []byte, model string, partial, values bool) (Result, string, string) {
	rd, err := histories.NewReader(bytes.NewReader(data), "h.jsonl")
	if err != nil {
		return Result{}, "", err.Error()
	}
	rd.Partial = partial
	var res Result
	if values {
		res, err = CheckReader(context.Background(), rd, Options{Model: model})
	} else {
		res, err = CheckStream(context.Background(), rd.Header(), rd.Next, Options{Model: model})
	}
	if err != nil && res.Verdict == 0 && rd.Err() == nil {
		for {
			if _, nerr := rd.Next(); nerr != nil {
				break
			}
		}
	}
	delete(res.Details, "check_ms")
	return res, errString(err), errString(rd.Err())
}

// checkReaderSame fails t unless data checks the same for model ("": the header's) with
// values read once (txnScan) as read by the Reader and decoded again.
func checkReaderSame(t *testing.T, name string, data []byte, model string) {
	t.Helper()
	for _, partial := range []bool{false, true} {
		got, gerr, grd := readerChecked(data, model, partial, true)
		want, werr, wrd := readerChecked(data, model, partial, false)
		if gerr != werr || grd != wrd || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s (partial %v):\nvalues read once: %q %q %+v\nread twice:       %q %q %+v", name, partial, gerr, grd, got, werr, wrd, want)
		}
	}
}

// damageValues are values put in place of a line's: other forms of the same micro-ops
// that the general reading takes, values that are no transaction, and values that are
// not JSON.
var damageValues = []string{
	`[["append","k1",1],["r","k2",[1,2]]]`, `[ ["append", 1, 100001] ]`, `[["r",1]]`, `[["r",-0,null]]`,
	`[["append",1,1234567890123456789]]`, `[["append",1,1.5]]`, `[["append",[1,2],5]]`, `[["w","k\u00e9",7]]`,
	`[["r",3,[1,2,3]],["append",3,4],["r",3,[1,2,3,4]]]`, `[["r",3,[-4,2]]]`, `[["r",3,5]]`, `[["w",3,6],["r",3,6]]`,
	`null`, `[]`, `{"a":1}`, `[["x",1,2]]`, `[["w",1,null]]`, `[["append",1,01]]`, `[["r",1,[1,]]]`, `[[`,
}

// TestCheckReaderEqualsCheckStream holds the single reading of transactional values
// (CheckReader, txnScan) to the Reader's and txnDecoder's two, on random histories of
// both models and on each of them damaged, a line at a time: values of other forms,
// values that are no transaction or not JSON, lines cut short, bytes changed, lines
// repeated or dropped, completions without a value, fields after the value. Result,
// the check's error and the Reader's error must all be the same.
func TestCheckReaderEqualsCheckStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for _, model := range []string{ListAppendModel, RWRegisterModel} {
		for seed := range uint64(4) {
			ops := genTxnHistory(model, 300, 4+int(seed)*4, 4, 0.05, seed)
			data := txnJSONL(t, model, ops)
			checkReaderSame(t, fmt.Sprintf("%s seed %d", model, seed), data, "")
			lines := strings.SplitAfter(string(data), "\n")
			for i := range 60 {
				l := slicesClone(lines)
				at := 1 + rng.IntN(len(l)-2)
				line := l[at]
				var what string
				switch k := rng.IntN(10); k {
				case 0:
					v := damageValues[rng.IntN(len(damageValues))]
					if j := strings.Index(line, `"value":`); j >= 0 {
						end := strings.LastIndex(line, "}")
						l[at] = line[:j] + `"value":` + v + line[end:]
					}
					what = "value " + v
				case 1:
					l[at] = line[:rng.IntN(len(line))]
					what = "cut"
				case 2:
					j := rng.IntN(len(line))
					const bytes = "[]{},:\"0-a "
					l[at] = line[:j] + string(bytes[rng.IntN(len(bytes))]) + line[j+1:]
					what = "byte changed"
				case 3:
					l[at] = line + line
					what = "repeated"
				case 4:
					l[at] = ""
					what = "dropped"
				case 5:
					if j := strings.Index(line, `,"value":`); j >= 0 {
						l[at] = line[:j] + "}\n"
					}
					what = "no value"
				case 6:
					l[at] = strings.Replace(line, "}\n", `,"op_id":"1-2","conn":"127.0.0.1:1","error":"x"}`+"\n", 1)
					what = "fields after the value"
				case 7:
					l[at] = strings.Replace(line, `"ok"`, `"fail"`, 1)
					what = "failed"
				case 9:
					// An unknown or failed completion with null for a value: what its
					// invocation asked is what it did.
					for j := at; j < len(l); j++ {
						if strings.Contains(l[j], `"type":"ok"`) {
							v := []string{`"info"`, `"fail"`}[rng.IntN(2)]
							e := strings.LastIndex(l[j], "}")
							l[j] = strings.Replace(l[j][:strings.Index(l[j], `"value":`)], `"ok"`, v, 1) + `"value":null` + l[j][e:]
							at = j
							break
						}
					}
					what = "completion of null"
				case 8:
					l = l[:at+1]
					l[at] = strings.TrimSuffix(line, "\n")
					what = "last line without newline"
				}
				checkReaderSame(t, fmt.Sprintf("%s seed %d damage %d at line %d (%s)", model, seed, i, at+1, what), []byte(strings.Join(l, "")), "")
			}
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// FuzzCheckReader: any input checks the same with values read once as read twice.
func FuzzCheckReader(f *testing.F) {
	for _, model := range []string{ListAppendModel, RWRegisterModel} {
		data := txnJSONL(f, model, genTxnHistory(model, 12, 3, 2, 0.2, 1))
		f.Add(data)
		f.Add(bytes.Replace(data, []byte(`"ok"`), []byte(`"info"`), 3))
		f.Add(bytes.Replace(data, []byte(`[["`), []byte(`[ ["`), 2))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The model is given: a header changed to name a register model would start a
		// search that can take any time.
		checkReaderSame(t, "fuzz list-append", data, ListAppendModel)
		checkReaderSame(t, "fuzz rw-register", data, RWRegisterModel)
	})
}

// BenchmarkTxnScan reads the values of a list-append history as the Reader's
// ValueReader does (scan), beside txnDecoder decoding the same values (decoder), the
// reference it replaces: txnScan also checks them as JSON, which the Reader did before.
func BenchmarkTxnScan(b *testing.B) {
	var values [][]byte
	for _, op := range genTxnHistory(ListAppendModel, 20000, 16, 16, 0, 1) {
		if len(op.Value) > 0 {
			values = append(values, append(op.Value, '}'))
		}
	}
	b.Run("scan", func(b *testing.B) {
		s := txnScan{val: &txnValue{}}
		for b.Loop() {
			for _, v := range values {
				s.val.mops, s.val.list = s.val.mops[:0], s.val.list[:0]
				if _, ok := s.ReadValue(v); !ok {
					b.Fatalf("declined %s", v)
				}
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		d := txnDecoder{in: newTxnInterner()}
		for b.Loop() {
			for _, v := range values {
				if err := d.decode(v[:len(v)-1]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// cancelAfter reads r and, after n bytes, cancels and fails every read with ctx's
// error, as indoubt check's reader of the file does on SIGINT.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
	ctx    context.Context
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		return 0, c.ctx.Err()
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= k
	return k, err
}

// TestTxnInterruptedWhileRead: a transactional check whose reader fails because ctx
// ended, wherever in the history, is interrupted (Unknown, no error), as CheckStream
// says, whether the checking goroutine saw ctx end first or the reader's error.
func TestTxnInterruptedWhileRead(t *testing.T) {
	for _, model := range []string{ListAppendModel, RWRegisterModel} {
		data := txnJSONL(t, model, genTxnHistory(model, 20000, 16, 8, 0, 1))
		for _, at := range []int{300, 64 << 10, len(data) / 2, len(data) - 100} {
			for _, values := range []bool{true, false} {
				ctx, cancel := context.WithCancel(context.Background())
				src := &cancelAfter{r: bytes.NewReader(data), n: at, cancel: cancel, ctx: ctx}
				rd, err := histories.NewReader(src, "h.jsonl")
				if err != nil {
					t.Fatal(err)
				}
				var res Result
				if values {
					res, err = CheckReader(ctx, rd, Options{})
				} else {
					res, err = CheckStream(ctx, rd.Header(), rd.Next, Options{})
				}
				cancel()
				if err != nil || res.Verdict != Unknown || !strings.Contains(res.Summary, "interrupted") {
					t.Fatalf("%s cut at %d (values read once %v): %v %v %s", model, at, values, err, res.Verdict, res.Summary)
				}
			}
		}
	}
}
