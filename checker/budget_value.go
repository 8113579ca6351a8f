package checker

import "encoding/json"

// budgetOutcome is the part of a completion value the checker reads.
type budgetOutcome struct {
	applied, hasApplied bool
	balance             int64
	hasBalance          bool
}

// budgetParseOutcome reads a completion value ({"applied":true,"balance":-1},
// {"balance":7}). The flat objects indoubt writes take a fast path that allocates
// nothing; anything else goes through encoding/json, whose reading the fast path
// must equal (FuzzBudgetValue holds it to that).
func budgetParseOutcome(v []byte) (budgetOutcome, error) {
	if o, ok := budgetScanFlat(v); ok {
		return o, nil
	}
	var raw struct {
		Applied *bool  `json:"applied"`
		Balance *int64 `json:"balance"`
	}
	if err := json.Unmarshal(v, &raw); err != nil {
		return budgetOutcome{}, err
	}
	var o budgetOutcome
	if raw.Applied != nil {
		o.applied, o.hasApplied = *raw.Applied, true
	}
	if raw.Balance != nil {
		o.balance, o.hasBalance = *raw.Balance, true
	}
	return o, nil
}

// budgetScanFlat reads an object whose keys are plain ASCII strings and whose values
// are true, false, null or integers. It declines (ok false) anything else, including
// a key that matches applied or balance only case-insensitively, as encoding/json
// would accept it.
func budgetScanFlat(b []byte) (o budgetOutcome, ok bool) {
	ok = scanFlat(b, func(key, lit []byte) bool {
		switch string(key) {
		case "applied":
			switch string(lit) {
			case "true":
				o.applied, o.hasApplied = true, true
			case "false":
				o.applied, o.hasApplied = false, true
			default:
				return false
			}
		case "balance":
			n, ok := budgetScanInt(lit)
			if !ok {
				return false
			}
			o.balance, o.hasBalance = n, true
		default:
			return scanFlatOther(key, lit, "applied", "balance")
		}
		return true
	})
	return o, ok
}

func budgetSkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// budgetScanInt reads a JSON integer of at most 18 digits, which cannot overflow.
func budgetScanInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
