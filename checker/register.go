package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// Register models, by the name a history header or a flag gives them.
const (
	// RegisterModel is a register of reads and writes.
	RegisterModel = "register"
	// CASRegisterModel is a register of reads, writes and compare-and-set.
	CASRegisterModel = "cas-register"
)

// FailMeaning says what a fail completion of a cas tells the register checkers. The
// two conventions judge the same history differently: a cas 4→4 that fails while the
// register holds 4 is impossible under FailCompareFailed and harmless under
// FailNotApplied.
type FailMeaning string

const (
	// FailCompareFailed is porcupine's convention for its etcd logs, and indoubt's for
	// its own histories: a cas that failed without an Error evaluated its compare and
	// found the register not holding from (or absent). A fail with an Error says
	// nothing about the value. This is the default.
	FailCompareFailed FailMeaning = "compare-failed"
	// FailNotApplied is Jepsen's: a failed operation certainly did not take place and
	// constrains nothing about the state; Knossos drops failed operations before it
	// searches, and so does the checker under this reading.
	FailNotApplied FailMeaning = "not-applied"
)

// FailMeanings lists the readings of a failed cas, by the names flags give them.
var FailMeanings = []FailMeaning{FailNotApplied, FailCompareFailed}

// RegisterOptions configures CheckRegister. The zero value checks a cas-register that
// starts absent, without a time limit and without a visualization.
type RegisterOptions struct {
	// Model is RegisterModel or CASRegisterModel; empty means CASRegisterModel.
	Model string
	// Initial is every register's value before the history; nil means absent.
	Initial *int64
	// Timeout bounds the whole check, explanation and visualization included; 0 means
	// no bound. Keys left undecided when it expires make the verdict Unknown, unless
	// another key is already known not to be linearizable.
	Timeout time.Duration
	// MaxMemory bounds the process's live heap while the check runs, in bytes; 0 means
	// no bound. When the heap reaches three quarters of it the search stops, as at the
	// Timeout, and the summary says the memory bound ran out (see Options.MaxMemory).
	MaxMemory int64
	// FailMeans is what a failed cas means; empty means FailCompareFailed.
	FailMeans FailMeaning
	// Workers is how many keys are searched at once; 0 means GOMAXPROCS.
	Workers int
	// Visualize, when not nil, receives porcupine's HTML visualization of the history:
	// every key's operations, its (partial) linearizations, and the nemesis events as
	// annotations.
	Visualize io.Writer
	// VisualizePath, when not empty, is a file the same visualization is written to.
	VisualizePath string

	// bounds, when set, are the bounds of a check that began before (CheckStream's,
	// which bound the reading of the history too); else CheckRegister makes its own.
	bounds *searchBounds
}

// registerExplainMax is the longest key whose failure porcupine explains (its partial
// linearizations: the longest order found, the state it leaves). Its search costs
// memory quadratic in the key's length; longer keys are explained by the register
// search's own finding, the operation at which every order fails.
const registerExplainMax = 20_000

// CheckRegister checks that a history of integer registers is linearizable, each Key
// being an independent register, with porcupine.
//
// Operations, in an indoubt history:
//   - read: the invocation's value is ignored; an ok completion's value is the integer
//     read, or JSON null when the register was absent. An ok read with no value at all
//     carries no information (Knossos's convention for EDN's nil, see
//     histories.ReadJepsenEDN) and is accepted in any state.
//   - write: the invocation's value is the integer written.
//   - cas: the invocation's value is [from, to]. ok means it swapped. Under
//     FailCompareFailed (the default), fail without an Error means it did not because
//     the register did not hold from (or was absent), and fail with an Error is a
//     failure that says nothing about the value; under FailNotApplied every fail says
//     nothing and is left out.
//
// Info completions, and invocations never completed, may take effect at any point after
// their invocation or never. Reads that failed or ended in info, and writes that
// failed, carry no information and are left out of the search. Events of the nemesis
// are skipped, except as annotations of the visualization. The history is taken in
// slice order, which must be real-time order.
//
// Each key is decided by a search that linearizes operations just in time (see
// register_jit.go): a long history of few concurrent operations takes time and memory
// linear in its length. porcupine draws the visualization and explains a key of up to
// registerExplainMax operations that cannot be linearized.
//
// An invalid history is a Result with one anomaly per key that cannot be linearized,
// naming the key and the history indices of the operations at which every
// linearization fails. An error means the history is not a register history
// (unknown functions, malformed values, a completion without invocation), or that
// the visualization could not be written; in the latter case the Result is complete.
//
// The search runs within opt.Timeout and opt.MaxMemory: keys left undecided when one
// runs out make the verdict Unknown (unless another key is invalid), and the summary
// says which bound ran out. When ctx ends during the search, CheckRegister returns
// within moments an Unknown Result whose Summary says it was interrupted, and writes
// no visualization. porcupine v1.3.1 takes no context, so the model stops it: once a
// bound has run out every step of the model refuses, and porcupine's depth-first
// search unwinds at the cost of one refused step per candidate on its stack. While
// the bounds hold, the cost is one atomic load per step.
func CheckRegister(ctx context.Context, ops []histories.Op, opt RegisterOptions) (Result, error) {
	start := time.Now()
	if opt.Model == "" {
		opt.Model = CASRegisterModel
	}
	if opt.Model != RegisterModel && opt.Model != CASRegisterModel {
		return Result{}, fmt.Errorf("check register: unknown model %q (want %s or %s)", opt.Model, RegisterModel, CASRegisterModel)
	}
	switch opt.FailMeans {
	case "":
		opt.FailMeans = FailCompareFailed
	case FailCompareFailed, FailNotApplied:
	default:
		return Result{}, fmt.Errorf("check register: unknown meaning of fail %q (want %s or %s)", opt.FailMeans, FailNotApplied, FailCompareFailed)
	}
	b := opt.bounds
	if b == nil {
		b = newSearchBounds(ctx, opt.Timeout, opt.MaxMemory)
		defer b.close()
	}
	h, err := registerHistory(ops, opt.Model, opt.FailMeans)
	if err != nil {
		return Result{}, fmt.Errorf("check register: %w", err)
	}
	init := registerState{}
	if opt.Initial != nil {
		init = registerState{v: *opt.Initial, present: true}
	}
	model := registerPorcupineModel(init, &b.stop)

	found := registerSearch(h, init, b, opt.Workers)
	if ctx.Err() != nil {
		return interrupted(opt.Model, ctx.Err()), nil
	}
	res := Result{Checker: opt.Model, Anomalies: []Anomaly{}}
	var invalid, unknown []string
	for i, key := range h.keys {
		switch {
		case !found[i].decided:
			unknown = append(unknown, key)
		case !found[i].ok:
			invalid = append(invalid, key)
			res.Anomalies = append(res.Anomalies, registerExplain(model, init, key, h.byKey[key], found[i], b))
			if ctx.Err() != nil {
				return interrupted(opt.Model, ctx.Err()), nil
			}
		}
	}
	total := 0
	for _, key := range h.keys {
		total += len(h.byKey[key])
	}
	switch {
	case len(invalid) > 0:
		res.Verdict = Invalid
		res.Summary = fmt.Sprintf("%s not linearizable as a %s (%d of %d keys)",
			registerKeyList(invalid), opt.Model, len(invalid), len(h.keys))
		if len(unknown) > 0 {
			res.Summary += fmt.Sprintf("; %d more keys were undecided when %s", len(unknown), b.ranOut())
		}
	case len(unknown) > 0:
		res.Verdict = Unknown
		res.Summary = fmt.Sprintf("%s before %s could be decided (%d of %d keys)",
			b.ranOut(), registerKeyNames(unknown), len(unknown), len(h.keys))
	default:
		res.Verdict = Valid
		res.Summary = fmt.Sprintf("all %d operations on %d keys are linearizable as a %s", total, len(h.keys), opt.Model)
	}
	res.Details = registerDetails(opt, h, total, invalid, unknown, time.Since(start))
	if len(unknown) > 0 {
		res.Details["bound"] = histories.Value(b.boundName())
	}

	if opt.Visualize != nil || opt.VisualizePath != "" {
		if err := registerVisualize(init, h, b, opt); err != nil {
			return res, fmt.Errorf("check register: %w", err)
		}
	}
	return res, nil
}

func registerDetails(opt RegisterOptions, h *registerHist, total int, invalid, unknown []string, took time.Duration) map[string]json.RawMessage {
	d := map[string]json.RawMessage{
		"model":        histories.Value(opt.Model),
		"fail_means":   histories.Value(opt.FailMeans),
		"keys":         histories.Value(len(h.keys)),
		"operations":   histories.Value(total),
		"initial":      json.RawMessage("null"),
		"invalid_keys": histories.Value(append([]string{}, invalid...)),
		"unknown_keys": histories.Value(append([]string{}, unknown...)),
		"check_ms":     histories.Value(took.Milliseconds()),
	}
	if opt.Initial != nil {
		d["initial"] = histories.Value(*opt.Initial)
	}
	return d
}

// registerSearch decides each key, at most workers keys at a time.
func registerSearch(h *registerHist, init registerState, b *searchBounds, workers int) []jitResult {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	found := make([]jitResult, len(h.keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(h.keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if !b.stopped() {
					found[i] = registerJIT(h.byKey[h.keys[i]], init, b)
				}
			}
		}()
	}
	for i := range h.keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return found
}

// registerKeyNames names keys in a sentence: "the register", "key a, key b and 3
// more".
func registerKeyNames(keys []string) string {
	const show = 5
	names := make([]string, 0, show+1)
	for i, k := range keys {
		if i == show {
			names = append(names, fmt.Sprintf("and %d more", len(keys)-show))
			break
		}
		names = append(names, registerKeyName(k))
	}
	return strings.Join(names, ", ")
}

func registerKeyList(keys []string) string {
	if len(keys) > 1 {
		return registerKeyNames(keys) + " are"
	}
	return registerKeyNames(keys) + " is"
}

// registerKeyName names a key in a sentence.
func registerKeyName(k string) string {
	if k == "" {
		return "the register"
	}
	if strings.ContainsAny(k, " \t\n\",") || strconv.Quote(k) != `"`+k+`"` {
		return "key " + strconv.Quote(k)
	}
	return "key " + k
}

// registerFunc is a register operation.
type registerFunc uint8

const (
	registerRead registerFunc = 1 + iota
	registerWrite
	registerCAS
)

// registerOutcome is what a completion tells the model.
type registerOutcome uint8

const (
	registerDone       registerOutcome = iota // ok read (value known), ok write
	registerBlind                             // read that tells nothing
	registerSwapped                           // ok cas
	registerNotSwapped                        // cas that certainly found another value
	registerMaybe                             // info write or cas: applied or not
)

// registerState is a register's value; the zero value is absent.
type registerState struct {
	v       int64
	present bool
}

func (s registerState) String() string {
	if !s.present {
		return "absent"
	}
	return strconv.FormatInt(s.v, 10)
}

// registerInput is an operation's invocation.
type registerInput struct {
	f    registerFunc
	a, b int64 // write a; cas from a to b
	// key only labels the operation in the visualization, where all keys share a page.
	key string
}

// registerOutput is an operation's completion.
type registerOutput struct {
	outcome registerOutcome
	read    registerState
}

// registerOp is one operation of the history, with where it came from.
type registerOp struct {
	in      registerInput
	out     registerOutput
	process int
	client  int // dense process number for the visualization
	invoke  int64
	// complete is the completion's Index, or -1 for an invocation never completed.
	complete int64
	call     int64 // positions in the history: real-time order
	ret      int64
	key      string
}

// registerHist is a history split by key.
type registerHist struct {
	keys    []string // sorted
	byKey   map[string][]registerOp
	nemesis []histories.Op
	nemPos  []int64
	end     int64 // the position after the last event, where open operations return
}

func (h *registerHist) porcupineOps(key string) []porcupine.Operation {
	ops := h.byKey[key]
	out := make([]porcupine.Operation, len(ops))
	for i := range ops {
		out[i] = porcupine.Operation{
			ClientId: ops[i].client,
			Input:    ops[i].in,
			Call:     ops[i].call,
			Output:   ops[i].out,
			Return:   ops[i].ret,
			Metadata: &ops[i],
		}
	}
	return out
}

// registerHistory pairs invocations with completions and builds the operations the
// search needs.
func registerHistory(ops []histories.Op, model string, failMeans FailMeaning) (*registerHist, error) {
	h := &registerHist{byKey: map[string][]registerOp{}, end: int64(len(ops))}
	type open struct {
		op  histories.Op
		pos int
	}
	clients := map[int]int{}
	add := func(inv histories.Op, pos int, comp *histories.Op, cpos int) error {
		in, err := registerParseInput(inv, model)
		if err != nil {
			return err
		}
		in.key = inv.Key
		r := registerOp{in: in, process: inv.Process, invoke: inv.Index, complete: -1,
			call: int64(pos), ret: h.end, key: inv.Key}
		if c, ok := clients[inv.Process]; ok {
			r.client = c
		} else {
			r.client = len(clients)
			clients[inv.Process] = r.client
		}
		t := histories.Info
		if comp != nil {
			t = comp.Type
			r.complete = comp.Index
			if t != histories.Info {
				r.ret = int64(cpos)
			}
		}
		keep := true
		switch {
		case in.f == registerRead && t == histories.OK:
			r.out, err = registerParseRead(*comp)
		case in.f == registerRead:
			keep = false // a read that failed or may not have happened tells nothing
		case t == histories.Fail && (in.f == registerWrite || failMeans == FailNotApplied):
			keep = false // did not take place: Jepsen's meaning of every fail
		case t == histories.Fail && comp.Error != "":
			keep = false // a cas that failed for a reason other than the value
		case t == histories.Fail:
			r.out.outcome = registerNotSwapped
		case t == histories.Info:
			r.out.outcome = registerMaybe
		case in.f == registerCAS:
			r.out.outcome = registerSwapped
		}
		if err != nil {
			return err
		}
		if keep {
			h.byKey[inv.Key] = append(h.byKey[inv.Key], r)
		}
		return nil
	}
	var pairer histories.Pairer[open]
	for pos, op := range ops {
		if !op.IsClient() {
			h.nemesis = append(h.nemesis, op)
			h.nemPos = append(h.nemPos, int64(pos))
			continue
		}
		if op.Type == histories.Invoke {
			if err := pairer.Invoke(op, open{op, pos}); err != nil {
				return nil, err
			}
			continue
		}
		// A completion without a key belongs to its invocation's key: Jepsen's
		// independent completions may omit the [key value] tuple.
		inv, err := pairer.Complete(op)
		if err != nil {
			return nil, err
		}
		if err := add(inv.op, inv.pos, &op, pos); err != nil {
			return nil, err
		}
	}
	// Invocations never completed are info: add them in invocation order.
	for _, o := range pairer.Open() {
		if err := add(o.op, o.pos, nil, 0); err != nil {
			return nil, err
		}
	}
	for k := range h.byKey {
		h.keys = append(h.keys, k)
	}
	slices.Sort(h.keys)
	return h, nil
}

func registerParseInput(op histories.Op, model string) (registerInput, error) {
	switch op.F {
	case "read":
		return registerInput{f: registerRead}, nil
	case "write":
		v, err := registerInt(op.Value)
		if err != nil {
			return registerInput{}, fmt.Errorf("event %d: write value %s: %w", op.Index, registerShow(op.Value), err)
		}
		return registerInput{f: registerWrite, a: v}, nil
	case "cas":
		if model != CASRegisterModel {
			return registerInput{}, fmt.Errorf("event %d: cas needs model %s, not %s", op.Index, CASRegisterModel, model)
		}
		var pair []json.RawMessage
		if err := json.Unmarshal(op.Value, &pair); err != nil || len(pair) != 2 {
			return registerInput{}, fmt.Errorf("event %d: cas value %s is not [from, to]", op.Index, registerShow(op.Value))
		}
		from, err1 := registerInt(pair[0])
		to, err2 := registerInt(pair[1])
		if err1 != nil || err2 != nil {
			return registerInput{}, fmt.Errorf("event %d: cas value %s is not [from, to] of integers", op.Index, registerShow(op.Value))
		}
		return registerInput{f: registerCAS, a: from, b: to}, nil
	}
	return registerInput{}, fmt.Errorf("event %d: unknown register operation %q", op.Index, op.F)
}

func registerParseRead(op histories.Op) (registerOutput, error) {
	v := strings.TrimSpace(string(op.Value))
	switch v {
	case "":
		return registerOutput{outcome: registerBlind}, nil
	case "null":
		return registerOutput{}, nil
	}
	n, err := registerInt(op.Value)
	if err != nil {
		return registerOutput{}, fmt.Errorf("event %d: read value %s: %w", op.Index, registerShow(op.Value), err)
	}
	return registerOutput{read: registerState{v: n, present: true}}, nil
}

func registerInt(raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a 64-bit integer")
	}
	return n, nil
}

func registerShow(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// registerStep is the sequential specification of a register. An info cas is
// deterministic here: linearized where it finds from it swaps, elsewhere it does not,
// and "never happened" is its linearization at the end of the history.
func registerStep(state, input, output any) (bool, any) {
	s := state.(registerState)
	in := input.(registerInput)
	out := output.(registerOutput)
	switch in.f {
	case registerRead:
		return out.outcome == registerBlind || out.read == s, s
	case registerWrite:
		return true, registerState{v: in.a, present: true}
	}
	match := s.present && s.v == in.a
	switch out.outcome {
	case registerSwapped:
		return match, registerState{v: in.b, present: true}
	case registerNotSwapped:
		return !match, s
	}
	if match {
		return true, registerState{v: in.b, present: true}
	}
	return true, s
}

// registerPorcupineModel is the register for porcupine. Once stop is set every step
// refuses, which ends porcupine's search (see CheckRegister).
func registerPorcupineModel(init registerState, stop *atomic.Bool) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			if stop.Load() {
				return false, state
			}
			return registerStep(state, input, output)
		},
		Hash: func(state any) uint64 {
			s := state.(registerState)
			if !s.present {
				return 0x9e3779b97f4a7c15
			}
			return uint64(s.v) * 0xff51afd7ed558ccd
		},
		DescribeOperation: func(input, output any) string {
			in := input.(registerInput)
			if in.key != "" {
				return in.key + ": " + registerDescribe(in, output.(registerOutput))
			}
			return registerDescribe(in, output.(registerOutput))
		},
		DescribeState: func(state any) string { return state.(registerState).String() },
		DescribeOperationMetadata: func(info any) string {
			if op, ok := info.(*registerOp); ok && op != nil {
				return fmt.Sprintf("process %d, %s", op.process, registerEvents(op))
			}
			return ""
		},
	}
}

// registerDescribe says what an operation did, as in "cas 1→2 failed".
func registerDescribe(in registerInput, out registerOutput) string {
	switch in.f {
	case registerRead:
		if out.outcome == registerBlind {
			return "read ?"
		}
		return "read " + out.read.String()
	case registerWrite:
		if out.outcome == registerMaybe {
			return fmt.Sprintf("write %d (unknown outcome)", in.a)
		}
		return fmt.Sprintf("write %d", in.a)
	}
	s := fmt.Sprintf("cas %d→%d", in.a, in.b)
	switch out.outcome {
	case registerNotSwapped:
		return s + " failed"
	case registerMaybe:
		return s + " (unknown outcome)"
	}
	return s
}

// registerEvents names the history events of an operation.
func registerEvents(op *registerOp) string {
	if op.complete < 0 {
		return fmt.Sprintf("event %d, never completed", op.invoke)
	}
	return fmt.Sprintf("events %d-%d", op.invoke, op.complete)
}

// registerExplain turns porcupine's partial linearizations of a key that cannot be
// linearized into an anomaly: the longest linearizable prefix found, the state it
// leaves, and the operation that had to come next and could not. A key longer than
// registerExplainMax, or one porcupine could not search within the bounds, is
// explained by the register search's own finding (registerExplainJIT).
func registerExplain(model porcupine.Model, init registerState, key string, ops []registerOp, found jitResult, bounds *searchBounds) Anomaly {
	a := Anomaly{Kind: "not-linearizable", Ops: []int64{}}
	var partials [][]int
	verdict := porcupine.Unknown
	if len(ops) <= registerExplainMax && !bounds.stopped() {
		h := &registerHist{byKey: map[string][]registerOp{key: ops}}
		var info porcupine.LinearizationInfo
		// porcupine's search of a key the register search found invalid at once may
		// still take exponential time, and memory for each step: it gets a budget of
		// steps, which keeps the explanation the same from run to run.
		var spent atomic.Bool
		budget := registerExplainSteps(len(ops))
		steps := 0
		m := model
		m.Step = func(state, input, output any) (bool, any) {
			if steps++; steps > budget {
				spent.Store(true)
				return false, state
			}
			return model.Step(state, input, output)
		}
		verdict, info = porcupine.CheckOperationsVerbose(m, h.porcupineOps(key), 0)
		if bounds.stopped() || spent.Load() {
			verdict = porcupine.Unknown // the model refused once out of bounds
		}
		if p := info.PartialLinearizations(); len(p) == 1 {
			partials = p[0]
		}
	}
	if verdict != porcupine.Illegal {
		return registerExplainJIT(key, ops, found)
	}
	// The longest prefix; ties go to the lexicographically first so that the
	// explanation does not depend on map order inside porcupine.
	var best []int
	for _, p := range partials {
		if len(p) > len(best) || len(p) == len(best) && slices.Compare(p, best) < 0 {
			best = p
		}
	}
	done := make([]bool, len(ops))
	state := init
	var lastWrite *registerOp
	for _, id := range best {
		done[id] = true
		op := &ops[id]
		matched := state.present && state.v == op.in.a
		_, next := registerStep(state, op.in, op.out)
		state = next.(registerState)
		if op.in.f == registerWrite || op.in.f == registerCAS && matched && op.out.outcome != registerNotSwapped {
			lastWrite = op
		}
	}
	// The operation that returns first among those left must be linearized before
	// anything that starts after it returns: it is where every order breaks down.
	stuck := -1
	for i := range ops {
		if !done[i] && (stuck < 0 || ops[i].ret < ops[stuck].ret || ops[i].ret == ops[stuck].ret && ops[i].call < ops[stuck].call) {
			stuck = i
		}
	}
	if stuck < 0 {
		a.Explanation = fmt.Sprintf("%s: porcupine found no linearization of its %d operations", registerKeyName(key), len(ops))
		return a
	}
	s := &ops[stuck]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s by process %d (%s) cannot be linearized", registerKeyName(key), registerDescribe(s.in, s.out), s.process, registerEvents(s))
	if len(best) == 0 {
		fmt.Fprintf(&b, " as the first operation, when the register is %s", init)
	} else {
		last := &ops[best[len(best)-1]]
		fmt.Fprintf(&b, ": the longest linearizable order found covers %d of the key's %d operations and ends with %s by process %d (%s), leaving the register at %s",
			len(best), len(ops), registerDescribe(last.in, last.out), last.process, registerEvents(last), state)
		if lastWrite != nil && lastWrite != last {
			fmt.Fprintf(&b, " as set by %s by process %d (%s)", registerDescribe(lastWrite.in, lastWrite.out), lastWrite.process, registerEvents(lastWrite))
		}
		a.Ops = registerAppendEvents(a.Ops, last)
		if lastWrite != nil {
			a.Ops = registerAppendEvents(a.Ops, lastWrite)
		}
	}
	if ok, _ := registerStep(state, s.in, s.out); ok {
		// It could step, but every order through it failed later on.
		b.WriteString("; it could come next, but no order of the remaining operations then works")
	}
	a.Ops = registerAppendEvents(a.Ops, s)
	slices.Sort(a.Ops)
	a.Ops = slices.Compact(a.Ops)
	a.Explanation = b.String()
	return a
}

func registerAppendEvents(dst []int64, op *registerOp) []int64 {
	dst = append(dst, op.invoke)
	if op.complete >= 0 {
		dst = append(dst, op.complete)
	}
	return dst
}

// registerExplainSteps is the budget of porcupine's steps for explaining a key of n
// operations: at most a few million, and fewer for a long key, each of whose steps may
// keep a bitset of n bits.
func registerExplainSteps(n int) int {
	return min(4<<20, (256<<20)/(n/8+64))
}

// registerExplainJIT explains a key by the operation at whose completion the register
// search found no configuration left: every order of what had been invoked by then
// fails there.
func registerExplainJIT(key string, ops []registerOp, found jitResult) Anomaly {
	s := &ops[found.failed]
	before := 0
	for i := range ops {
		if ops[i].call < s.ret {
			before++
		}
	}
	return Anomaly{
		Kind: "not-linearizable",
		Ops:  registerAppendEvents([]int64{}, s),
		Explanation: fmt.Sprintf("%s: %s by process %d (%s) cannot be linearized: no order of the %d operations of the key invoked before it completed, those of unknown outcome taking effect or not, lets it complete as it did",
			registerKeyName(key), registerDescribe(s.in, s.out), s.process, registerEvents(s), before),
	}
}
