package schedule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Listed faults: a commit fault that fires at one named commit point, instead of at
// the points a seeded roll picks in a window. A shrunk run lists the faults it needs
// this way, so that it fails again without the random decisions of the seed that
// found it:
//
//	commit-cut@commit:N        the N-th commit point the proxy counts, from 1
//	commit-drop@conn:C/txn:T   the T-th transaction (from 1) of the C-th connection the
//	                           proxy accepted (from 0), as faults.jsonl names each fault
//
// See toxics.Pin for what is counted. Only commit-cut and commit-drop can be listed
// (commit-mixed's coin is a random decision, and prepare-cut and prepare-drop are
// commit-cut and commit-drop restricted to PREPARE TRANSACTION, which a listed point
// already names).

// parsePinned parses NAME@commit:N and NAME@conn:C/txn:T. ok is false for a spec of
// another form, which ParseFault goes on to parse.
func parsePinned(spec string) (f Fault, ok bool, err error) {
	body := strings.TrimSpace(spec)
	i := strings.LastIndexByte(body, '@')
	if i < 0 {
		return Fault{}, false, nil
	}
	at := strings.ToLower(strings.TrimSpace(body[i+1:]))
	if !strings.HasPrefix(at, "commit:") && !strings.HasPrefix(at, "conn:") {
		return Fault{}, false, nil
	}
	bad := func(format string, args ...any) (Fault, bool, error) {
		return Fault{}, true, fmt.Errorf("fault %q: %s", spec, fmt.Sprintf(format, args...))
	}
	head := strings.TrimSpace(body[:i])
	name := strings.ReplaceAll(apiFaultName(strings.ReplaceAll(strings.ToLower(head), "-", "_")), "_", "-")
	var kind toxics.Kind
	switch name {
	case "commit-cut":
		kind = toxics.CommitCut
	case "commit-drop":
		kind = toxics.CommitDrop
	default:
		if strings.ContainsAny(head, ":,") {
			return bad("a listed fault fires exactly once at its point: it takes no probability or max (write commit-cut@%s)", at)
		}
		return bad("only commit-cut and commit-drop can be listed at a commit point (commit-mixed's coin is a random decision), not %q", head)
	}
	pin := toxics.Pin{Kind: kind}
	if n, found := strings.CutPrefix(at, "commit:"); found {
		v, err := strconv.ParseUint(strings.TrimSpace(n), 10, 64)
		if err != nil || v < 1 {
			return bad("commit point %q: want its number, from 1, as in commit-cut@commit:3", n)
		}
		pin.Point = v
	} else {
		c, t, found := strings.Cut(strings.TrimPrefix(at, "conn:"), "/")
		t, tok := strings.CutPrefix(strings.TrimSpace(t), "txn:")
		if !found || !tok {
			return bad("want conn:C/txn:T, as in commit-cut@conn:2/txn:5")
		}
		cv, err := strconv.ParseUint(strings.TrimSpace(c), 10, 64)
		if err != nil {
			return bad("connection %q: want its accept index, from 0", c)
		}
		tv, err := strconv.ParseUint(strings.TrimSpace(t), 10, 64)
		if err != nil || tv < 1 {
			return bad("transaction %q: want its number on the connection, from 1", t)
		}
		pin.Conn, pin.Txn = cv, tv
	}
	return Fault{Spec: spec, Name: kind.String(), P: 1, Max: 1, Pin: &pin}, true, nil
}

// checkPins refuses two entries that list the same commit point.
func (s Schedule) checkPins() error {
	seen := map[toxics.Pin]string{}
	for _, f := range s {
		if f.Pin == nil {
			continue
		}
		k := *f.Pin
		k.Kind = 0
		if prev, dup := seen[k]; dup {
			return fmt.Errorf("fault %q: it lists the point %q lists already", f.Spec, prev)
		}
		seen[k] = f.Spec
	}
	return nil
}

// Pinned returns the schedule's listed faults, in order.
func (s Schedule) Pinned() Schedule {
	var out Schedule
	for _, f := range s {
		if f.Pin != nil {
			out = append(out, f)
		}
	}
	return out
}
