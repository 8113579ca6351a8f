package budget

import "strconv"

// AppendJSON appends o as encoding/json encodes it (histories.JSONAppender): every
// decrement's outcome is encoded into the history on the operation's path, and
// reflection was a measurable share of the harness's cost per operation.
func (o Outcome) AppendJSON(b []byte) []byte {
	b = append(b, `{"applied":`...)
	b = strconv.AppendBool(b, o.Applied)
	b = append(b, `,"balance":`...)
	b = strconv.AppendInt(b, o.Balance, 10)
	if o.Conflicts != 0 {
		b = append(b, `,"conflicts":`...)
		b = strconv.AppendInt(b, int64(o.Conflicts), 10)
	}
	if o.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	return append(b, '}')
}

// plainOutcome reads the two values AppendJSON writes for a decrement without conflicts
// or replay, {"applied":true|false,"balance":N}, without encoding/json: Summary reads
// every operation's. Anything else is declined (ok false), for encoding/json.
func plainOutcome(v []byte) (o Outcome, ok bool) {
	const pre = `{"applied":`
	if len(v) < len(pre) || string(v[:len(pre)]) != pre {
		return o, false
	}
	rest := v[len(pre):]
	switch {
	case len(rest) > 4 && string(rest[:4]) == "true":
		o.Applied, rest = true, rest[4:]
	case len(rest) > 5 && string(rest[:5]) == "false":
		rest = rest[5:]
	default:
		return o, false
	}
	const bal = `,"balance":`
	if len(rest) < len(bal)+2 || string(rest[:len(bal)]) != bal || rest[len(rest)-1] != '}' {
		return o, false
	}
	n, err := strconv.ParseInt(string(rest[len(bal):len(rest)-1]), 10, 64)
	if err != nil {
		return Outcome{}, false
	}
	num := rest[len(bal) : len(rest)-1]
	if num[0] == '+' || len(num) > 1 && num[0] == '0' || len(num) > 2 && num[0] == '-' && num[1] == '0' {
		return Outcome{}, false
	}
	o.Balance = n
	return o, true
}
