package results

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
)

// RoleEvent is the function of the nemesis events in which a launched topology's data
// nodes report their own role, as the harness polls them: a value {"node": "n1",
// "role": "primary"} on every change (role primary, replica or down; "reported" keeps
// the server's own word, master or slave for Redis). Two nodes that each report
// primary are a split brain.
const RoleEvent = "role"

// WriteRoleEvent is the function of the nemesis events in which a node's role is read
// from whether its database takes writes, beside its RoleEvent (Patroni's nodes: the
// harness asks each PostgreSQL pg_is_in_recovery() on a connection of its own): the
// same value, role primary when it takes writes. Split brain and partitions read the
// RoleEvents only; results.json's leaders.writes is the timeline of these.
const WriteRoleEvent = "write-role"

// Roles a RoleEvent carries.
const (
	RolePrimary = "primary"
	RoleReplica = "replica"
	RoleDown    = "down"
)

// NodesIn lists, sorted, the nodes that roles (node to role) gives the role role.
func NodesIn(roles map[string]string, role string) []string {
	var ns []string
	for n, r := range roles {
		if r == role {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	return ns
}

// Partition is one partition between the nodes of a launched topology as it happened:
// results.json's partitions. Times are seconds from the start of the run.
type Partition struct {
	// Fault is the schedule entry; Shape its shape.
	Fault string `json:"fault"`
	Shape string `json:"shape"`
	// StartS is when the grudge was on every node; EndS when the heal was.
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// Reach is the ground truth: for each node, the nodes it received from (itself
	// included). Components are the groups that reached each other both ways, when the
	// grudge split the nodes that way.
	Reach      map[string][]string `json:"reach"`
	Components [][]string          `json:"components,omitempty"`
	// AckedDuring counts the client operations other than reads acknowledged while it
	// lasted, by the node their clients stood beside.
	AckedDuring map[string]int64 `json:"acked_during"`
	// LostWrites counts the acknowledged writes the checker found lost after it, or
	// after a process fault inside it (a failover it led to); LostOps names those the
	// checker names.
	LostWrites int64    `json:"lost_writes"`
	LostOps    []string `json:"lost_ops,omitempty"`
	// SplitBrainS is how long two or more nodes each reported themselves primary, from
	// its start until one alone did again (or the run ended).
	SplitBrainS float64 `json:"split_brain_s"`
	// HealS is the time from the heal until at most one node reported itself primary
	// (0 when the roles never split, or came together before the heal); nil when they
	// had not come together by the end of the run.
	HealS *float64 `json:"heal_s,omitempty"`
	// FirstAckS is the time from the heal to the first acknowledgement of a client
	// operation invoked after it; nil when none was.
	FirstAckS *float64 `json:"first_ack_after_s,omitempty"`
	// Error is what went wrong applying or healing it.
	Error string `json:"error,omitempty"`
}

// SplitBrain is a window in which two or more data nodes each reported themselves
// primary: results.json's split_brain.
type SplitBrain struct {
	StartS    float64 `json:"start_s"`
	EndS      float64 `json:"end_s"`
	DurationS float64 `json:"duration_s"`
	// Primaries are the nodes that reported primary throughout.
	Primaries []string `json:"primaries"`
	// Acked counts, per primary, the client operations other than reads acknowledged in
	// the window whose clients could reach that primary alone among them, by the ground
	// truth of the partition in force; Examples names the first of each. Outside a
	// partition every client reaches every node, and no acknowledgement is placed.
	Acked    map[string]int64  `json:"acked"`
	Examples map[string]string `json:"examples,omitempty"`
	// WritesOnBoth is set when two of the primaries each acknowledged at least one:
	// the split brain took writes on both sides.
	WritesOnBoth bool `json:"writes_on_both"`
	// Fault is the partition the window began in, if any.
	Fault string `json:"fault,omitempty"`
}

// splitWindow is a time with two or more primaries; closed is false for one still
// open at the end of the history.
type splitWindow struct {
	from, to  int64
	primaries []string
	closed    bool
}

// roleChange is one RoleEvent.
type roleChange struct {
	at         int64
	node, role string
}

func roleChanges(ops []histories.Op) []roleChange {
	var out []roleChange
	for _, op := range ops {
		if op.IsClient() || op.F != RoleEvent {
			continue
		}
		var v struct{ Node, Role string }
		if json.Unmarshal(op.Value, &v) != nil || v.Node == "" {
			continue
		}
		out = append(out, roleChange{at: op.Time, node: v.Node, role: v.Role})
	}
	return out
}

// splitWindows returns the windows with two or more primaries, each with the set that
// held throughout it; end is the time a window still open at the end is closed at.
func splitWindows(changes []roleChange, end int64) []splitWindow {
	type win = splitWindow
	var out []win
	roles := map[string]string{}
	var open *win
	for _, c := range changes {
		roles[c.node] = c.role
		p := NodesIn(roles, RolePrimary)
		if open != nil && !slices.Equal(open.primaries, p) {
			open.to, open.closed = c.at, true
			out = append(out, *open)
			open = nil
		}
		if open == nil && len(p) >= 2 {
			open = &win{from: c.at, primaries: p}
		}
	}
	if open != nil {
		open.to = max(end, open.from)
		out = append(out, *open)
	}
	return out
}

// PartitionTimeline is results.json's partitions and split_brain, from the history
// alone: the partitions' nemesis events with their ground truth (outages.Partitions),
// the nodes' role reports (RoleEvent), the client operations, and the checker's lost
// writes. The runner fills them this way, and so can `indoubt check`.
func PartitionTimeline(ops []histories.Op, lost []checker.LostWrite) ([]Partition, []SplitBrain) {
	parts := outages.Partitions(ops)
	var last int64
	for _, op := range ops {
		last = max(last, op.Time)
	}
	wins := splitWindows(roleChanges(ops), last)
	if len(parts) == 0 && len(wins) == 0 {
		return nil, nil
	}
	all, _ := histories.Pair(ops) // the checker has refused a history that does not pair
	side := sides(parts)
	// in returns the partition in force at t, or nil.
	in := func(t int64) *outages.Partition {
		for i := range parts {
			if p := &parts[i]; t >= p.Start && (p.End < 0 || t < p.End) {
				return p
			}
		}
		return nil
	}
	var splits []SplitBrain
	for _, w := range wins {
		sb := SplitBrain{StartS: secs(w.from), EndS: secs(w.to), DurationS: secs(w.to - w.from), Primaries: w.primaries, Acked: map[string]int64{}}
		if p := in(w.from); p != nil {
			sb.Fault = p.Fault
		}
		for _, o := range all {
			if o.Type() != histories.OK || o.Invoke.F == "read" || histories.IsFinalReadID(o.Invoke.OpID) || o.Complete.Time < w.from || o.Complete.Time >= w.to {
				continue
			}
			p := in(o.Complete.Time)
			if p == nil {
				continue
			}
			node := side(o.Complete.Conn)
			var reach []string
			for _, prim := range w.primaries {
				if node != "" && slices.Contains(p.Reach[prim], node) {
					reach = append(reach, prim)
				}
			}
			if len(reach) != 1 {
				continue
			}
			if sb.Acked[reach[0]] == 0 {
				if sb.Examples == nil {
					sb.Examples = map[string]string{}
				}
				sb.Examples[reach[0]] = o.Invoke.OpID
			}
			sb.Acked[reach[0]]++
		}
		n := 0
		for _, c := range sb.Acked {
			if c > 0 {
				n++
			}
		}
		sb.WritesOnBoth = n >= 2
		splits = append(splits, sb)
	}
	procs := outages.ProcessFaults(ops)
	out := make([]Partition, 0, len(parts))
	for _, p := range parts {
		end := p.End
		if end < 0 {
			end = last
		}
		r := Partition{Fault: p.Fault, Shape: p.Shape, StartS: secs(p.Start), EndS: secs(end), Reach: p.Reach, Components: p.Components,
			AckedDuring: map[string]int64{}, Error: p.Error}
		first := int64(-1)
		for _, o := range all {
			if o.Type() != histories.OK || histories.IsFinalReadID(o.Invoke.OpID) {
				continue
			}
			if o.Invoke.F != "read" && o.Complete.Time >= p.Start && o.Complete.Time < end {
				if n := side(o.Complete.Conn); n != "" {
					r.AckedDuring[n]++
				}
			}
			if o.Invoke.Time >= end && (first < 0 || o.Complete.Time < first) {
				first = o.Complete.Time
			}
		}
		if first >= 0 {
			s := secs(first - end)
			r.FirstAckS = &s
		}
		// The split brain that began in it, and how long after the heal it lasted.
		healed, together := int64(0), true
		for _, w := range wins {
			if w.from >= p.Start && w.from < end {
				r.SplitBrainS += secs(w.to - w.from)
				healed = max(healed, w.to)
				together = together && w.closed
			}
		}
		if together {
			s := secs(max(healed-end, 0))
			r.HealS = &s
		}
		for _, l := range lost {
			if l.Fault == p.Fault || insideFault(procs, l.Fault, p.Start, end) {
				r.LostWrites += max(l.Count, 1)
				if l.OpID != "" && l.Count <= 1 {
					r.LostOps = append(r.LostOps, l.OpID)
				}
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		// Split brain without a partition (a cluster on loopback, a paused leader):
		// no partitions, as results.json (omitempty) reads them back.
		out = nil
	}
	return out, splits
}

// insideFault reports whether the process fault named spec began in [from, to).
func insideFault(procs []outages.ProcessFault, spec string, from, to int64) bool {
	for _, f := range procs {
		if f.Fault == spec && f.Start >= from && f.Start < to {
			return true
		}
	}
	return false
}

// sides returns the function from a client connection's local address to the node its
// clients stand beside, from the partitions' ground truth; "" for another address.
func sides(parts []outages.Partition) func(conn string) string {
	byIP := map[string]string{}
	for _, p := range parts {
		for n, ip := range p.Clients {
			byIP[ip] = n
		}
	}
	return func(conn string) string {
		host, _, err := net.SplitHostPort(conn)
		if err != nil {
			return ""
		}
		return byIP[host]
	}
}

// String is the partition in one line, as the console prints it.
func (p Partition) String() string {
	s := fmt.Sprintf("%s: %s from %.2fs to %.2fs, %d acknowledged writes lost", p.Fault, p.Shape, p.StartS, p.EndS, p.LostWrites)
	switch {
	case p.SplitBrainS == 0 && p.HealS != nil:
		s += ", no two nodes reported primary at once"
	case p.HealS != nil:
		s += fmt.Sprintf(", split brain %.2fs, one primary %.2fs after the heal", p.SplitBrainS, *p.HealS)
	default:
		s += fmt.Sprintf(", split brain %.2fs, two primaries still at the end", p.SplitBrainS)
	}
	if p.FirstAckS != nil {
		s += fmt.Sprintf(", first ack %.2fs after", *p.FirstAckS)
	}
	if p.Error != "" {
		s += ": " + p.Error
	}
	return s
}

// String is the split brain in one line, with the operations that prove writes on
// both sides.
func (s SplitBrain) String() string {
	out := fmt.Sprintf("split brain %.2fs to %.2fs (%.2fs): %v each reported primary", s.StartS, s.EndS, s.DurationS, s.Primaries)
	if len(s.Acked) > 0 {
		out += ", acknowledged"
		for _, p := range s.Primaries {
			if n := s.Acked[p]; n > 0 {
				out += fmt.Sprintf(" %d through %s (first %s)", n, p, s.Examples[p])
			}
		}
	}
	if s.WritesOnBoth {
		out += ": writes accepted on both sides"
	}
	return out
}
