package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	tp "github.com/Shopify/toxiproxy/v2/toxics"
)

// The rule for the values of toxiproxy's standard toxics, shared by Proxy.AddToxic and
// the HTTP API. toxiproxy takes any number: a negative latency or timeout, a rate of 0
// KB/s, a toxicity of 2, and values whose arithmetic overflows inside its toxics (a
// jitter of 2^62 ms panics in rand.Int63n, a slicer whose size_variation is not below
// its average_size slices out of bounds or recurses without end, a rate above 2^56
// KB/s slices at a negative index: each takes the whole process down). The rule
// refuses each with a message naming the attribute, so that a toxic either does what
// it says or is not added.

// maxMillis bounds the durations of toxics, in milliseconds: a day is longer than any
// run, and its products stay far from overflow.
const maxMillis = 24 * 60 * 60 * 1000

// maxRate bounds bandwidth, in KB/s (1 TB/s).
const maxRate = 1 << 30

// maxSlice bounds the slicer's average_size, in bytes.
const maxSlice = 1 << 30

// decodeToxic reads the body of a request that adds a toxic the way toxiproxy's
// ToxicCollection.AddToxicJson does (v2.12.0, toxic_collection.go): encoding/json into
// its wrapper, whose keys match case-insensitively, then the attributes into a new
// toxic of the registered type. So the values checked are those toxiproxy will use. A
// body toxiproxy would refuse (not JSON, an unknown type) gives an error too.
func decodeToxic(body []byte) (*tp.ToxicWrapper, error) {
	w := &tp.ToxicWrapper{Stream: "downstream", Toxicity: 1, Toxic: new(tp.NoopToxic)}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(w); err != nil {
		return nil, err
	}
	if tp.New(w) == nil {
		return nil, fmt.Errorf("invalid toxic type %q", w.Type)
	}
	attrs := &struct {
		Attributes any `json:"attributes"`
	}{w.Toxic}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(attrs); err != nil {
		return nil, err
	}
	return w, nil
}

// decodeUpdate reads the body of a request that updates toxic t the way toxiproxy's
// UpdateToxicJson does: the attributes and the toxicity over their current values. It
// decodes into a copy and returns it; t is left alone.
func decodeUpdate(t *tp.ToxicWrapper, body []byte) (*tp.ToxicWrapper, error) {
	cur := reflect.ValueOf(t.Toxic)
	if cur.Kind() != reflect.Pointer || cur.IsNil() {
		return nil, errors.New("toxic has no attributes")
	}
	val := reflect.New(cur.Elem().Type())
	val.Elem().Set(cur.Elem())
	attrs := &struct {
		Attributes any     `json:"attributes"`
		Toxicity   float32 `json:"toxicity"`
	}{val.Interface(), t.Toxicity}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(attrs); err != nil {
		return nil, err
	}
	out := *t
	out.Toxic = val.Interface().(tp.Toxic)
	out.Toxicity = attrs.Toxicity
	return &out, nil
}

// checkToxic applies the rule to a decoded toxic.
func checkToxic(w *tp.ToxicWrapper) error {
	if !(w.Toxicity >= 0 && w.Toxicity <= 1) {
		return fmt.Errorf("toxicity %v: want a probability from 0 to 1", w.Toxicity)
	}
	type bound struct {
		name      string
		v, lo, hi int64
		want      string
	}
	var bounds []bound
	ms := func(name string, v int64) bound {
		return bound{name, v, 0, maxMillis, "a whole number of milliseconds from 0 to 86400000 (a day)"}
	}
	switch t := w.Toxic.(type) {
	case *tp.LatencyToxic:
		bounds = []bound{ms("latency", t.Latency), ms("jitter", t.Jitter)}
	case *tp.TimeoutToxic:
		bounds = []bound{ms("timeout", t.Timeout)}
	case *tp.ResetToxic:
		bounds = []bound{ms("timeout", t.Timeout)}
	case *tp.SlowCloseToxic:
		bounds = []bound{ms("delay", t.Delay)}
	case *tp.BandwidthToxic:
		bounds = []bound{{"rate", t.Rate, 1, maxRate, fmt.Sprintf("KB/s, a whole number from 1 to %d", maxRate)}}
	case *tp.LimitDataToxic:
		bounds = []bound{{"bytes", t.Bytes, 0, 1 << 62, "a whole number of bytes, 0 or more"}}
	case *tp.SlicerToxic:
		avg := int64(t.AverageSize)
		bounds = []bound{
			{"average_size", avg, 1, maxSlice, fmt.Sprintf("a whole number of bytes from 1 to %d", maxSlice)},
			{"size_variation", int64(t.SizeVariation), 0, max(avg-1, 0), "a whole number of bytes from 0 to average_size - 1"},
			{"delay", int64(t.Delay), 0, maxMillis * 1000, "a whole number of microseconds from 0 to 86400000000 (a day)"},
		}
	case *tp.NoopToxic:
	default:
		return fmt.Errorf("invalid toxic type %q", w.Type)
	}
	for _, b := range bounds {
		if b.v < b.lo || b.v > b.hi {
			return fmt.Errorf("%s %d: want %s", b.name, b.v, b.want)
		}
	}
	return nil
}
