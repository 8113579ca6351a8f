package indoubttest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
)

// opSpan is one client operation as the join sees it.
type opSpan struct {
	id, f       string
	invoke, end int64 // ns since the start; end -1 while open
	outcome     histories.Type
	value       string
	retried     []string
	signs       []int64 // times the client showed trouble: retries, a completion not ok
	conns       []string
}

// joined is a fault event and the operation it hit, when one could be named.
type joined struct {
	e  toxics.Event
	op *opSpan // nil: not attributed
	// candidates are the operations in flight when the fault fired, when op is nil.
	candidates []string
}

// join attributes each fault event to the operation it hit: the one that named the
// event's connection (Op.Conn); else the operation in flight whose next sign of trouble
// (a retried attempt, or a completion other than ok) came soonest after the event, each
// sign matched to one event: a cut or a drop closes the connection, and the client
// notices at once. Without such a sign, the only operation in flight; else the event
// is left unattributed, with its candidates: the ground truth is evidence, and a guess
// would not be.
func join(ops []histories.Op, events []toxics.Event, tries map[string]*attempts, start time.Time) []joined {
	all, _ := histories.Pair(ops) // Check has refused a history that does not pair
	order := make([]*opSpan, 0, len(all))
	for _, o := range all {
		s := &opSpan{id: o.Invoke.OpID, f: o.Invoke.F, invoke: o.Invoke.Time, end: -1}
		if a := tries[s.id]; a != nil {
			s.retried, s.conns = a.retried, a.conns
			s.signs = append(s.signs, a.retriedAt...)
		}
		if c := o.Complete; c != nil {
			s.end, s.outcome, s.value = c.Time, c.Type, string(c.Value)
			if c.Type != histories.OK {
				s.signs = append(s.signs, c.Time)
			}
		}
		order = append(order, s)
	}
	used := map[*opSpan]int{} // signs consumed, per operation, in time order
	out := make([]joined, 0, len(events))
	for _, e := range events {
		at := e.Time.Sub(start).Nanoseconds()
		j := joined{e: e}
		var inFlight []*opSpan
		var best *opSpan
		bestGap := int64(-1)
		for _, s := range order {
			for _, c := range s.conns {
				if c == e.Conn && e.Conn != "" {
					j.op = s
				}
			}
			if s.invoke > at || s.end >= 0 && at > s.end {
				continue
			}
			inFlight = append(inFlight, s)
			for k := used[s]; k < len(s.signs); k++ {
				if s.signs[k] >= at {
					if gap := s.signs[k] - at; bestGap < 0 || gap < bestGap {
						best, bestGap = s, gap
					}
					break
				}
			}
		}
		switch {
		case j.op != nil:
		case best != nil:
			j.op = best
			for k := used[best]; k < len(best.signs); k++ {
				if best.signs[k] >= at {
					used[best] = k + 1
					break
				}
			}
		case len(inFlight) == 1:
			j.op = inFlight[0]
		default:
			for _, s := range inFlight {
				j.candidates = append(j.candidates, s.id)
			}
		}
		out = append(out, j)
	}
	return out
}

// explain writes the verdict in sentences: the causes the ground truth names first, then
// the checker's findings, then what the faults did.
func explain(m Model, res checker.Result, cerr error, ev []joined) []string {
	if cerr != nil {
		return []string{fmt.Sprintf("indoubttest: the history cannot be checked as %s: %v", m.Name, cerr)}
	}
	invalid := res.Verdict == checker.Invalid
	t := tallyFaults(m, ev, invalid)
	causes := append(t.causes, twiceCauses(m, ev, t.twice, t.twiceOrder)...)
	lines := verdictLines(m, res, causes)
	return append(lines, t.notes(invalid)...)
}

// faultTally is what the fault events, each with the operation it hit, say about the
// client's code.
type faultTally struct {
	cuts, drops, unattributed int
	cutRetried, dropRetried   int // retried operations whose commit had, had not applied
	causes                    []string
	// twice counts, per operation retried after an applied commit and then told ok in
	// an invalid history, the applied commits that hit it; twiceOrder lists them.
	twice      map[*opSpan]int
	twiceOrder []*opSpan
}

// nounOf names op as the model does, or by its function.
func nounOf(m Model, op *opSpan) string {
	if m.Noun != "" {
		return m.Noun
	}
	return op.f
}

// tallyFaults counts the events by kind and by what the client did after them, and
// names as causes the failures reported for commits that had applied.
func tallyFaults(m Model, ev []joined, invalid bool) faultTally {
	t := faultTally{twice: map[*opSpan]int{}}
	for _, j := range ev {
		applied := j.e.Truth == toxics.Applied
		if j.e.Kind == toxics.CommitCut {
			t.cuts++
		} else {
			t.drops++
		}
		if j.op == nil {
			t.unattributed++
			continue
		}
		retried := len(j.op.retried) > 0
		switch {
		case applied && retried && j.op.outcome == histories.OK && invalid:
			if t.twice[j.op] == 0 {
				t.twiceOrder = append(t.twiceOrder, j.op)
			}
			t.twice[j.op]++
		case applied && j.op.outcome == histories.Fail:
			t.causes = append(t.causes, fmt.Sprintf("%s %s: %s, yet your code reported it failed: it had applied (report an error after a lost connection as unknown: Op.Info, or Op.Done)", nounOf(m, j.op), j.op.id, describe(j.e)))
		case applied && retried:
			t.cutRetried++
		case !applied && retried:
			t.dropRetried++
		}
	}
	return t
}

// twiceCauses names, in the order they began, the operations whose applied commit the
// client retried to an ok: each applied once per commit that hit it, and once more.
func twiceCauses(m Model, ev []joined, twice map[*opSpan]int, order []*opSpan) []string {
	var causes []string
	sort.SliceStable(order, func(a, b int) bool { return order[a].invoke < order[b].invoke })
	for _, op := range order {
		noun := nounOf(m, op)
		times := "twice"
		if n := twice[op]; n > 1 {
			times = fmt.Sprintf("%d times", n+1)
		}
		var what string
		for _, j := range ev {
			if j.op == op && j.e.Kind == toxics.CommitCut {
				what = describe(j.e)
				break
			}
		}
		retried := "retried"
		if n := twice[op]; n > 1 {
			what += fmt.Sprintf(" %d times", n)
			retried = "retried each time"
		}
		causes = append(causes, fmt.Sprintf("%s %s: %s, your code %s and was told ok: the %s applied %s", noun, op.id, what, retried, noun, times))
	}
	return causes
}

// verdictLines leads with the verdict, then the causes the ground truth names (when it
// names some, before the checker's own summary), then the first anomalies.
func verdictLines(m Model, res checker.Result, causes []string) []string {
	var lines []string
	switch res.Verdict {
	case checker.Valid:
		lines = append(lines, fmt.Sprintf("indoubttest: %s check passed: %s", m.Name, res.Summary))
	case checker.Invalid:
		lead := fmt.Sprintf("indoubttest: %s check failed: %s", m.Name, res.Summary)
		if len(causes) > 0 {
			lead = fmt.Sprintf("indoubttest: %s check failed; the proxy's ground truth names the cause:", m.Name)
		}
		lines = append(lines, lead)
	default:
		lines = append(lines, fmt.Sprintf("indoubttest: %s check could not decide: %s", m.Name, res.Summary))
	}
	const maxCauses = 10
	for i, c := range causes {
		if i == maxCauses {
			lines = append(lines, fmt.Sprintf("  ... and %d more", len(causes)-maxCauses))
			break
		}
		lines = append(lines, "  "+c)
	}
	if len(causes) > 0 {
		lines = append(lines, "the checker: "+res.Summary)
	}
	for i, a := range res.Anomalies {
		if i == 5 {
			lines = append(lines, fmt.Sprintf("  ... and %d more anomalies (results.json)", len(res.Anomalies)-5))
			break
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", a.Kind, a.Explanation))
	}
	return lines
}

// notes says which faults fired and what the retries they drew can and cannot show.
func (t faultTally) notes(invalid bool) []string {
	var notes []string
	switch {
	case t.cuts+t.drops == 0:
		notes = append(notes, "no commit fault fired: arm some (Server.Arm(\"commit-cut:0.2\")) to test your retries")
	default:
		notes = append(notes, fmt.Sprintf("faults: %d cut after the commit applied, %d dropped before the server (not applied)%s", t.cuts, t.drops, unattr(t.unattributed)))
	}
	if t.dropRetried > 0 && t.cuts == 0 {
		notes = append(notes, fmt.Sprintf("your code retried %d dropped commits: a drop never applied, so any retry of it is safe; these faults cannot tell a naive retry from an idempotent one (arm commit-cut for that)", t.dropRetried))
	}
	if t.cutRetried > 0 && !invalid {
		notes = append(notes, fmt.Sprintf("your code retried %d operations whose commit had applied, and the check holds: those retries did not apply twice", t.cutRetried))
	}
	return notes
}

func unattr(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d not attributed to one operation: several were in flight)", n)
}

// describe says what the proxy did, in the words of the issue's example: "the proxy cut
// the reply after COMMIT (the commit had applied)".
func describe(e toxics.Event) string {
	stmt := strings.Join(strings.Fields(e.Statement), " ")
	if len(stmt) > 40 {
		stmt = stmt[:40] + "..."
	}
	if e.Kind == toxics.CommitCut {
		if e.Protocol == (toxics.Postgres{}).Name() && e.Tag != "" {
			// PostgreSQL's command tag is the proof itself: COMMIT, UPDATE 1.
			return fmt.Sprintf("the proxy cut the reply after %s (the commit had applied)", strings.TrimSpace(e.Tag))
		}
		return fmt.Sprintf("the proxy cut the reply to %s (it had applied)", command(e.Statement))
	}
	return fmt.Sprintf("the proxy dropped %q before the server (not applied)", stmt)
}

// command is the command a statement starts with: EVALSHA, insert.
func command(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return "the commit"
	}
	return strings.Trim(f[0], "{:\"")
}
