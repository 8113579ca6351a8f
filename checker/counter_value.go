package checker

import "encoding/json"

// counterValue is the part of a completion value the checker reads, as encoding/json
// reads it: a nil field is absent (or null).
type counterValue struct {
	Read  *int64 `json:"read"`
	Wrote *int64 `json:"wrote"`
	Value *int64 `json:"value"`
}

// counterFields is a counterValue without the pointers, which cost an allocation each
// on the fast path: has says which fields are present.
type counterFields struct {
	read, wrote, value int64
	has                uint8 // counterHasRead | counterHasWrote | counterHasValue
}

const (
	counterHasRead uint8 = 1 << iota
	counterHasWrote
	counterHasValue
)

// fields returns v as counterFields.
func (v counterValue) fields() counterFields {
	var c counterFields
	if v.Read != nil {
		c.read, c.has = *v.Read, c.has|counterHasRead
	}
	if v.Wrote != nil {
		c.wrote, c.has = *v.Wrote, c.has|counterHasWrote
	}
	if v.Value != nil {
		c.value, c.has = *v.Value, c.has|counterHasValue
	}
	return c
}

// counterParseValue reads a counter completion value ({"read":4,"wrote":5},
// {"value":7}). The flat objects indoubt writes take a fast path; anything else goes
// through encoding/json, whose reading the fast path must equal (FuzzCounterValue holds
// it to that). It was most of the counter checker's time.
func counterParseValue(v []byte) (counterFields, error) {
	if c, ok := counterScanFlat(v); ok {
		return c, nil
	}
	var c counterValue
	err := json.Unmarshal(v, &c)
	return c.fields(), err
}

// counterScanFlat reads an object whose keys are plain ASCII strings and whose values
// are integers (or, for keys the checker does not read, true, false or null). It
// declines anything else, null for a key it reads, and a key that matches one only
// case-insensitively.
func counterScanFlat(b []byte) (v counterFields, ok bool) {
	ok = scanFlat(b, func(key, lit []byte) bool {
		var field *int64
		var bit uint8
		switch string(key) {
		case "read":
			field, bit = &v.read, counterHasRead
		case "wrote":
			field, bit = &v.wrote, counterHasWrote
		case "value":
			field, bit = &v.value, counterHasValue
		default:
			return scanFlatOther(key, lit, "read", "wrote", "value")
		}
		n, ok := budgetScanInt(lit)
		if !ok {
			return false
		}
		*field, v.has = n, v.has|bit
		return true
	})
	return v, ok
}
