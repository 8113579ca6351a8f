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
