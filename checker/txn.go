package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Transactional models, by the name a history header or a flag gives them.
const (
	// ListAppendModel is a history of transactions over lists: appends of values
	// unique per key, and reads of whole lists (CheckListAppend).
	ListAppendModel = "list-append"
	// RWRegisterModel is a history of transactions over registers: writes of values
	// unique per key, and reads of single values (CheckRWRegister).
	RWRegisterModel = "rw-register"
)

// TxnFunction is the function (Op.F) of every operation of a transactional history.
const TxnFunction = "txn"

// TxnOptions configure CheckListAppend and CheckRWRegister. The zero value checks for
// strict serializability, Elle's default, with a one-second search budget per
// strongly connected component and no bound on the whole check.
type TxnOptions struct {
	// ConsistencyModels are the models the history must satisfy, by the names of
	// TxnConsistencyModels (snapshot-isolation, serializable, ...): Adya's levels
	// as Elle checks them, and the axiomatic levels of Biswas and Enea
	// (axiomatic-read-committed, axiomatic-read-atomic, causal), which
	// read-committed and read-atomic include. Empty means strict-serializable,
	// unless Anomalies is set: then only those anomalies fail the history. A model
	// that forbids nothing the checker can observe is refused.
	ConsistencyModels []string
	// Anomalies are anomalies (TxnAnomalies) that fail the history besides those the
	// models forbid, each with the anomalies that imply it: G1 brings G1a, G1b, G1c
	// and G0.
	Anomalies []string
	// CycleSearchTimeout bounds the search for each strongly connected component's
	// cycles; 0 means one second. A search cut short reports cycle-search-timeout,
	// which leaves the verdict Unknown unless something else proves it Invalid.
	CycleSearchTimeout time.Duration
	// OrderSearchSteps bounds, on rw-register histories (CheckRWRegister), the
	// search of each region of transactions for a version order, in steps (a
	// choice between two writes looked at), not time, so that a search's outcome
	// does not depend on how busy the machine is; 0 means
	// DefaultOrderSearchSteps. The whole search is bounded by Timeout and the
	// context. A search cut short reports cycle-search-timeout naming the bound:
	// Unknown, never Valid.
	OrderSearchSteps int64
	// Timeout bounds the whole check; 0 means no bound. When it or the context ends
	// first the verdict is Unknown.
	Timeout time.Duration

	// The register checker cannot read a version order off its values; these say
	// what else it may assume to infer one (besides that every key starts unset,
	// before every written value). They are assumptions about the database, so a
	// violation found with them holds only where they hold.

	// LinearizableKeys assumes each key is linearizable on its own: a transaction
	// that completed before another began saw or wrote an earlier version of every
	// key both touched (Elle's :linearizable-keys?).
	LinearizableKeys bool
	// SequentialKeys assumes each key is sequentially consistent on its own: the
	// same, in each process's order (Elle's :sequential-keys?).
	SequentialKeys bool
	// WFRKeys assumes writes follow reads within a transaction: a transaction that
	// read x = 1 and then wrote x = 2 installed a later version (Elle's :wfr-keys?).
	WFRKeys bool
}

// DefaultOrderSearchSteps is the steps each region's search for a version order may
// take when TxnOptions.OrderSearchSteps is 0: seconds of one core at the least
// (a step took about 10 us in regions of tens of transactions, more in larger
// ones), where the regions of the random histories the tests search took at most
// a few hundred.
const DefaultOrderSearchSteps = 1 << 20

// Validate reports the first option that cannot be checked for: an unknown model or
// anomaly name, a negative timeout. CheckListAppend and CheckRWRegister call it; a
// program that takes options from its users may call it before reading a history.
func (o TxnOptions) Validate() error {
	_, err := newTxnCheck(o)
	return err
}

// txnStatus is how a transaction ended.
type txnStatus uint8

const (
	txnOK   txnStatus = 1 + iota // committed
	txnInfo                      // unknown: committed or not
	txnFail                      // certainly not committed
)

func (s txnStatus) String() string {
	switch s {
	case txnOK:
		return "ok"
	case txnInfo:
		return "info"
	case txnFail:
		return "fail"
	}
	return "open"
}

// txnRec is one transaction of a history: its invocation and completion paired by
// process.
type txnRec struct {
	inv, comp int64 // history indices of the invocation and the completion; -1 when absent
	mop, nmop int32 // its micro-ops: txnHistory.mops[mop : mop+nmop]
	okPos     int32 // its position among the ok completions, in history order; -1 unless ok
	// rtLo, rtHi are the ok completions (by okPos) that real-time order links to this
	// transaction: those that completed before it was invoked and that no other
	// completion before its invocation already follows (the transitive reduction).
	// Empty when it was never invoked.
	rtLo, rtHi int32
	process    int32
	status     txnStatus
}

// txnMop is one micro-op of a transaction.
type txnMop struct {
	val  int64 // append or write: the value; register read: the value read; list read: a read index, -1 when unknown
	key  uint32
	kind mopKind
	null bool // a read of null, or one with no value
}

// txnModel is what CheckListAppend and CheckRWRegister do beyond the common reading of
// transactions: take each completed transaction's micro-ops, then decide.
type txnModel interface {
	// take records transaction id, whose micro-ops d holds.
	take(h *txnHistory, id int32, d *txnValue) error
}

// txnHistory reads a transactional history one event at a time.
type txnHistory struct {
	model string
	in    *txnInterner
	// prep decodes the values as each event is added (add, addPrepared); val holds
	// the micro-ops its records point into, view those of the transaction being
	// taken.
	prep txnPrep
	val  *txnValue
	view txnValue
	txns []txnRec
	mops []txnMop
	// pending holds each process's open transactions, oldest first.
	pending pendingTxns
	m       txnModel
	okCount int32 // ok completions so far
	rtStart int32 // ok completions before this one are implied by a later completion
	events  int64
	clients int64
	// progress is the share of the history read so far, when known (expect).
	progress float64
}

// pendingTxn is an invoked transaction not yet completed: its id, or for txnPrep its
// number among the invocations and its value.
type pendingTxn struct {
	id    int32
	value []byte
}

// pendingTxns holds the open transactions of each process.
type pendingTxns struct {
	slot []pendingTxn // slot[p]: process p's oldest open transaction; id -1 for none
	more map[int][]pendingTxn
}

// maxSlot bounds the processes held in slot; those beyond, rare, are in more.
const maxSlot = 1 << 20

// push opens transaction t of process p, with a copy of its value: a slot keeps its
// buffer from one transaction of its process to the next, so that the values of a
// history's invocations cost no allocation each.
func (q *pendingTxns) push(p int, t pendingTxn) {
	if p < maxSlot {
		for p >= len(q.slot) {
			q.slot = append(q.slot, pendingTxn{id: -1})
		}
		if q.slot[p].id < 0 {
			q.slot[p] = pendingTxn{id: t.id, value: append(q.slot[p].value[:0], t.value...)}
			return
		}
	}
	if q.more == nil {
		q.more = map[int][]pendingTxn{}
	}
	t.value = append([]byte(nil), t.value...)
	q.more[p] = append(q.more[p], t)
}

// pop closes process p's oldest open transaction and returns it. Its value is valid
// until the next push of process p.
func (q *pendingTxns) pop(p int) (pendingTxn, bool) {
	if p < len(q.slot) && q.slot[p].id >= 0 {
		t := q.slot[p]
		q.slot[p] = pendingTxn{id: -1, value: t.value[:0]}
		if m := q.more[p]; len(m) > 0 {
			q.slot[p] = m[0]
			if len(m) == 1 {
				delete(q.more, p)
			} else {
				q.more[p] = m[1:]
			}
		}
		return t, true
	}
	if p < maxSlot {
		return pendingTxn{}, false
	}
	m := q.more[p]
	if len(m) == 0 {
		return pendingTxn{}, false
	}
	if len(m) == 1 {
		delete(q.more, p)
	} else {
		q.more[p] = m[1:]
	}
	return m[0], true
}

// has reports whether process p has a transaction open.
func (q *pendingTxns) has(p int) bool {
	return p < len(q.slot) && q.slot[p].id >= 0 || len(q.more[p]) > 0
}

// all removes and returns every open transaction.
func (q *pendingTxns) all() []pendingTxn {
	var out []pendingTxn
	for p, t := range q.slot {
		if t.id >= 0 {
			out = append(out, t)
			q.slot[p] = pendingTxn{id: -1}
		}
	}
	for p, ts := range q.more {
		out = append(out, ts...)
		delete(q.more, p)
	}
	return out
}

func newTxnHistory(model string, m txnModel) *txnHistory {
	in := newTxnInterner()
	h := &txnHistory{model: model, in: in, prep: txnPrep{dec: txnDecoder{in: in}}, m: m}
	h.val = &h.prep.dec.txnValue
	return h
}

// txnPrepared is what txnPrep made of one event: for a completion, the micro-ops of the
// value that says what its transaction did (mops[mop:mop+n] of the txnValue they were
// decoded into), or the error that value is; nothing for another event.
type txnPrepared struct {
	mop, n int32
	err    error
}

// txnPrep decodes the values of a transactional history. It pairs each completion with
// its invocation as txnHistory.add does, to decode the value that says what the
// transaction did: the completion's, or for a failed or unknown one without a value,
// the invocation's.
type txnPrep struct {
	dec     txnDecoder
	pending pendingTxns // each process's open invocations, numbered in order, with their values
	seq     int32       // invocations so far
	// ambiguous holds the processes that have had several transactions open since
	// they last had none: which invocation their completions answer is not known.
	ambiguous map[int]bool
}

// prepare decodes, for a completion, its transaction's value into p.dec's micro-ops:
// those txnScan staged there (ev.taken), or the value the Reader read (ev.raw). An
// event txnHistory.add skips or refuses gets no record.
func (p *txnPrep) prepare(ev *txnEvent) txnPrepared {
	if ev.process < 0 || ev.f != TxnFunction || ev.process > math.MaxInt32 {
		return txnPrepared{}
	}
	if ev.typ == histories.Invoke {
		if p.pending.has(ev.process) {
			if p.ambiguous == nil {
				p.ambiguous = map[int]bool{}
			}
			p.ambiguous[ev.process] = true
		}
		p.pending.push(ev.process, pendingTxn{id: p.seq, value: ev.raw})
		p.seq++
		return txnPrepared{}
	}
	status, ok := txnStatusOf(ev.typ)
	if !ok {
		return txnPrepared{}
	}
	// With several open (Elle's own tests build such histories; histories.Reader
	// refuses them), which invocation a completion answers is not known.
	several := p.ambiguous[ev.process]
	inv, _ := p.pending.pop(ev.process)
	if several && !p.pending.has(ev.process) {
		delete(p.ambiguous, ev.process)
	}
	var rec txnPrepared
	switch value := ev.raw; {
	case ev.taken && status != txnOK && ev.null:
		return p.decode(inv.value)
	case ev.taken:
		rec = p.commit(ev)
	case status != txnOK && (len(value) == 0 || string(value) == "null"):
		return p.decode(inv.value)
	case status == txnOK && len(value) == 0:
		return txnPrepared{}
	default:
		rec = p.decode(value)
	}
	if status == txnOK && !several {
		if err := p.sameShape(inv.value, rec); err != nil {
			return txnPrepared{err: err}
		}
	}
	return rec
}

// commit interns the keys of the micro-ops txnScan staged for ev, in their order, as
// txnDecoder would have as it read them.
func (p *txnPrep) commit(ev *txnEvent) txnPrepared {
	mops := p.dec.mops[ev.mop : ev.mop+ev.n]
	for i := range mops {
		mops[i].key = p.dec.in.intKey(mops[i].rawKey)
	}
	return txnPrepared{mop: ev.mop, n: ev.n}
}

// decode appends the micro-ops of value to p.dec's, all of them or none.
func (p *txnPrep) decode(value []byte) txnPrepared {
	mop, list := len(p.dec.mops), len(p.dec.list)
	if err := p.dec.decodeMore(value); err != nil {
		p.dec.mops, p.dec.list = p.dec.mops[:mop], p.dec.list[:list]
		return txnPrepared{err: err}
	}
	return txnPrepared{mop: int32(mop), n: int32(len(p.dec.mops) - mop)}
}

// close decodes the values of the transactions never completed, in invocation order:
// the order in which txnHistory.close takes them.
func (p *txnPrep) close() []txnPrepared {
	open := p.pending.all()
	slices.SortFunc(open, func(a, b pendingTxn) int { return int(a.id - b.id) })
	out := make([]txnPrepared, len(open))
	for i, o := range open {
		out[i] = p.decode(o.value)
	}
	return out
}

// txnEvent is what the checking keeps of an event, and how its value was read: by the
// Reader, into raw, or by txnScan (taken), its micro-ops staged in the batch's, their
// keys not yet interned (mops[mop:mop+n]; null for a value of null), or for an
// invocation its bytes copied into raw.
type txnEvent struct {
	index   int64
	process int
	f       string
	raw     []byte
	mop, n  int32
	typ     histories.Type
	value   bool // the event had a value
	taken   bool
	null    bool
}

// eventOf returns what the checking keeps of op, its value read by the Reader.
func eventOf(op *histories.Op) txnEvent {
	var ev txnEvent
	ev.set(op)
	return ev
}

// set makes ev what the checking keeps of op, its value read by the Reader.
func (ev *txnEvent) set(op *histories.Op) {
	ev.index, ev.process, ev.f, ev.typ = op.Index, op.Process, op.F, op.Type
	ev.value, ev.raw = len(op.Value) > 0, op.Value
}

// add takes the next event of the history, decoding its value here. Events of the
// nemesis are skipped.
func (h *txnHistory) add(op histories.Op) error {
	h.prep.dec.mops, h.prep.dec.list = h.prep.dec.mops[:0], h.prep.dec.list[:0]
	ev := eventOf(&op)
	return h.addPrepared(&ev, h.prep.prepare(&ev))
}

// addPrepared takes the next event of the history, whose value h.prep has decoded into
// rec (and *h.val). Events of the nemesis are skipped.
func (h *txnHistory) addPrepared(op *txnEvent, rec txnPrepared) error {
	h.events++
	if op.process < 0 {
		return nil
	}
	h.clients++
	if op.f != TxnFunction {
		return fmt.Errorf("history index %d: %s history has function %q (want %s)", op.index, h.model, op.f, TxnFunction)
	}
	if op.process > math.MaxInt32 {
		return fmt.Errorf("history index %d: process %d out of range", op.index, op.process)
	}
	if op.typ == histories.Invoke {
		// A process runs one transaction at a time, but Elle's own tests build
		// histories where one has several open: completions pair with its
		// invocations in order.
		id, err := h.newTxn()
		if err != nil {
			return err
		}
		h.txns[id] = txnRec{inv: op.index, comp: -1, okPos: -1, rtLo: h.rtStart, rtHi: h.okCount, process: int32(op.process)}
		h.pending.push(op.process, pendingTxn{id: id})
		return nil
	}
	status, ok := txnStatusOf(op.typ)
	if !ok {
		return fmt.Errorf("history index %d: event type %s is not a completion", op.index, op.typ)
	}
	p, invoked := h.pending.pop(op.process)
	var id int32
	if invoked {
		id = p.id
	} else {
		// A completion without its invocation (histories written as completions
		// alone, as Elle's own tests are): nothing is known of when it began.
		var err error
		if id, err = h.newTxn(); err != nil {
			return err
		}
		h.txns[id] = txnRec{inv: -1, okPos: -1, process: int32(op.process)}
	}
	// A failed or unknown completion usually carries no value: what it was asked is
	// all that is known, and h.prep decoded the invocation's.
	if status == txnOK && !op.value {
		return fmt.Errorf("history index %d: ok transaction without a value: what it read is unknown", op.index)
	}
	return h.complete(id, op.index, status, rec)
}

func (h *txnHistory) newTxn() (int32, error) {
	if len(h.txns) >= math.MaxInt32-1 {
		return 0, errors.New("more transactions than the checker can hold")
	}
	h.txns = grownTo(h.txns, 1, h.expect(len(h.txns)+1))
	h.txns = append(h.txns, txnRec{})
	return int32(len(h.txns) - 1), nil
}

// complete records how transaction id ended and takes its micro-ops, decoded into rec.
func (h *txnHistory) complete(id int32, index int64, status txnStatus, rec txnPrepared) error {
	t := &h.txns[id]
	t.comp, t.status = index, status
	if status == txnOK {
		t.okPos = h.okCount
		h.okCount++
		// Every ok completion linked to this transaction at its invocation now
		// precedes it: later invocations need no edge from them.
		if t.inv >= 0 {
			h.rtStart = max(h.rtStart, t.rtHi)
		}
	}
	if rec.err != nil {
		return fmt.Errorf("history index %d: %w", h.at(id), rec.err)
	}
	return h.take(id, rec)
}

// take hands transaction id's micro-ops, decoded into rec, to the model.
func (h *txnHistory) take(id int32, rec txnPrepared) error {
	h.view = txnValue{mops: h.val.mops[rec.mop : rec.mop+rec.n], list: h.val.list}
	err := h.m.take(h, id, &h.view)
	h.view = txnValue{}
	return err
}

// at is the history index that names transaction id in errors: its completion, or its
// invocation while open.
func (h *txnHistory) at(id int32) int64 {
	if t := h.txns[id]; t.comp >= 0 {
		return t.comp
	}
	return h.txns[id].inv
}

// close ends the history: transactions still open are as unknown as info ones.
func (h *txnHistory) close() error {
	open := h.pending.all()
	// In invocation order, so that what the check reports does not depend on a map's.
	slices.SortFunc(open, func(a, b pendingTxn) int { return int(a.id - b.id) })
	h.prep.dec.mops, h.prep.dec.list = h.prep.dec.mops[:0], h.prep.dec.list[:0]
	h.val = &h.prep.dec.txnValue
	recs := h.prep.close()
	if len(recs) != len(open) {
		return fmt.Errorf("internal error: %d transactions open, %d decoded", len(open), len(recs))
	}
	for i, p := range open {
		t := &h.txns[p.id]
		t.status = txnInfo
		if err := recs[i].err; err != nil {
			return fmt.Errorf("history index %d: %w", t.inv, err)
		}
		if err := h.take(p.id, recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// appendMops stores the micro-ops of d for transaction id, the value of each list read
// given by readIndex (nil for registers).
func (h *txnHistory) appendMops(id int32, d *txnValue, readIndex func(i int, m rawMop) int64) {
	t := &h.txns[id]
	t.mop, t.nmop = int32(len(h.mops)), int32(len(d.mops))
	h.mops = grownTo(h.mops, len(d.mops), h.expect(len(h.mops)+len(d.mops)))
	for i, m := range d.mops {
		tm := txnMop{key: m.key, kind: m.kind, null: !m.hasValue, val: m.val}
		if readIndex != nil && m.kind == mopRead {
			tm.val = readIndex(i, m)
		}
		h.mops = append(h.mops, tm)
	}
}

// grown returns s with room for n more elements, doubling its capacity when it must
// grow: append's growth by a quarter, on slices of millions of entries, copies each
// several times over.
func grown[T any](s []T, n int) []T {
	return grownTo(s, n, 0)
}

// grownTo is grown for a table expected to reach want elements (0: not known): when it
// must grow it grows to that at once, so that a table of millions of entries is
// allocated about once rather than copied at each doubling, every copy a fresh
// allocation whose pages the kernel must supply; by an eighth at least, should the
// expectation fall short.
func grownTo[T any](s []T, n, want int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	c := max(2*cap(s), len(s)+n, 1024)
	if want > 0 {
		c = max(len(s)+n, want, cap(s)+cap(s)/8)
	}
	g := make([]T, len(s), c)
	copy(g, s)
	return g
}

// expect returns the length a table of the history that holds n entries now is
// expected to reach by the end of the history, from the share of it read so far; 0
// when that is not known. Memory not yet written costs nothing: the kernel supplies a
// page when it is first written, and an expectation a little too large costs only
// address space.
func (h *txnHistory) expect(n int) int {
	if h.progress <= 0 || h.progress >= 1 {
		return 0
	}
	return int(float64(n)/h.progress*1.05) + 1024
}

// txnMops returns transaction id's micro-ops.
func (h *txnHistory) txnMops(id int32) []txnMop {
	t := h.txns[id]
	return h.mops[t.mop : t.mop+t.nmop]
}

// txnCheck is what a transactional check was asked: the anomalies that fail the
// history, those worth reporting, and which order beyond data dependencies the graph
// needs.
type txnCheck struct {
	opt        TxnOptions
	prohibited map[string]bool
	reportable map[string]bool
	realtime   bool // real-time edges (which imply process order)
	process    bool // process edges, when real time is not needed
}

// newTxnCheck validates opt and works out what the check looks for.
func newTxnCheck(opt TxnOptions) (*txnCheck, error) {
	if err := checkModelNames(opt.ConsistencyModels); err != nil {
		return nil, err
	}
	if err := checkAnomalyNames(opt.Anomalies); err != nil {
		return nil, err
	}
	if opt.CycleSearchTimeout < 0 || opt.Timeout < 0 || opt.OrderSearchSteps < 0 {
		return nil, errors.New("timeouts and steps must not be negative")
	}
	models := opt.ConsistencyModels
	if len(models) == 0 && len(opt.Anomalies) == 0 {
		models = []string{"strict-serializable"}
	}
	c := &txnCheck{opt: opt, prohibited: prohibitedAnomalies(models, opt.Anomalies)}
	c.reportable = map[string]bool{"empty-transaction-graph": true, "cycle-search-timeout": true}
	for a := range c.prohibited {
		c.reportable[a] = true
	}
	for a := range c.reportable {
		switch {
		case hasSuffix(a, "-realtime"):
			c.realtime = true
		case hasSuffix(a, "-process"):
			c.process = true
		}
	}
	if c.realtime {
		c.process = false
	}
	return c, nil
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

// txnOptionsFrom returns o completed from the history header's params where o leaves
// a field unset: "consistency_models" and "anomalies" (arrays of names),
// "linearizable_keys", "sequential_keys" and "wfr_keys" (booleans), so that a run's
// history is checked again for what the run checked it for.
func txnOptionsFrom(h *histories.Header, o TxnOptions) (TxnOptions, error) {
	if h == nil {
		return o, nil
	}
	get := func(name string, into any) error {
		raw, ok := h.Params[name]
		if !ok || string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("header params.%s %s: %v", name, raw, err)
		}
		return nil
	}
	if len(o.ConsistencyModels) == 0 && len(o.Anomalies) == 0 {
		if err := get("consistency_models", &o.ConsistencyModels); err != nil {
			return o, err
		}
		if err := get("anomalies", &o.Anomalies); err != nil {
			return o, err
		}
	}
	for name, p := range map[string]*bool{"linearizable_keys": &o.LinearizableKeys, "sequential_keys": &o.SequentialKeys, "wfr_keys": &o.WFRKeys} {
		if !*p {
			if err := get(name, p); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// txnChecker is a list-append or rw-register check fed one event at a time.
type txnChecker struct {
	h     *txnHistory
	c     *txnCheck
	model interface {
		txnModel
		// analyze infers the dependency graph and the anomalies found without it.
		analyze(ctx context.Context, h *txnHistory, c *txnCheck) (*txnAnalysis, error)
	}
}

// newTxnChecker returns a checker of model (ListAppendModel or RWRegisterModel).
func newTxnChecker(model string, opt TxnOptions) (*txnChecker, error) {
	c, err := newTxnCheck(opt)
	if err != nil {
		return nil, err
	}
	tc := &txnChecker{c: c}
	switch model {
	case ListAppendModel:
		m := newListAppend()
		tc.model = m
	case RWRegisterModel:
		m := newRWRegister()
		tc.model = m
	default:
		return nil, fmt.Errorf("not a transactional model: %q", model)
	}
	tc.h = newTxnHistory(model, tc.model)
	return tc, nil
}

// add takes the next event.
func (tc *txnChecker) add(op histories.Op) error { return tc.h.add(op) }

// result decides the history once every event has been added.
func (tc *txnChecker) result(ctx context.Context) (Result, error) {
	if err := tc.h.close(); err != nil {
		return Result{}, err
	}
	if tc.h.clients == 0 {
		// Elle's check of a history with no client transaction: unknown, an empty
		// transaction graph. Events of no client (the nemesis's, Jepsen ops without a
		// :process) are not transactions.
		return Result{Verdict: Unknown, Checker: tc.h.model, Anomalies: []Anomaly{},
			Summary: "nothing was checked: the history holds no client's transaction"}, nil
	}
	if ctx.Err() != nil {
		return txnInterrupted(tc.h.model, ctx), nil
	}
	an, err := tc.model.analyze(ctx, tc.h, tc.c)
	if err != nil {
		return Result{}, err
	}
	if an.join != nil {
		defer an.join()
	}
	if ctx.Err() != nil {
		return txnInterrupted(tc.h.model, ctx), nil
	}
	// The dependency graph's cycles decide nothing when only the axiomatic levels
	// are asked for, which their own check decides completely.
	if len(incompleteModels(tc.h.model, tc.c.opt)) > 0 {
		an.findCycles(ctx, tc.h, tc.c)
	}
	if an.join != nil {
		an.join()
	}
	axCheckFor(ctx, tc.h, an, tc.c, tc.model)
	searchVersionOrders(ctx, tc.h, an, tc.c, tc.model)
	if ctx.Err() != nil {
		return interrupted(tc.h.model, ctx.Err()), nil
	}
	if ctx.Err() != nil {
		return txnInterrupted(tc.h.model, ctx), nil
	}
	return an.result(tc.h, tc.c), nil
}

// txnOptions returns the transactional options of a Check: opt.Txn, its timeout from
// opt.Timeout when unset, its other settings from the header where opt leaves them.
func txnOptions(h *histories.Header, opt Options) (TxnOptions, error) {
	to := opt.Txn
	if to.Timeout == 0 {
		to.Timeout = opt.Timeout
	}
	return txnOptionsFrom(h, to)
}

// checkTxnStream is CheckStream for a transactional model: the events are taken as
// they come, and only what the checker keeps of each transaction stays in memory.
func checkTxnStream(ctx context.Context, model string, h *histories.Header, next func() (histories.Op, error), opt Options) (Result, error) {
	return checkTxnFed(ctx, model, h, opt, func(ctx context.Context, th *txnHistory, seen *completions) (bool, error) {
		return feedTxnAhead(ctx, next, th, seen)
	})
}

// checkTxnReader is checkTxnStream for the events of rd, whose values are decoded as rd
// reads its lines (feedTxnRead).
func checkTxnReader(ctx context.Context, model string, rd *histories.Reader, opt Options) (Result, error) {
	return checkTxnFed(ctx, model, rd.Header(), opt, func(ctx context.Context, th *txnHistory, seen *completions) (bool, error) {
		return feedTxnRead(ctx, rd, th, seen)
	})
}

// checkTxnFed checks the transactional history that feed adds to th, each event also
// to seen.
func checkTxnFed(ctx context.Context, model string, h *histories.Header, opt Options, feed func(ctx context.Context, th *txnHistory, seen *completions) (bool, error)) (Result, error) {
	to, err := txnOptions(h, opt)
	if err != nil {
		return Result{}, err
	}
	tc, err := newTxnChecker(model, to)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := txnDeadline(ctx, to)
	defer cancel()
	ctx, stopMemory := memoryContext(ctx, opt.MaxMemory)
	defer stopMemory()
	var checked completions
	done, err := feed(ctx, tc.h, &checked)
	if err != nil {
		return Result{}, err
	}
	if !done {
		return txnInterrupted(model, ctx), nil
	}
	res, err := tc.result(ctx)
	return finish(res, nil, &checked), err
}

// txnBatch is a batch of events read ahead.
type txnBatch struct {
	events []txnEvent
	val    txnValue // the micro-ops txnScan staged
	raw    []byte   // the invocations' values txnScan read
	err    error    // of reading, after the events; io.EOF at the end
	// progress is the share of the history read by the end of the batch, when known
	// (histories.Reader.Progress).
	progress float64
}

// txnBatchSize is how many events a batch holds.
const txnBatchSize = 1024

// txnPipe carries batches of events from the goroutine that reads them to the one that
// decodes and checks them (txnPipe.check), and back for reuse.
type txnPipe struct {
	full chan *txnBatch
	free chan *txnBatch
	stop chan struct{}
	// done closes once the reading goroutine has stopped.
	done chan struct{}
}

func newTxnPipe() *txnPipe {
	return &txnPipe{full: make(chan *txnBatch, 4), free: make(chan *txnBatch, 10), stop: make(chan struct{}), done: make(chan struct{})}
}

// get returns an empty batch to fill, reused when one is free.
func (p *txnPipe) get() *txnBatch {
	var b *txnBatch
	select {
	case b = <-p.free:
	default:
		b = &txnBatch{}
	}
	b.events, b.raw = b.events[:0], b.raw[:0]
	b.val = txnValue{b.val.mops[:0], b.val.list[:0]}
	return b
}

// send passes b on to the check, and false when the check has stopped.
func (p *txnPipe) send(b *txnBatch) bool {
	select {
	case p.full <- b:
		return true
	case <-p.stop:
		return false
	}
}

// check decodes the values of the events of the batches that come through p.full and
// adds the events to h, looking at ctx every checkEvery events. On its return the
// reading goroutine has stopped. done is false when ctx ended first.
func (p *txnPipe) check(ctx context.Context, h *txnHistory) (done bool, err error) {
	finish := func() {
		close(p.stop)
		for range p.full {
		}
		<-p.done
	}
	prep := &h.prep
	n := 0
	for b := range p.full {
		h.progress = b.progress
		prep.dec.txnValue = b.val
		h.val = &prep.dec.txnValue
		for i := range b.events {
			if n%checkEvery == 0 && ctx.Err() != nil {
				finish()
				return false, nil
			}
			n++
			ev := &b.events[i]
			if err := h.addPrepared(ev, prep.prepare(ev)); err != nil {
				finish()
				return false, err
			}
		}
		if b.err != nil {
			finish()
			if errors.Is(b.err, io.EOF) {
				return ctx.Err() == nil, nil
			}
			if ctx.Err() != nil {
				// The reader stopped because ctx did (CheckStream): interrupted.
				return false, nil
			}
			return false, b.err
		}
		b.val = prep.dec.txnValue
		clear(b.events)
		select {
		case p.free <- b:
		default:
		}
	}
	<-p.done
	return ctx.Err() == nil, nil
}

// feedTxnAhead adds the events from next to h, each also to seen, next called on a
// goroutine of its own a few batches of events ahead of the decoding of their values
// and the checking. next is never called after feedTxnAhead returns. done is false
// when ctx ended first.
func feedTxnAhead(ctx context.Context, next func() (histories.Op, error), h *txnHistory, seen *completions) (done bool, err error) {
	p := newTxnPipe()
	go func() {
		defer close(p.done)
		defer close(p.full)
		for {
			b := p.get()
			var err error
			for len(b.events) < txnBatchSize {
				var op histories.Op
				if op, err = next(); err != nil {
					break
				}
				seen.see(&op)
				b.events = append(b.events, eventOf(&op))
			}
			b.err = err
			if !p.send(b) || err != nil {
				return
			}
		}
	}()
	return p.check(ctx, h)
}

// feedTxnRead is feedTxnAhead for the events of rd, their values read as rd reads the
// lines (txnScan), each once. rd's Values is its own until feedTxnRead returns, and
// unset again then.
func feedTxnRead(ctx context.Context, rd *histories.Reader, h *txnHistory, seen *completions) (done bool, err error) {
	p := newTxnPipe()
	scan := &txnScan{}
	rd.Values = scan
	go func() {
		defer close(p.done)
		defer func() { rd.Values = nil }()
		defer close(p.full)
		for {
			b := p.get()
			scan.val = &b.val
			var err error
			var op histories.Op
			for len(b.events) < txnBatchSize {
				if err = rd.NextInto(&op); err != nil {
					scan.discard()
					break
				}
				seen.see(&op)
				// The event is written in place: it and the Op are copied no more.
				b.events = append(b.events, txnEvent{})
				ev := &b.events[len(b.events)-1]
				ev.set(&op)
				if rd.ValueRead() {
					ev.taken, ev.value = true, true
					switch {
					case !op.IsClient() || op.F != TxnFunction || op.Process > math.MaxInt32:
						scan.discard()
					case op.Type == histories.Invoke:
						// Decoded only if its transaction ends without a value of its
						// own: its bytes are kept, not its micro-ops.
						start := len(b.raw)
						b.raw = append(b.raw, scan.raw...)
						ev.raw = b.raw[start:len(b.raw):len(b.raw)]
						scan.discard()
					default:
						ev.mop, ev.n, ev.null = scan.keep()
					}
				} else {
					scan.discard()
				}
			}
			b.err, b.progress = err, rd.Progress()
			if !p.send(b) || err != nil {
				return
			}
		}
	}()
	return p.check(ctx, h)
}

// checkTxn runs model over ops.
func checkTxn(ctx context.Context, model string, ops []histories.Op, opt TxnOptions) (Result, error) {
	tc, err := newTxnChecker(model, opt)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := txnDeadline(ctx, opt)
	defer cancel()
	for i, op := range ops {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return interrupted(model, ctx.Err()), nil
		}
		if err := tc.add(op); err != nil {
			return Result{}, err
		}
	}
	return tc.result(ctx)
}

// txnDeadline bounds ctx by opt.Timeout.
func txnDeadline(ctx context.Context, opt TxnOptions) (context.Context, context.CancelFunc) {
	if opt.Timeout > 0 {
		return context.WithTimeout(ctx, opt.Timeout)
	}
	return context.WithCancel(ctx)
}

// CheckListAppend checks a history of transactions over lists against the consistency
// models of opt, in the manner of Jepsen's Elle (Kingsbury and Alvaro, "Elle:
// Inferring Isolation Anomalies from Experimental Observations", VLDB 2020).
//
// Every operation has F "txn" and a value that is a JSON array of micro-ops:
// ["append", k, v] appends v to the list at key k; ["r", k, l] reads it, l being the
// whole list (null in an invocation, where it is not known yet). Keys and values may
// be any JSON value; every value appended to a key must be unique. A transaction that
// completed ok committed; one that failed did not, and a read that saw its writes saw
// aborted state (G1a); one that ended in info, or never ended, may have committed or
// not, and its writes count once a read has seen them. An info completion's value
// replaces the invocation's when it has one.
//
// Because each read returns the whole list, reads give the order in which a key's
// appends took effect (its version order): the longest read, of which every other
// must be a prefix (incompatible-order otherwise, duplicate-elements for a value read
// twice). From it come the dependencies between transactions: write-write (ww: T2
// appended right after T1), write-read (wr: T2 read the list up to T1's append) and
// read-write (rw: T1 read a list that T2 then extended), plus real-time and process
// order where the models need them. A cycle of dependencies is an anomaly named by
// the edges it needs: G0 (ww only), G1c (ww and wr), G-single-item (exactly one rw),
// G-nonadjacent-item (several rw, never two in a row), G2-item (two rw in a row), each
// with a -process or -realtime variant when it needs those orders. The checker finds
// the strongly connected components of the graph, proves which kinds of cycle exist
// in each, and searches each for the shortest cycle of every kind, worst first,
// within opt.CycleSearchTimeout. Found without the graph: G1a, G1b (a read of another
// transaction's intermediate state), internal (a read that disagrees with the
// transaction's own earlier micro-ops), future-read (a read of a value the
// transaction appends only later), dirty-update, lost-update (two committed
// transactions that read the same version of a key and both appended to it) and
// garbage-read (a value no transaction appended).
//
// The Result is Invalid when an anomaly the models forbid is found; Unknown when only
// anomalies that leave it undecided are (an empty dependency graph, a search cut
// short) or the check was interrupted; Valid otherwise. Each Anomaly names its
// transactions by the history index of their completion, and a cycle's Explanation
// has one line per edge. Details holds "not" (the weakest models the history
// violates), "also_not" (every other model it rules out), "anomaly_types", "counts"
// (per kind), and "cycles" (each cycle's transactions and edges as data). The error
// means the history is not one of transactions: another function, a micro-op that is
// not a read or an append, a value appended twice to a key.
func CheckListAppend(ctx context.Context, ops []histories.Op, opt TxnOptions) (Result, error) {
	return checkTxn(ctx, ListAppendModel, ops, opt)
}

// CheckRWRegister checks a history of transactions over registers against the
// consistency models of opt, in the manner of CheckListAppend. Micro-ops are
// ["w", k, v] (write v to register k) and ["r", k, v] (read v; null for a register
// never written, and in an invocation, where it is not known yet); every value
// written to a key must be unique.
//
// A read of a register tells which write it saw but not which came before it, so the
// version order of a key is only what can be inferred: the initial state precedes
// every value, and opt's assumptions (WFRKeys, SequentialKeys, LinearizableKeys) add
// more; an assumption that would make a key's versions cyclic is left out and
// reported as cyclic-versions. Dependencies follow: wr from the write a read saw, ww
// and rw along the inferred version order; and the cycles and other anomalies are
// those of CheckListAppend (without the list's own: incompatible-order,
// duplicate-elements, dirty-update, future-read, garbage-read). An info transaction
// takes part once a read has seen one of its writes, which proves it committed.
//
// The axiomatic levels of Biswas and Enea (axiomatic-read-committed,
// axiomatic-read-atomic, causal; read-committed and read-atomic ask for them besides
// Adya's) are decided completely: the history satisfies one exactly when no cycle of
// session order (each process's transactions), write-read and the edges the level's
// axiom forces exists, and the Result names such a cycle, one line per edge, as
// read-committed-cycle, read-atomic-cycle or causal-cycle (causality-cycle when
// session order and write-read alone close it).
//
// Serializability and snapshot isolation (serializable, snapshot-isolation, and
// their strong-session and strong variants, strict-serializable among them) are
// decided completely too, where nothing the reads reveal rules them out already: a
// search looks for a version order of every key under which the dependency graph
// (with process or real-time order as the model has it) has no cycle the model
// forbids (for snapshot isolation, none without two adjacent rw edges). Found, the
// verdict names the models it decides ("complete for ..."; Details'
// "complete_for"); none existing, the anomaly <model>-cycle-every-order (such as
// PL-3-cycle-every-order) explains it as a tree, each two writes of a key either
// way and the cycle each choice closes; a search that takes more than
// OrderSearchSteps on a region of transactions, or outlasts the check's Timeout,
// leaves the verdict Unknown (cycle-search-timeout), never Valid. Details'
// "version_order_search" gives each search's model, outcome, regions and steps.
func CheckRWRegister(ctx context.Context, ops []histories.Op, opt TxnOptions) (Result, error) {
	return checkTxn(ctx, RWRegisterModel, ops, opt)
}

// txnStatusOf is the status a completion of type t gives its transaction; false for a
// type that completes nothing.
func txnStatusOf(t histories.Type) (txnStatus, bool) {
	switch t {
	case histories.OK:
		return txnOK, true
	case histories.Info:
		return txnInfo, true
	case histories.Fail:
		return txnFail, true
	}
	return 0, false
}
