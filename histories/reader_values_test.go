package histories

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// keepValues is a ValueReader that reads the values skipValue accepts, except those
// with a 7 in them, and keeps each: taken, the Op of the event it read comes without
// it.
type keepValues struct{ last []byte }

func (k *keepValues) ReadValue(b []byte) (int, bool) {
	n, ok := skipValue(b, 0, 0)
	if !ok || bytes.IndexByte(b[:n], '7') >= 0 {
		return 0, false
	}
	k.last = append(k.last[:0], b[:n]...)
	return n, true
}

// readWithValues reads data with a keepValues as the Reader's Values, putting back
// each value it read, by NextInto into the same Op each time, and returns the events,
// the error that ended the reading, Err, and how many values it read.
func readWithValues(data []byte, partial bool) ([]Op, error, error, int) {
	r, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		return nil, err, err, 0 // the first line's, read by NewReader
	}
	r.Partial = partial
	kv := &keepValues{}
	r.Values = kv
	var ops []Op
	taken := 0
	var op Op
	for {
		err := r.NextInto(&op)
		if err == io.EOF {
			return ops, nil, r.Err(), taken
		}
		if err != nil {
			return ops, err, r.Err(), taken
		}
		if r.ValueRead() {
			if op.Value != nil {
				return ops, io.ErrUnexpectedEOF, nil, taken
			}
			op.Value = append([]byte(nil), kv.last...)
			taken++
		}
		ops = append(ops, op)
	}
}

// FuzzReaderValues: a Reader whose values a ValueReader reads gives the same events by
// NextInto, once each value it read is put back, and the same errors, as one that
// reads them itself by Next; Err is the first error either returned.
func FuzzReaderValues(f *testing.F) {
	f.Add([]byte(decodeSeeds[0] + "\n" + decodeSeeds[1] + "\n"))
	f.Add([]byte(`{"index":0,"type":"invoke","f":"txn","value":[["r",1,null]]}` + "\n" +
		`{"index":1,"type":"ok","f":"txn","value":[["r",1,[1,2]]],"value":[]}` + "\n"))
	f.Add([]byte(`{"index":0,"type":"ok","value":[1],"Value":[2]}` + "\n" + `{"index":1,"type":"ok","value":[3]}`))
	for _, s := range decodeSeeds {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, partial := range []bool{false, true} {
			got, gerr, gfirst, _ := readWithValues(data, partial)
			if gerr == io.ErrUnexpectedEOF {
				t.Fatalf("partial %v: a value read by Values is also in the Op", partial)
			}
			want, werr := readAllOf(data, partial)
			if !reflect.DeepEqual(got, want) || errString(gerr) != errString(werr) || errString(gfirst) != errString(werr) {
				t.Fatalf("partial %v:\nvalues read: %v %v (Err %v)\nby the Reader: %v %v", partial, got, gerr, gfirst, want, werr)
			}
		}
	})
}

// TestReaderValuesTakesWrittenLines: a ValueReader reads the values of the lines the
// Writer writes, so that a consumer's single parse is not lost to the Reader's.
func TestReaderValuesTakesWrittenLines(t *testing.T) {
	data := []byte(decodeSeeds[0] + "\n" + decodeSeeds[1] + "\n" + decodeSeeds[3] + "\n" + decodeSeeds[4] + "\n")
	data = bytes.Replace(data, []byte(`"index":3`), []byte(`"index":5`), 1)
	data = bytes.Replace(data, []byte(`"index":4`), []byte(`"index":7`), 1)
	// Each completion of process 0 follows its invocation.
	data = bytes.Replace(data, []byte(`{"index":5`), []byte(`{"index":4,"time":5,"process":0,"type":"invoke","f":"read","key":"k1"}`+"\n"+`{"index":5`), 1)
	data = bytes.Replace(data, []byte(`{"index":7`), []byte(`{"index":6,"time":5,"process":0,"type":"invoke","f":"cas","value":[1,2]}`+"\n"+`{"index":7`), 1)
	_, err, _, taken := readWithValues(data, false)
	if err != nil || taken != 4 {
		t.Fatalf("read %d values (want 4), error %v", taken, err)
	}
}

// TestReaderErrIsTheFirst: Err keeps the first error Next returned, however many follow.
func TestReaderErrIsTheFirst(t *testing.T) {
	data := decodeSeeds[1] + "\n" + decodeSeeds[0] + "\n" + `{"index":0,"type":"nope"}` + "\n"
	r, err := NewReader(bytes.NewReader([]byte(data)), "fuzz")
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for range 4 {
		if _, err := r.Next(); err != nil && err != io.EOF && first == nil {
			first = err
		}
	}
	if first == nil || r.Err() != first {
		t.Fatalf("Err %v, first error %v", r.Err(), first)
	}
}
