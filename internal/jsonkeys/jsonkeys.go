// Package jsonkeys refuses JSON objects that give a key twice, which encoding/json
// reads last-wins without a word.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Twice refuses a JSON object in raw that gives a key twice: encoding/json keeps the
// last silently, so that {"type":"ok", ..., "type":"fail"} is read as a fail, and a
// header's second "model" overrides its first. Keys are compared as encoding/json
// matches them to a struct's fields, case folded ("type" and "Type" name one field).
// With deep, every object inside raw is held to it too; without, only the outermost
// (an event's own fields; its value is the checker's to read).
func Twice(raw []byte, deep bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// keys holds, per container open at the point read, the keys seen in it: nil
	// for an array, or for an object not checked.
	var keys []map[string]bool
	wantKey := false
	for {
		t, err := dec.Token()
		if err != nil {
			return nil // the decoder that read raw first has said what is wrong with it
		}
		switch t := t.(type) {
		case json.Delim:
			switch t {
			case '{':
				var m map[string]bool
				if deep || len(keys) == 0 {
					m = map[string]bool{}
				}
				keys = append(keys, m)
				wantKey = true
				continue
			case '[':
				keys = append(keys, nil)
			case '}', ']':
				keys = keys[:len(keys)-1]
				if len(keys) == 0 {
					return nil
				}
			}
		case string:
			if wantKey {
				if m := keys[len(keys)-1]; m != nil {
					k := strings.ToLower(t)
					if m[k] {
						return fmt.Errorf("key %q twice in one object", t)
					}
					m[k] = true
				}
				wantKey = false
				continue
			}
		}
		// After a value: in an object checked, its next key comes next (in an
		// array, or an object not checked, nothing is recorded).
		wantKey = len(keys) > 0 && keys[len(keys)-1] != nil
	}
}
