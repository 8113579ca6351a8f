package histories

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Jepsen histories come in two shapes that indoubt imports for checking:
//
// history.edn, as Jepsen and Knossos write it: a vector, a list or a bare sequence of op
// maps such as
//
//	{:type :invoke, :f :cas, :process 3, :value [1 2], :time 18734201, :index 7}
//
// and the lines jepsen.util logs while a test runs, as in the etcd logs that porcupine
// and the linearizability-checker project test against:
//
//	INFO  jepsen.util - 3	:invoke	:cas	[1 2]
//
// Both become []Op in file order, Index and Time set, ready for the checkers. Values
// become JSON: integers stay integers, keywords and symbols become strings of their
// names, vectors, lists and sets become arrays, maps become objects.
//
// What nil means differs, and the register checker needs to know:
//   - In EDN an ok read of nil carries no information (Knossos's convention: a client
//     that could not tell the value answers nil, and the model accepts it in any
//     state), so it is imported with Value left empty. An indoubt history uses an
//     empty Value for the same thing, and JSON null for "the register is absent".
//   - In the log format nil means the key is absent, and is imported as JSON null.
//     A read that failed or timed out (:fail :read :timed-out) has no value at all.
//
// Jepsen's independent checker wraps values as [key value] tuples. For read, write and
// cas operations ReadJepsenEDN recognises them (a write or read whose value is a vector,
// a cas whose value is [key [from to]]) and sets Key to the key's text: an integer's
// digits, a keyword's or symbol's name, a string itself.

// jepsenNemesisProcess is the process name Jepsen gives the nemesis; ops of it become
// events of the Nemesis process.
const jepsenNemesisProcess = "nemesis"

// JepsenOptions tune ReadJepsenEDN and ReadJepsenLog. The zero value is strict: input
// that is not entirely a history of the format is refused, so that garbage is never
// read as a short (and valid) history.
type JepsenOptions struct {
	// SkipBadLines skips what is not an op instead of refusing the history: for the
	// log format, lines that are not jepsen.util op lines (as in a whole Jepsen log,
	// with the lines of other loggers); for EDN, top-level values that are not op maps
	// or not well-formed ops. EDN that does not parse is refused all the same, and the
	// input must still hold at least one operation.
	SkipBadLines bool
	// F, when set, is the function of an EDN op whose :f is nil or absent. Elle's own
	// test histories leave :f out of their transactions ({:type :ok, :value [...]}),
	// and Elle reads every op as a transaction: F "txn" reads them as it does. Unset,
	// such an op is refused.
	F string
	// SeveralOpen lets a process have several operations open at once, each
	// completion closing its process's oldest open invocation, instead of refusing
	// the second invocation as jepsen.history's pair index does (::double-invoke).
	// Elle's own unit tests build such histories, and Elle's transactional checkers
	// read them so, because they never ask which invocation a completion answers.
	// Only the transactional models read such a history: a process's order (and the
	// real-time order of its operations) is then not known, and the checker draws no
	// process or real-time edge from it.
	SeveralOpen bool
}

// jepsenMeta is what an op map said about its own position.
type jepsenMeta struct {
	index, time       int64
	hasIndex, hasTime bool
	line              int
}

// jepsenOp turns one op map into an Op.
func jepsenOp(p *jepsenParser, v jepsenValue) (Op, jepsenMeta, error) {
	var op Op
	m := jepsenMeta{line: v.line}
	if v.kind != jepsenMap {
		return op, m, p.errAt(v.line, "expected an op map, found a %s", v.kind)
	}
	var value, errv *jepsenValue
	hasProcess := false
	for i := 0; i < len(v.items); i += 2 {
		k, val := v.items[i], v.items[i+1]
		if k.kind != jepsenKeyword && k.kind != jepsenString {
			continue
		}
		switch k.text {
		case "type":
			name, ok := jepsenName(val)
			if !ok {
				return op, m, p.errAt(val.line, ":type must be a keyword, found %s", val)
			}
			t, err := ParseType(name)
			if err != nil {
				return op, m, p.errAt(val.line, "unknown op type %s", val)
			}
			op.Type = t
		case "f":
			if val.kind == jepsenNil {
				continue
			}
			name, ok := jepsenName(val)
			if !ok {
				return op, m, p.errAt(val.line, ":f must be a keyword, found %s", val)
			}
			op.F = name
		case "process":
			hasProcess = true
			switch val.kind {
			case jepsenInt:
				n, err := strconv.ParseInt(val.text, 10, 32)
				if err != nil || n < 0 {
					return op, m, p.errAt(val.line, "process %s out of range", val.text)
				}
				op.Process = int(n)
			case jepsenKeyword, jepsenString, jepsenSymbol:
				if val.text != jepsenNemesisProcess {
					return op, m, p.errAt(val.line, ":process %s is neither a worker's number nor :nemesis", val)
				}
				op.Process = Nemesis
			case jepsenNil:
				// No process: not a client's operation (below).
				op.Process = Nemesis
			default:
				return op, m, p.errAt(val.line, ":process must be an integer or :nemesis, found %s", val)
			}
		case "value":
			value = &v.items[i+1]
		case "error":
			errv = &v.items[i+1]
		case "time", "index", "attempt":
			if val.kind == jepsenNil {
				continue
			}
			n, err := strconv.ParseInt(val.text, 10, 64)
			if val.kind != jepsenInt || err != nil {
				return op, m, p.errAt(val.line, ":%s must be an integer, found %s", k.text, val)
			}
			switch k.text {
			case "time":
				m.time, m.hasTime = n, true
			case "index":
				m.index, m.hasIndex = n, true
			default:
				if n < 0 || n > math.MaxInt32 {
					return op, m, p.errAt(val.line, ":attempt %d out of range", n)
				}
				op.Attempt = int(n)
			}
		case "op-id", "conn":
			s, ok := jepsenName(val)
			if !ok && val.kind != jepsenNil {
				s = val.String()
			}
			if k.text == "op-id" {
				op.OpID = s
			} else {
				op.Conn = s
			}
		}
	}
	if op.Type == 0 {
		return op, m, p.errAt(v.line, "op has no :type")
	}
	if !hasProcess {
		// Jepsen's meaning (jepsen.history's client-op?): an op is a client's when its
		// :process is an integer. One without a process is not, and Elle's checkers
		// leave it out (h/client-ops), as they leave out the nemesis's: it is read as
		// an event of the Nemesis process, which no checker checks.
		op.Process = Nemesis
	}
	if op.F == "" && op.Process != Nemesis {
		if p.f == "" {
			return op, m, p.errAt(v.line, "op has no :f")
		}
		op.F = p.f
	}
	if errv != nil && errv.kind != jepsenNil {
		if s, ok := jepsenName(*errv); ok {
			op.Error = s
		} else {
			op.Error = errv.String()
		}
	}
	if value != nil {
		val := *value
		if set, ok := jepsenSetIn(val); ok && op.Process != Nemesis {
			return op, m, p.errAt(set.line, "value holds the set %s: a set has no order, and no model of a client's operations reads one", jepsenLogShow([]byte(set.String())))
		}
		if op.Process != Nemesis {
			if key, inner, ok := jepsenIndependent(op.F, val); ok {
				op.Key, val = key, inner
			}
		}
		// nil is no value: for an ok read this is Knossos's "no information".
		if val.kind != jepsenNil {
			b, err := json.Marshal(jepsenJSON(val))
			if err != nil {
				return op, m, p.errAt(val.line, "value %s: %v", val, err)
			}
			op.Value = b
		}
	}
	return op, m, nil
}

// jepsenSetIn returns the first set in v. Read as an array, a set's elements would
// take an order the history never gave them: a list-append read of #{2 1} is not the
// list [2 1].
func jepsenSetIn(v jepsenValue) (jepsenValue, bool) {
	if v.kind == jepsenSet {
		return v, true
	}
	for _, it := range v.items {
		if s, ok := jepsenSetIn(it); ok {
			return s, true
		}
	}
	return jepsenValue{}, false
}

// jepsenName returns the name of a keyword, symbol or string.
func jepsenName(v jepsenValue) (string, bool) {
	switch v.kind {
	case jepsenKeyword, jepsenSymbol, jepsenString:
		return v.text, true
	}
	return "", false
}

// jepsenIndependent unwraps a [key value] tuple of Jepsen's independent checker from the
// value of a register operation. Plain register values are never ambiguous with it: a
// write's value is an integer, a read's an integer or nil, a cas's [from to] of
// integers, never [key [from to]] or [key nil].
func jepsenIndependent(f string, v jepsenValue) (string, jepsenValue, bool) {
	if v.kind != jepsenVector && v.kind != jepsenList || len(v.items) != 2 {
		return "", v, false
	}
	k, inner := v.items[0], v.items[1]
	switch f {
	case "read", "write":
	case "cas":
		// [key nil] is a completion that echoes no arguments.
		if inner.kind != jepsenVector && inner.kind != jepsenList && inner.kind != jepsenNil {
			return "", v, false
		}
	default:
		return "", v, false
	}
	switch k.kind {
	case jepsenInt, jepsenFloat:
		return k.text, inner, true
	case jepsenKeyword, jepsenSymbol, jepsenString:
		return k.text, inner, true
	}
	return k.String(), inner, true
}

// jepsenJSON converts an EDN value to a value encoding/json marshals without error.
func jepsenJSON(v jepsenValue) any {
	switch v.kind {
	case jepsenNil:
		return nil
	case jepsenBool:
		return v.b
	case jepsenInt:
		return json.Number(v.text)
	case jepsenFloat:
		f, err := strconv.ParseFloat(v.text, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			// Ratios, ##Inf, ##NaN and decimals beyond float64 have no JSON number.
			return v.text
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case jepsenString, jepsenChar, jepsenKeyword, jepsenSymbol:
		// encoding/json would escape invalid UTF-8 as \ufffd; doing it here keeps
		// the bytes of a value the same across an export and a re-import.
		return strings.ToValidUTF8(v.text, "\uFFFD")
	case jepsenMap:
		obj := make(map[string]any, len(v.items)/2)
		for i := 0; i < len(v.items); i += 2 {
			k := v.items[i]
			name, ok := jepsenName(k)
			if !ok {
				name = k.String()
			}
			obj[strings.ToValidUTF8(name, "\uFFFD")] = jepsenJSON(v.items[i+1])
		}
		return obj
	}
	arr := make([]any, len(v.items))
	for i, it := range v.items {
		arr[i] = jepsenJSON(it)
	}
	return arr
}

// ReadJepsenLog reads the op lines Jepsen's jepsen.util logs during a test:
//
//	INFO  jepsen.util - <process> :<type> :<f> <value>
//
// with fields separated by tabs or spaces. nil means absent (JSON null) except on
// invoke, where it means no argument; a keyword value on a fail or info completion
// (:timed-out) is its error, and the value is left empty: the checker takes the
// invocation's. name is used in errors, which give the line. Index and Time are
// positions among the ops read.
//
// Blank lines are skipped. Any other line that is not such an op line refuses the
// history, naming the first, unless opt.SkipBadLines skips them (a whole Jepsen log,
// with the lines of other loggers). Input with no op line at all (empty, random
// bytes, another format) is refused with an error wrapping ErrEmpty.
func ReadJepsenLog(r io.Reader, name string, opt JepsenOptions) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	var ops []Op
	times := openTimes{several: opt.SeveralOpen}
	line := 0
	for sc.Scan() {
		line++
		op, ok, err := jepsenLogLine(sc.Bytes(), name, line)
		if err != nil && !opt.SkipBadLines {
			return nil, err
		}
		if !ok && err == nil && !opt.SkipBadLines && len(bytes.TrimSpace(sc.Bytes())) > 0 {
			return nil, fmt.Errorf("%s line %d: not a jepsen.util op line (--skip-bad-lines skips such lines): %s", name, line, jepsenLogShow(sc.Bytes()))
		}
		if !ok {
			continue
		}
		op.Index, op.Time = int64(len(ops)), int64(len(ops))
		if op.Type == Invoke {
			err = times.invoke(op.Process, op.Time, int64(line))
		} else {
			err = times.complete(op.Process, op.Type, op.Time, int64(line))
		}
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %v", name, line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s line %d: line longer than %d bytes", name, line+1, MaxLine)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s: %w: expected jepsen.util op lines (--format jepsen-log) such as \"INFO  jepsen.util - 3\t:invoke\t:cas\t[1 2]\"", name, ErrEmpty)
	}
	return ops, nil
}

// jepsenLogShow quotes the start of a bad line for an error message.
func jepsenLogShow(b []byte) string {
	const most = 60
	if len(b) > most {
		return strconv.Quote(string(b[:most])) + "..."
	}
	return strconv.Quote(string(b))
}

var jepsenLogMarker = []byte("jepsen.util - ")

// jepsenLogFields splits the first three whitespace-separated fields off b and returns
// them with the trimmed rest; missing fields are nil.
func jepsenLogFields(b []byte) ([3][]byte, []byte) {
	var f [3][]byte
	for i := range f {
		b = bytes.TrimLeft(b, " \t\r")
		end := bytes.IndexAny(b, " \t\r")
		if end < 0 {
			end = len(b)
		}
		if end == 0 {
			return f, nil
		}
		f[i], b = b[:end], b[end:]
	}
	return f, bytes.TrimSpace(b)
}

// jepsenLogLine parses one log line; ok is false for lines that are not ops.
func jepsenLogLine(b []byte, name string, line int) (Op, bool, error) {
	var op Op
	i := bytes.Index(b, jepsenLogMarker)
	if i < 0 {
		return op, false, nil
	}
	fields, text := jepsenLogFields(b[i+len(jepsenLogMarker):])
	if fields[2] == nil || fields[1][0] != ':' {
		return op, false, nil
	}
	proc := string(fields[0])
	if n, err := strconv.ParseInt(proc, 10, 32); err == nil && n >= 0 {
		op.Process = int(n)
	} else if proc == ":"+jepsenNemesisProcess {
		op.Process = Nemesis
	} else {
		return op, false, nil
	}
	errf := func(format string, a ...any) error {
		return fmt.Errorf("%s line %d: %s", name, line, fmt.Sprintf(format, a...))
	}
	t, err := ParseType(string(fields[1][1:]))
	if err != nil {
		return op, false, errf("unknown op type %s", fields[1])
	}
	op.Type = t
	if fields[2][0] != ':' || len(fields[2]) < 2 {
		return op, false, errf("expected an op function keyword, found %q", fields[2])
	}
	op.F = string(fields[2][1:])
	// The value is the rest of the line after the function, in EDN.
	p := newJepsenParser(name, text)
	p.line = line
	v, err := p.next(0, 1)
	if err == errJepsenEnd {
		return op, true, nil
	}
	if err == nil && !p.atEnd() {
		err = errf("more than one value after %s", fields[2])
	}
	if err != nil {
		if op.Process == Nemesis {
			// The nemesis logs free text; keep it rather than refuse the history.
			op.Value = Value(string(text))
			return op, true, nil
		}
		return op, false, err
	}
	switch {
	case v.kind == jepsenNil:
		if op.Type != Invoke {
			op.Value = json.RawMessage("null")
		}
	case v.kind == jepsenKeyword && (op.Type == Fail || op.Type == Info):
		op.Error = v.text
	default:
		b, err := json.Marshal(jepsenJSON(v))
		if err != nil {
			return op, false, errf("value %s: %v", v, err)
		}
		op.Value = b
	}
	return op, true, nil
}

// WriteJepsenEDN writes ops as a Jepsen history.edn: one op map per line, which
// ReadJepsenEDN, Jepsen and Knossos read. Nemesis events get :process :nemesis; a Key
// becomes an independent [key value] tuple (its digits as an integer when it is one);
// OpID, Conn and Attempt become :op-id, :conn and :attempt. JSON values become EDN:
// objects become maps with keyword keys when the key is a valid keyword. An empty Value
// and JSON null both become nil, so a read of an absent register exports as Knossos's
// "no information" nil: EDN has no way to say absent.
func WriteJepsenEDN(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	var b strings.Builder
	for _, op := range ops {
		b.Reset()
		fmt.Fprintf(&b, "{:index %d, :time %d, :type :%s, :process ", op.Index, op.Time, op.Type)
		if op.Process < 0 {
			b.WriteString(":" + jepsenNemesisProcess)
		} else {
			b.WriteString(strconv.Itoa(op.Process))
		}
		if op.F != "" {
			b.WriteString(", :f ")
			jepsenWriteName(&b, op.F)
		}
		b.WriteString(", :value ")
		var val any
		if len(op.Value) > 0 {
			dec := json.NewDecoder(bytes.NewReader(op.Value))
			dec.UseNumber()
			if err := dec.Decode(&val); err != nil {
				return fmt.Errorf("export op %d: value: %w", op.Index, err)
			}
		}
		if op.Key != "" {
			b.WriteByte('[')
			if n, err := strconv.ParseInt(op.Key, 10, 64); err == nil && strconv.FormatInt(n, 10) == op.Key {
				b.WriteString(op.Key)
			} else {
				b.WriteString(jepsenQuote(op.Key))
			}
			b.WriteByte(' ')
			jepsenWriteJSON(&b, val)
			b.WriteByte(']')
		} else {
			jepsenWriteJSON(&b, val)
		}
		if op.Error != "" {
			b.WriteString(", :error " + jepsenQuote(op.Error))
		}
		if op.OpID != "" {
			b.WriteString(", :op-id " + jepsenQuote(op.OpID))
		}
		if op.Conn != "" {
			b.WriteString(", :conn " + jepsenQuote(op.Conn))
		}
		if op.Attempt != 0 {
			fmt.Fprintf(&b, ", :attempt %d", op.Attempt)
		}
		b.WriteString("}\n")
		if _, err := bw.WriteString(b.String()); err != nil {
			return fmt.Errorf("export history: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export history: %w", err)
	}
	return nil
}

// jepsenWriteName writes s as a keyword when it reads back as one, else as a string.
func jepsenWriteName(b *strings.Builder, s string) {
	if jepsenIsKeyword(s) {
		b.WriteString(":" + s)
		return
	}
	b.WriteString(jepsenQuote(s))
}

// jepsenIsKeyword reports whether :s reads back as the keyword named s.
func jepsenIsKeyword(s string) bool {
	if s == "" || s[0] == ':' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isJepsenDelimiter(c) || c == '#' && i == 0 || c < 0x21 || c >= 0x7f {
			return false
		}
	}
	return true
}

// jepsenWriteJSON writes a decoded JSON value as EDN.
func jepsenWriteJSON(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("nil")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(v.String())
	case string:
		b.WriteString(jepsenQuote(v))
	case []any:
		b.WriteByte('[')
		for i, it := range v {
			if i > 0 {
				b.WriteByte(' ')
			}
			jepsenWriteJSON(b, it)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			jepsenWriteName(b, k)
			b.WriteByte(' ')
			jepsenWriteJSON(b, v[k])
		}
		b.WriteByte('}')
	}
}

// jepsenQuote writes s as an EDN string, escaping what the EDN reader requires.
func jepsenQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
