package checker

import (
	"bytes"
	"encoding/json"
)

// counterParseValue reads a counter completion value ({"read":4,"wrote":5},
// {"value":7}). The flat objects indoubt writes take a fast path; anything else goes
// through encoding/json, whose reading the fast path must equal (FuzzCounterValue holds
// it to that). It was most of the counter checker's time.
func counterParseValue(v []byte) (counterValue, error) {
	if c, ok := counterScanFlat(v); ok {
		return c, nil
	}
	var c counterValue
	err := json.Unmarshal(v, &c)
	return c, err
}

// counterScanFlat reads an object whose keys are plain ASCII strings and whose values
// are integers (or, for keys the checker does not read, true, false or null). It
// declines anything else, null for a key it reads, and a key that matches one only
// case-insensitively.
func counterScanFlat(b []byte) (v counterValue, ok bool) {
	i := budgetSkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return v, false
	}
	i = budgetSkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return v, budgetSkipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return v, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			if c := b[j]; c == '\\' || c < 0x20 || c >= 0x80 {
				return v, false
			}
			j++
		}
		if j >= len(b) {
			return v, false
		}
		key := b[i+1 : j]
		i = budgetSkipSpace(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return v, false
		}
		i = budgetSkipSpace(b, i+1)
		j = i
		for j < len(b) && (b[j] == '-' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z') {
			j++
		}
		lit := b[i:j]
		i = budgetSkipSpace(b, j)
		var field **int64
		switch string(key) {
		case "read":
			field = &v.Read
		case "wrote":
			field = &v.Wrote
		case "value":
			field = &v.Value
		}
		switch {
		case field != nil:
			n, ok := budgetScanInt(lit)
			if !ok {
				return v, false
			}
			*field = &n
		case bytes.EqualFold(key, []byte("read")) || bytes.EqualFold(key, []byte("wrote")) || bytes.EqualFold(key, []byte("value")):
			return v, false
		default:
			if _, isInt := budgetScanInt(lit); !isInt && string(lit) != "true" && string(lit) != "false" && string(lit) != "null" {
				return v, false
			}
		}
		if i >= len(b) {
			return v, false
		}
		switch b[i] {
		case ',':
			i = budgetSkipSpace(b, i+1)
		case '}':
			return v, budgetSkipSpace(b, i+1) == len(b)
		default:
			return v, false
		}
	}
}
