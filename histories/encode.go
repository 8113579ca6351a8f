package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// appendOp appends op as one JSON object, the same fields and names as encoding/json
// gives Op, without reflection: the Writer encodes two events per operation, and at
// tens of thousands of operations a second encoding/json was a measurable share of the
// harness's own cost. A value that is not valid JSON is an error, as with
// encoding/json; one with line breaks is compacted, so that a line stays one event.
func appendOp(b []byte, op Op) ([]byte, error) {
	if op.Type < Invoke || op.Type > Info {
		return b, fmt.Errorf("invalid event type %d", uint8(op.Type))
	}
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, op.Index, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, op.Time, 10)
	b = append(b, `,"process":`...)
	b = strconv.AppendInt(b, int64(op.Process), 10)
	b = append(b, `,"type":"`...)
	b = append(b, typeNames[op.Type]...)
	b = append(b, `","f":`...)
	b = appendString(b, op.F)
	if op.Key != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, op.Key)
	}
	if len(op.Value) > 0 {
		b = append(b, `,"value":`...)
		v := op.Value
		// skipValue accepts only what encoding/json accepts (FuzzDecodeFast), and does
		// it without json.Valid's scanner state machine: this is on every event's path.
		if end, ok := skipValue(v, 0, 0); (!ok || end != len(v)) && !json.Valid(v) {
			return b, fmt.Errorf("event value is not valid JSON: %q", truncate(v))
		}
		if bytes.ContainsAny(v, "\r\n") {
			var c bytes.Buffer
			json.Compact(&c, v)
			v = c.Bytes()
		}
		b = append(b, v...)
	}
	if op.OpID != "" {
		b = append(b, `,"op_id":`...)
		b = appendString(b, op.OpID)
	}
	if op.Conn != "" {
		b = append(b, `,"conn":`...)
		b = appendString(b, op.Conn)
	}
	if op.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, op.Error)
	}
	if op.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(op.Attempt), 10)
	}
	if len(op.Failed) > 0 {
		// Only operations that met errors carry it: encoding/json is cheap enough here.
		f, err := json.Marshal(op.Failed)
		if err != nil {
			return b, err
		}
		b = append(b, `,"failed_attempts":`...)
		b = append(b, f...)
	}
	if op.Ended != "" {
		b = append(b, `,"ended":`...)
		b = appendString(b, op.Ended)
	}
	if op.Conflicts != 0 {
		b = append(b, `,"conflicts":`...)
		b = strconv.AppendInt(b, int64(op.Conflicts), 10)
	}
	return append(b, '}'), nil
}

func truncate(v []byte) []byte {
	if len(v) > 64 {
		return v[:64]
	}
	return v
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript; escape them as
		// encoding/json does.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
