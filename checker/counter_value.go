package checker

import "encoding/json"

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
	ok = scanFlat(b, func(key, lit []byte) bool {
		var field **int64
		switch string(key) {
		case "read":
			field = &v.Read
		case "wrote":
			field = &v.Wrote
		case "value":
			field = &v.Value
		default:
			return scanFlatOther(key, lit, "read", "wrote", "value")
		}
		n, ok := budgetScanInt(lit)
		if !ok {
			return false
		}
		*field = &n
		return true
	})
	return v, ok
}
