package checker

import "bytes"

// scanFlat walks an object whose keys are plain ASCII strings and whose values are
// bare literals (true, false, null, integers), handing each key and literal to take.
// It declines (false) anything else, and whatever take declines; the fast value
// decoders share it so that they read the same subset of JSON.
func scanFlat(b []byte, take func(key, lit []byte) bool) bool {
	i := budgetSkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = budgetSkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return budgetSkipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			if c := b[j]; c == '\\' || c < 0x20 || c >= 0x80 {
				return false
			}
			j++
		}
		if j >= len(b) {
			return false
		}
		key := b[i+1 : j]
		i = budgetSkipSpace(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = budgetSkipSpace(b, i+1)
		j = i
		for j < len(b) && (b[j] == '-' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z') {
			j++
		}
		lit := b[i:j]
		i = budgetSkipSpace(b, j)
		if !take(key, lit) {
			return false
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = budgetSkipSpace(b, i+1)
		case '}':
			return budgetSkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// scanFlatOther accepts a key the decoder does not read, whose literal must still be
// valid JSON. A key that equals one of read only case-insensitively is declined:
// encoding/json would fill that field from it.
func scanFlatOther(key, lit []byte, read ...string) bool {
	for _, r := range read {
		if bytes.EqualFold(key, []byte(r)) {
			return false
		}
	}
	_, isInt := budgetScanInt(lit)
	return isInt || string(lit) == "true" || string(lit) == "false" || string(lit) == "null"
}
