package schedule

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
)

// Fault is one entry of a schedule, parsed from NAME[:PARAMS][@START-END]; see the
// package documentation for the syntax.
type Fault struct {
	// Spec is the entry as written.
	Spec string
	// Name is the fault's canonical name: commit-cut, commit-drop, commit-mixed,
	// prepare-cut, prepare-drop, partition, a standard toxic's type (latency, bandwidth,
	// timeout, reset_peer, slow_close, limit_data), a process fault's name, or
	// coordinator-crash.
	Name string
	// P and Max configure a commit fault: probability per commit point, cap on fires
	// per window (0: none).
	P   float64
	Max int64
	// Toxic is the standard toxic to add (Name is set when the window opens).
	Toxic *faults.Toxic
	// Start and End bound the window, from the start of the run. Bounded is false for
	// an entry without a window (armed for the whole run) and for "@START-" (armed
	// until the end of the run); End is 0 then.
	Start, End time.Duration
	Bounded    bool
	// Process is set for a process fault (kill, pause, restart, failover): the runner
	// applies it to a launched server; Schedule.Run leaves it alone. Point is set for an
	// entry written with a point in time, NAME@T.
	Process bool
	Point   bool
	// Tear is set for power-loss:tear: each file keeps a seeded prefix of its unsynced
	// writes, torn at a page boundary, instead of none.
	Tear bool
	// Rejoin is set for failover:rejoin: the old primary is started again after the
	// promotion, as it would come back in production, instead of staying down.
	Rejoin bool
	// Shape is set for a partition between the nodes of a launched topology,
	// partition:SHAPE@START-END (one of PartitionShapes); Target is the node of
	// partition:isolate:NODE and partition:one-way:NODE. The runner applies it;
	// Schedule.Run leaves it alone.
	Shape, Target string
	// Link is set for a standard toxic on the links between nodes
	// (",link=replication"): the runner puts it on the topology's link proxies;
	// Schedule.Run leaves it alone.
	Link string
	// Statement, when set, is the one statement a commit fault acts on: PREPARE
	// TRANSACTION for prepare-cut and prepare-drop, which are the cut and drop knobs
	// restricted to the first phase of two-phase commit. A proxy has one matcher
	// (Options.Match), so the caller that starts it installs the statement's; Schedule.Run
	// arms the knob like commit-cut's or commit-drop's.
	Statement string
	// Coordinator is set for coordinator-crash@T: the two-phase commit coordinator of a
	// transfer run dies at T. The runner applies it; Schedule.Run leaves it alone.
	Coordinator bool
	// Pin is set for a commit fault listed at one commit point, NAME@commit:N or
	// NAME@conn:C/txn:T (listed.go): it fires there, once, and nowhere else. Such an
	// entry has no window and no probability.
	Pin *toxics.Pin
}

// PrepareStatement is the statement of prepare-cut and prepare-drop.
const PrepareStatement = "PREPARE TRANSACTION"

// knob names the proxy knob a commit fault arms ("cut", "drop", "mixed"), or "" for any
// other fault: two entries on one knob must not overlap.
func (f Fault) knob() string {
	switch f.Name {
	case "commit-cut", "prepare-cut":
		return "cut"
	case "commit-drop", "prepare-drop":
		return "drop"
	case "commit-mixed":
		return "mixed"
	}
	return ""
}

// The shapes of a partition between nodes (Fault.Shape).
const (
	IsolatePrimary = "isolate-primary"
	Isolate        = "isolate"
	Halves         = "halves"
	Majority       = "majority"
	MajoritiesRing = "majorities-ring"
	Bridge         = "bridge"
	OneWay         = "one-way"
)

// PartitionShapes lists the shapes of partition:SHAPE.
var PartitionShapes = []string{IsolatePrimary, Isolate, Halves, Majority, MajoritiesRing, Bridge, OneWay}

// Links are the paths between nodes a standard toxic can be put on (link=LINK).
var Links = []string{"replication"}

// BetweenNodes reports whether the fault acts between the nodes of a topology (a
// partition with a shape, or a toxic on a link): the runner applies it.
func (f Fault) BetweenNodes() bool { return f.Shape != "" || f.Link != "" }

// DefaultKillDowntime is how long kill@T keeps the server down before it starts again.
const DefaultKillDowntime = 2 * time.Second

// ProcessFaults are the process faults' names, for messages.
const ProcessFaults = "kill, pause, restart, failover, power-loss"

// Schedule is a list of faults, each armed for its window.
type Schedule []Fault

// Parse parses the entries and checks that windows of one commit fault, or of
// partitions, do not overlap. Errors are one line naming the entry.
func Parse(specs []string) (Schedule, error) {
	var s Schedule
	for _, spec := range specs {
		f, err := ParseFault(spec)
		if err != nil {
			return nil, err
		}
		s = append(s, f)
	}
	if err := s.checkPins(); err != nil {
		return nil, err
	}
	for i, a := range s {
		if a.Toxic != nil || a.Pin != nil {
			continue
		}
		for _, b := range s[:i] {
			if a.Coordinator && b.Coordinator {
				return nil, fmt.Errorf("fault %q: one coordinator crash per run (the run ends with it; %q is one already)", a.Spec, b.Spec)
			}
			if a.Process && b.Process {
				// One process fault at a time: a kill inside a pause has no clear meaning.
				if a.Start <= b.processEnd() && b.Start <= a.processEnd() {
					return nil, fmt.Errorf("fault %q: it overlaps %q (one process fault at a time)", a.Spec, b.Spec)
				}
				continue
			}
			if b.Pin == nil && (b.Name == a.Name || a.knob() != "" && a.knob() == b.knob()) && overlap(a, b) {
				return nil, fmt.Errorf("fault %q: its window overlaps %q", a.Spec, b.Spec)
			}
		}
	}
	return s, nil
}

// processEnd is when a process fault is over: its window's end, or its instant.
func (f Fault) processEnd() time.Duration {
	if f.Bounded {
		return f.End
	}
	return f.Start
}

func overlap(a, b Fault) bool {
	aEnd, bEnd := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	if a.Bounded {
		aEnd = a.End
	}
	if b.Bounded {
		bEnd = b.End
	}
	return a.Start < bEnd && b.Start < aEnd
}

// apiFaultName returns the commit fault an API layer's fault name stands for (in the
// underscore form ParseFault compares): at an API layer (toxics.HTTP) a response-cut is
// a commit-cut (the service handled the request, its response is dropped) and a
// request-drop a commit-drop. Other names are returned as they are.
func apiFaultName(name string) string {
	switch name {
	case "response_cut":
		return "commit_cut"
	case "request_drop":
		return "commit_drop"
	}
	return name
}

// ParseFault parses one schedule entry, NAME[:PARAMS][@START-END].
func ParseFault(spec string) (Fault, error) {
	if f, ok, err := parsePinned(spec); ok {
		return f, err
	}
	f := Fault{Spec: spec}
	bad := func(format string, args ...any) (Fault, error) {
		return Fault{}, fmt.Errorf("fault %q: %s", spec, fmt.Sprintf(format, args...))
	}
	body := strings.TrimSpace(spec)
	name, _, _ := strings.Cut(body, ":")
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	name = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
	if i := strings.LastIndexByte(body, '@'); i >= 0 {
		w := body[i+1:]
		if atInstant(name) && !strings.Contains(w, "-") {
			// A point in time, for a fault that happens at an instant.
			at, err := time.ParseDuration(strings.TrimSpace(w))
			if err != nil || at < 0 {
				return bad("time %q: want a duration from the start of the run, as in 5s", w)
			}
			f.Start, f.Point = at, true
		} else {
			start, end, bounded, err := parseWindow(w)
			if err != nil {
				return bad("%v", err)
			}
			f.Start, f.End, f.Bounded = start, end, bounded
		}
		body = body[:i]
	}
	name, params, _ := strings.Cut(body, ":")
	name = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
	name = apiFaultName(name)
	var args []string
	if params != "" {
		args = strings.Split(params, ",")
	}
	first := ""
	opts := map[string]string{}
	for i, a := range args {
		a = strings.TrimSpace(a)
		if k, v, ok := strings.Cut(a, "="); ok {
			opts[strings.ToLower(k)] = v
			continue
		}
		if i > 0 {
			return bad("parameter %q: want KEY=VALUE after the first", a)
		}
		first = a
	}
	// Options each fault accepts, checked after the switch.
	allowed := map[string]bool{}
	switch name {
	case "commit_cut", "commit_drop", "commit_mixed", "prepare_cut", "prepare_drop":
		f.Name = strings.ReplaceAll(name, "_", "-")
		if strings.HasPrefix(name, "prepare_") {
			f.Statement = PrepareStatement
		}
		f.P = 1
		if first != "" {
			p, err := strconv.ParseFloat(first, 64)
			if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
				return bad("probability %q: want a number from 0 to 1", first)
			}
			f.P = p
		}
		allowed["max"] = true
		if v, ok := opts["max"]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return bad("max=%q: want a whole number of fires, at least 1", v)
			}
			f.Max = n
		}
	case "partition":
		f.Name = name
		if !f.Bounded {
			return bad("partition needs a window with an end, as in partition@5s-7s or partition:halves@5s-7s")
		}
		if first != "" {
			shape, target, _ := strings.Cut(first, ":")
			shape = strings.ToLower(strings.TrimSpace(shape))
			switch {
			case !slices.Contains(PartitionShapes, shape):
				return bad("partition shape %q: want one of %s (isolate:NODE, one-way[:NODE])", shape, strings.Join(PartitionShapes, ", "))
			case shape == Isolate && target == "":
				return bad("partition:isolate needs a node, as in partition:isolate:n2@5s-7s")
			case target != "" && shape != Isolate && shape != OneWay:
				return bad("partition:%s takes no node (only isolate:NODE and one-way:NODE do)", shape)
			case target != "" && !nodeName(target):
				return bad("node %q: want a node's name, as in n2", target)
			}
			f.Shape, f.Target = shape, target
		}
	case "latency", "bandwidth", "timeout", "reset_peer", "slow_close", "limit_data":
		f.Name = name
		t, err := parseToxic(name, first)
		if err != nil {
			return bad("%v", err)
		}
		allowed["stream"], allowed["link"] = true, true
		if v, ok := opts["link"]; ok {
			if !slices.Contains(Links, v) {
				return bad("link=%q: want one of %s", v, strings.Join(Links, ", "))
			}
			f.Link = v
		}
		switch v := opts["stream"]; v {
		case "", "down", "downstream":
		case "up", "upstream":
			t.Upstream = true
		default:
			return bad("stream=%q: want up or down", v)
		}
		f.Toxic = t
	case "kill", "pause", "restart", "failover":
		f.Name, f.Process = name, true
		if name == "failover" && first == "rejoin" {
			f.Rejoin, first = true, ""
		}
		if first != "" {
			return bad("%s takes no parameter, only a time or a window: %s", name, processExample[name])
		}
		switch {
		case !f.Point && !f.Bounded:
			return bad("%s needs a time or a window with an end, as in %s", name, processExample[name])
		case name == "kill" && f.Point:
			// Down for the default downtime, then started again.
			f.End, f.Bounded, f.Point = f.Start+DefaultKillDowntime, true, false
		case name == "pause" && f.Point:
			return bad("pause needs a window (SIGSTOP at its start, SIGCONT at its end), as in pause@5s-8s")
		case (name == "restart" || name == "failover") && !f.Point:
			return bad("%s happens at an instant: give a time, as in %s", name, processExample[name])
		}
	case "coordinator_crash":
		f.Name, f.Coordinator = "coordinator-crash", true
		if first != "" {
			return bad("coordinator-crash takes no parameter, only a time: coordinator-crash@2s")
		}
		if !f.Point {
			return bad("coordinator-crash happens at an instant: give a time, as in coordinator-crash@2s")
		}
	case "power_loss":
		// The runner kills the server, undoes what it never fsynced and starts it again
		// at once: a reboot after the power comes back.
		f.Name, f.Process = "power-loss", true
		switch first {
		case "":
		case "tear":
			f.Tear = true
		default:
			return bad("power-loss takes one parameter, tear (keep a torn prefix of unsynced writes), as in power-loss:tear@5s")
		}
		if !f.Point {
			return bad("power-loss happens at an instant: give a time, as in power-loss@5s")
		}
	case "":
		return bad("no fault name")
	default:
		return bad("unknown fault %q (want commit-cut, commit-drop, commit-mixed, prepare-cut, prepare-drop, latency, bandwidth, timeout, reset_peer, slow_close, limit_data, partition, kill, pause, restart, failover, power-loss or coordinator-crash)", name)
	}
	for k := range opts {
		if !allowed[k] {
			return bad("%s takes no option %q", f.Name, k)
		}
	}
	return f, nil
}

// nodeName reports whether s can name a node: letters and digits, as n2.
func nodeName(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// atInstant reports whether the fault named name (underscored) may be written NAME@T: a
// process fault or the coordinator's crash.
func atInstant(name string) bool {
	return name == "kill" || name == "pause" || name == "restart" || name == "failover" || name == "power_loss" || name == "coordinator_crash"
}

var processExample = map[string]string{
	"kill": "kill@5s-8s or kill@5s", "pause": "pause@5s-8s", "restart": "restart@5s", "failover": "failover@5s or failover:rejoin@5s", "power_loss": "power-loss@5s",
}

// BetweenNodes returns the schedule's faults between nodes (BetweenNodes), in order.
func (s Schedule) BetweenNodes() Schedule {
	var out Schedule
	for _, f := range s {
		if f.BetweenNodes() {
			out = append(out, f)
		}
	}
	return out
}

// OnProxy returns the entries Schedule.Run applies to a proxy, in order: every entry
// but the process faults, the coordinator crash and the faults between nodes, which
// the runner applies.
func (s Schedule) OnProxy() Schedule {
	var out Schedule
	for _, f := range s {
		if !f.Process && !f.Coordinator && !f.BetweenNodes() {
			out = append(out, f)
		}
	}
	return out
}

// Processes returns the schedule's process faults, in order.
func (s Schedule) Processes() Schedule {
	var out Schedule
	for _, f := range s {
		if f.Process {
			out = append(out, f)
		}
	}
	return out
}

func parseToxic(typ, arg string) (*faults.Toxic, error) {
	t := &faults.Toxic{Type: typ, Attributes: map[string]int64{}}
	need := func(what string) error {
		if arg == "" {
			return fmt.Errorf("%s needs %s, as in %s", typ, what, example[typ])
		}
		return nil
	}
	// whole sets attr to arg, a whole number of unit, at least least.
	whole := func(what, unit string, least int64, attr string) error {
		if err := need(what); err != nil {
			return err
		}
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < least {
			if least > 0 {
				return fmt.Errorf("%s %q: want a whole number of %s, at least %d", typ, arg, unit, least)
			}
			return fmt.Errorf("%s %q: want a whole number of %s", typ, arg, unit)
		}
		t.Attributes[attr] = n
		return nil
	}
	switch typ {
	case "latency":
		if err := need("a delay"); err != nil {
			return nil, err
		}
		lat, jit, _ := strings.Cut(arg, "~")
		ms, err := millis(lat)
		if err != nil {
			return nil, fmt.Errorf("latency %q: %w", lat, err)
		}
		t.Attributes["latency"] = ms
		if jit != "" {
			j, err := millis(jit)
			if err != nil {
				return nil, fmt.Errorf("jitter %q: %w", jit, err)
			}
			t.Attributes["jitter"] = j
		}
	case "bandwidth":
		if err := whole("a rate in KB/s", "KB/s", 1, "rate"); err != nil {
			return nil, err
		}
	case "timeout", "reset_peer", "slow_close":
		attr := "timeout"
		if typ == "slow_close" {
			attr = "delay"
			if err := need("a delay"); err != nil {
				return nil, err
			}
		}
		if typ == "timeout" {
			if err := need("a duration (0: never close)"); err != nil {
				return nil, err
			}
		}
		if arg != "" {
			ms, err := millis(arg)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", typ, arg, err)
			}
			t.Attributes[attr] = ms
		}
	case "limit_data":
		if err := whole("a number of bytes", "bytes", 0, "bytes"); err != nil {
			return nil, err
		}
	}
	// The bounds AddToxic will hold it to (a duration over a day, a rate beyond
	// 1 TB/s), checked now rather than when its window opens.
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

var example = map[string]string{
	"latency":    "latency:50ms or latency:50ms~10ms",
	"bandwidth":  "bandwidth:100",
	"timeout":    "timeout:1s",
	"slow_close": "slow_close:100ms",
	"limit_data": "limit_data:1000",
}

// millis parses a Go duration of whole milliseconds, what toxiproxy's toxics take.
func millis(s string) (int64, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("not a duration (want e.g. 50ms, 1s)")
	}
	if d < 0 || d%time.Millisecond != 0 {
		return 0, errors.New("want a whole number of milliseconds, not negative")
	}
	return d.Milliseconds(), nil
}

func parseWindow(w string) (start, end time.Duration, bounded bool, err error) {
	a, b, ok := strings.Cut(w, "-")
	if !ok {
		return 0, 0, false, fmt.Errorf("window %q: want START-END or START-, as in @5s-15s", w)
	}
	start, err = time.ParseDuration(strings.TrimSpace(a))
	if err != nil || start < 0 {
		return 0, 0, false, fmt.Errorf("window start %q: want a duration from the start of the run, as in 5s", a)
	}
	if strings.TrimSpace(b) == "" {
		return start, 0, false, nil
	}
	end, err = time.ParseDuration(strings.TrimSpace(b))
	if err != nil {
		return 0, 0, false, fmt.Errorf("window end %q: want a duration from the start of the run, as in 15s", b)
	}
	if end <= start {
		return 0, 0, false, fmt.Errorf("window %q: the end must come after the start", w)
	}
	return start, end, true, nil
}

// Window is a fault window that opened or closed, as Schedule.Run reports it. The runner
// records these as nemesis events.
type Window struct {
	// Time is when the fault was armed, or when its disarming began: the window from
	// one to the other is one in which the fault certainly held. (Removing a latency
	// toxic releases what it holds at once; a cut decided for a commit in flight
	// still fires after the disarming, see toxics.Knob.Disarm.)
	Time time.Time
	// Fault is the schedule entry as written.
	Fault string
	// Open is true when the window opened, false when it closed.
	Open bool
}

// Run arms each fault of the schedule on p at its window's start and disarms it at its
// end, measured from start (the start of the run), reporting each change to report
// (may be nil) after it takes effect. It returns when every window has closed, or when
// ctx is done, after disarming what is still armed; the error is nil then. It fails at
// once if p cannot carry a fault (commit faults without a protocol), and returns the
// error of a toxic that cannot be added, after disarming.
func (s Schedule) Run(ctx context.Context, p *faults.Proxy, start time.Time, report func(Window)) error {
	for _, f := range s {
		if f.Toxic == nil && !f.Process && !f.Coordinator && f.Name != "partition" && p.Faults() == nil {
			return fmt.Errorf("fault %q: the proxy has no protocol for commit faults", f.Spec)
		}
	}
	acts := s.Actions(func(f Fault) bool {
		// The runner applies the others (to the server, its nodes or its coordinator), not the proxy.
		return !f.Process && !f.Coordinator && !f.BetweenNodes()
	})
	open := map[int]bool{}
	closeAll := func() {
		for i := range s {
			if open[i] {
				_ = s.apply(p, i, false)
				delete(open, i)
				if report != nil {
					report(Window{Time: time.Now(), Fault: s[i].Spec})
				}
			}
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for _, a := range acts {
		if d := time.Until(start.Add(a.At)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				closeAll()
				return nil
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			closeAll()
			return nil
		}
		began := time.Now()
		if err := s.apply(p, a.I, a.Open); err != nil {
			closeAll()
			return err
		}
		at := began
		if a.Open {
			open[a.I] = true
			at = time.Now()
		} else {
			delete(open, a.I)
		}
		if report != nil {
			report(Window{Time: at, Fault: s[a.I].Spec, Open: a.Open})
		}
	}
	if len(open) > 0 {
		<-ctx.Done()
		closeAll()
	}
	return nil
}

func (s Schedule) apply(p *faults.Proxy, i int, open bool) error {
	f := s[i]
	switch {
	case f.Pin != nil:
		if open {
			return p.Faults().Listed.Add(*f.Pin)
		}
		p.Faults().Listed.Remove(*f.Pin)
		return nil
	case f.Toxic != nil:
		name := fmt.Sprintf("schedule_%d_%s", i, f.Toxic.Type)
		if !open {
			return p.RemoveToxic(name)
		}
		t := *f.Toxic
		t.Name = name
		return p.AddToxic(t)
	case f.Name == "partition":
		if open {
			p.Disable()
			return nil
		}
		return p.Enable()
	}
	k := knob(p, f.Name)
	if open {
		k.Set(f.P, f.Max)
	} else {
		k.Disarm()
	}
	return nil
}

func knob(p *faults.Proxy, name string) *toxics.Knob {
	f := p.Faults()
	switch (Fault{Name: name}).knob() {
	case "cut":
		return &f.Cut
	case "drop":
		return &f.Drop
	}
	return &f.Mixed
}
