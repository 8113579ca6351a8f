package histories

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestReaderLineLimitFollowsTheHistory: a line may be as long as the history before it
// (a final read that names every operation), MaxLine at least; one longer than that is
// refused at its line, and so is an endless first line, after MaxLine bytes.
func TestReaderLineLimitFollowsTheHistory(t *testing.T) {
	var before bytes.Buffer
	before.WriteString(`{"header":{"format":"indoubt-history/1","workload":"insert","model":"exactly-once","seed":1}}` + "\n")
	n := 0
	for before.Len() < 3*MaxLine/2 {
		fmt.Fprintf(&before, `{"index":%d,"time":%d,"process":0,"type":"invoke","f":"apply","op_id":"0-%d"}`+"\n", 2*n, 2*n, n)
		fmt.Fprintf(&before, `{"index":%d,"time":%d,"process":0,"type":"ok","f":"apply","op_id":"0-%d"}`+"\n", 2*n+1, 2*n+1, n)
		n++
	}
	final := func(size int) string {
		var b strings.Builder
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":1,"type":"ok","f":"read","op_id":"final-0","value":{`, 2*n+1, 2*n+1)
		for i := 0; b.Len() < size-40; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"0-%d":1`, i)
		}
		b.WriteString("}}\n")
		return b.String()
	}
	invoke := fmt.Sprintf(`{"index":%d,"time":%d,"process":1,"type":"invoke","f":"read","op_id":"final-0"}`+"\n", 2*n, 2*n)
	read := func(s string) (int, error) {
		r, err := NewReader(strings.NewReader(s), "h.jsonl")
		if err != nil {
			return 0, err
		}
		ops, err := r.ReadAll()
		return len(ops), err
	}

	long := final(MaxLine + MaxLine/4) // longer than MaxLine, shorter than the history before it
	if got, err := read(before.String() + invoke + long); err != nil || got != 2*n+2 {
		t.Fatalf("a final read of %d bytes after %d bytes of history: %d events, %v", len(long), before.Len(), got, err)
	}
	tooLong := final(2*before.Len() + 1000)
	_, err := read(before.String() + invoke + tooLong)
	want := fmt.Sprintf("h.jsonl line %d: line longer than", 2*n+3)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a line longer than the history before it: %v, want %q", err, want)
	}
	// An endless first line is refused after MaxLine bytes, without reading the rest.
	endless := io.MultiReader(strings.NewReader(`{"index":0,"value":"`), &zeros{left: 1 << 40})
	if _, err := NewReader(endless, "zero"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("zero line 1: line longer than %d bytes", MaxLine)) {
		t.Fatalf("endless first line: %v", err)
	}
}

// zeros is an io.Reader of left bytes 'a', counting down.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	z.left -= n
	return int(n), nil
}

// TestReaderRefusesNumbersNoHistoryHolds: a negative index, a negative process other
// than the nemesis's, and a completion earlier than its invocation are refused at
// their line.
func TestReaderRefusesNumbersNoHistoryHolds(t *testing.T) {
	const header = `{"header":{"format":"indoubt-history/1","workload":"register","model":"register","seed":1}}` + "\n"
	for _, tc := range []struct{ name, in, want string }{
		{"negative index", `{"index":-5,"time":0,"process":0,"type":"invoke","f":"read"}` + "\n",
			"h.jsonl line 2: event index -5 is negative"},
		{"process -7", `{"index":0,"time":0,"process":-7,"type":"invoke","f":"write","value":1}` + "\n",
			"h.jsonl line 2: process -7: a process is a worker's number (0 or more) or -1 for the nemesis"},
		{"completion before invocation", `{"index":0,"time":100,"process":3,"type":"invoke","f":"read"}` + "\n" + `{"index":1,"time":99,"process":3,"type":"ok","f":"read","value":1}` + "\n",
			"h.jsonl line 3: completion of process 3 at time 99 is earlier than its invocation at time 100 on line 2"},
		{"large process", `{"index":0,"time":100,"process":900000,"type":"invoke","f":"read"}` + "\n" + `{"index":1,"time":99,"process":900000,"type":"ok","f":"read","value":1}` + "\n",
			"h.jsonl line 3: completion of process 900000 at time 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(header+tc.in), "h.jsonl")
			if err == nil {
				_, err = r.ReadAll()
			}
			if err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// The nemesis's -1 stands, and so does a completion at its invocation's time.
	ok := header + `{"index":0,"time":5,"process":-1,"type":"info","f":"start"}` + "\n" +
		`{"index":1,"time":7,"process":0,"type":"invoke","f":"read"}` + "\n" + `{"index":2,"time":7,"process":0,"type":"ok","f":"read","value":1}` + "\n"
	r, err := NewReader(strings.NewReader(ok), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if ops, err := r.ReadAll(); err != nil || len(ops) != 3 {
		t.Fatalf("%d ops, %v", len(ops), err)
	}
}

// TestReaderReadsAMillionOpIDs reads an exactly-once history of a million applies whose
// final read names every op id on one line of about 14 MB, as a run of that size writes
// it.
func TestReaderReadsAMillionOpIDs(t *testing.T) {
	const n = 1_000_000
	var b bytes.Buffer
	b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"insert","model":"exactly-once","seed":1}}` + "\n")
	for i := range n {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"apply","op_id":"%d-%d"}`+"\n", 2*i, 2*i, i%16, i%16, i/16)
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":%d,"type":"ok","f":"apply","op_id":"%d-%d"}`+"\n", 2*i+1, 2*i+1, i%16, i%16, i/16)
	}
	fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":16,"type":"invoke","f":"read","op_id":"final-0"}`+"\n", 2*n, 2*n)
	start := b.Len()
	fmt.Fprintf(&b, `{"index":%d,"time":%d,"process":16,"type":"ok","f":"read","op_id":"final-0","value":{`, 2*n+1, 2*n+1)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d-%d":1`, i%16, i/16)
	}
	b.WriteString("}}\n")
	line := b.Len() - start
	r, err := NewReader(&b, "eo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	var last Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("a %d-byte final read: %v", line, err)
		}
		events, last = events+1, op
	}
	if events != 2*n+2 || len(last.Value) != line-len(`{"index":2000001,"time":2000001,"process":16,"type":"ok","f":"read","op_id":"final-0","value":}`)-1 {
		t.Fatalf("%d events, the last %d bytes of value, from a %d-byte line", events, len(last.Value), line)
	}
}
