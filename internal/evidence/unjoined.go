package evidence

import (
	"fmt"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Unjoined says why the fault events that joined no attempt of the history did not,
// one sentence per reason with its count, so that "N fault events, 0 joined" never
// stands without a word why; nil when every event joined. spans are the ones given to
// Join. The reasons, in the order they are told:
//
//   - the clocks do not meet: no event falls within the history's time at all (a
//     history on another clock, or the events of another run);
//   - outside every operation: before the first invocation, between operations or
//     after the last completion (a connection the history does not record: setup, a
//     final read through the proxy);
//   - several operations in flight on a connection the history does not name: time
//     alone cannot tell which one the fault hit (the history should name conn);
//   - on a connection the history names, at a time none of the operations recorded on
//     it was running.
func Unjoined(events []FaultEvent, spans []Span, ops []histories.Op) []string {
	byConn := NewAttempts(spans)
	var left []FaultEvent
	for _, e := range events {
		if _, ok := byConn.Hit(e); !ok {
			left = append(left, e)
		}
	}
	if len(left) == 0 {
		return nil
	}
	all, _ := histories.Pair(ops)
	var ivs [][2]int64
	lo, hi := int64(1<<63-1), int64(-1<<63)
	namesConn := false
	for _, o := range all {
		if !o.Invoke.IsClient() {
			continue
		}
		end := o.End()
		ivs = append(ivs, [2]int64{o.Invoke.Time, end})
		lo = min(lo, o.Invoke.Time)
		hi = max(hi, o.Invoke.Time)
		if o.Complete != nil {
			hi = max(hi, o.Complete.Time)
			namesConn = namesConn || o.Complete.Conn != ""
			for _, f := range o.Complete.Failed {
				namesConn = namesConn || f.Conn != ""
			}
		} else {
			hi = end
		}
		namesConn = namesConn || o.Invoke.Conn != ""
	}
	n := len(left)
	if len(ivs) > 0 {
		within := 0
		elo, ehi := left[0].Time, left[0].Time
		for _, e := range left {
			if lo <= e.Time && e.Time <= hi {
				within++
			}
			elo, ehi = min(elo, e.Time), max(ehi, e.Time)
		}
		if within == 0 && n == len(events) {
			return []string{fmt.Sprintf("none of the %d fault events falls within the history's time (its operations run %s, the events %s): the two are not on one clock, or not of one run; a history joined to `indoubt proxy --events` records time in Unix nanoseconds",
				n, stretch(lo, hi), stretch(elo, ehi))}
		}
	}
	var outside, several, idle int
	for _, e := range left {
		inFlight := 0
		for _, iv := range ivs {
			if iv[0] <= e.Time && e.Time <= iv[1] {
				inFlight++
			}
		}
		switch {
		case inFlight == 0:
			outside++
		case len(byConn[e.Conn]) > 0:
			idle++
		default:
			several++
		}
	}
	var out []string
	if outside > 0 {
		out = append(out, fmt.Sprintf("%d %s outside every operation (before the first invocation, between operations or after the last completion): on a connection used for something the history does not record, such as setup or a final read through the proxy", outside, fell(outside)))
	}
	if several > 0 {
		s := fmt.Sprintf("%d %s while several operations were in flight, on a connection the history does not name, so time alone cannot tell which operation it hit: record conn, the client's local address, on each invocation and failed attempt", several, fell(several))
		if !namesConn {
			s += " (this history names no connection at all)"
		}
		out = append(out, s)
	}
	if idle > 0 {
		out = append(out, fmt.Sprintf("%d %s on a connection the history names, at a time none of the operations recorded on it was running: the connection did something the history does not record", idle, fell(idle)))
	}
	return out
}

func fell(n int) string {
	if n == 1 {
		return "event fell"
	}
	return "events fell"
}

// stretch shows a stretch of a clock: Unix times as times of day, other clocks in
// seconds.
func stretch(from, to int64) string {
	show := func(t int64) string {
		if t >= unixNanos2001 {
			return time.Unix(0, t).UTC().Format("2006-01-02 15:04:05.000 UTC")
		}
		if t == 1<<63-1 {
			return "the end"
		}
		return fmt.Sprintf("%.3fs", float64(t)/1e9)
	}
	return "from " + show(from) + " to " + show(to)
}
