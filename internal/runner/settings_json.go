package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ReadConfig reads config.json, as Run writes it (Config.MarshalJSON), through Settings:
// each setting's value under its JSON key, as its flag would write it, is set as the
// flag sets it. A value left zero in the file is not set: config.json holds what the
// run took, defaults filled in. A run over several servers has its DSNs under "dsns",
// and each is the DSN setting's.
//
// config.json may come from elsewhere: it is data, never instructions. A key ReadConfig
// does not know is ignored, as is a setting that config.json cannot hold (the output
// directory is read, the caller decides where its runs go). Bounds are not checked:
// the run took these values; Validate refuses what a run cannot take. The error names
// the key at fault.
func ReadConfig(b []byte) (Config, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return Config{}, err
	}
	var c Config
	for _, s := range Settings {
		v, _ := lookup(doc, s.JSON) // nil when absent: not set
		vals, err := flagValues(s, v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", s.JSON, err)
		}
		if s.Field == "DSN" {
			more, _ := lookup(doc, "dsns")
			dsns, err := flagValues(s, more)
			if err != nil {
				return Config{}, fmt.Errorf("dsns: %w", err)
			}
			vals = append(vals, dsns...)
		}
		for _, v := range vals {
			if err := s.set(&c, v); err != nil {
				return Config{}, fmt.Errorf("%s: %w", s.JSON, err)
			}
		}
	}
	return c, nil
}

// lookup is the value at a dotted path of doc ("txn.keys").
func lookup(doc map[string]any, path string) (any, bool) {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// flagValues is a JSON value as s's flag writes it: none when it is zero (null, "",
// 0, false, an empty list). A duration is in nanoseconds, as time.Duration encodes; a
// list of words is one comma list unless s is repeatable.
func flagValues(s Setting, v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if v == "" {
			return nil, nil
		}
		return []string{v}, nil
	case bool:
		if !v {
			return nil, nil
		}
		return []string{"true"}, nil
	case json.Number:
		if s.Kind == KindDuration {
			n, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s is not a duration in nanoseconds", v)
			}
			if n == 0 {
				return nil, nil
			}
			return []string{time.Duration(n).String()}, nil
		}
		if f, err := v.Float64(); err == nil && f == 0 {
			return nil, nil
		}
		return []string{v.String()}, nil
	case []any:
		var out []string
		for _, e := range v {
			w, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("want a list of strings")
			}
			out = append(out, w)
		}
		if s.Kind != KindList && len(out) > 0 {
			return []string{strings.Join(out, ",")}, nil
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a %s", kindNames[s.Kind])
}

// kindNames name the kinds of value in errors.
var kindNames = map[Kind]string{
	KindText: "string", KindInt: "number", KindFloat: "number", KindDuration: "number of nanoseconds",
	KindBool: "boolean", KindList: "list of strings",
}
