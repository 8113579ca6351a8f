package checker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// BankModel names the bank model in a history's header and in Options.Model.
const BankModel = "bank"

// Transfer is the value of a bank history's transfer invocation: move Amount (not
// negative) from account From to account To, two accounts of the header's params.
type Transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// Balances is the value of a bank history's ok read, and its initial state: every
// account with its balance.
type Balances map[string]int64

// BankParams are a bank history's parameters, in its header's params: the accounts
// with their initial balances ("accounts"), the floor no balance may go below
// ("floor", 0 when absent) and per-account floors that override it ("floors").
type BankParams struct {
	Accounts Balances `json:"accounts"`
	Floor    int64    `json:"floor,omitempty"`
	Floors   Balances `json:"floors,omitempty"`
	// Log says the store logs each transfer's op id in the same transaction as the
	// transfer, and every read returns the log beside the balances (BankLog): the
	// check then holds each transfer id to exactly once by the log ("log": true).
	Log bool `json:"log,omitempty"`
}

// HeaderParams returns p as the params of a history header.
func (p BankParams) HeaderParams() map[string]json.RawMessage {
	m := map[string]json.RawMessage{"accounts": histories.Value(p.Accounts)}
	if p.Floor != 0 {
		m["floor"] = histories.Value(p.Floor)
	}
	if len(p.Floors) > 0 {
		m["floors"] = histories.Value(p.Floors)
	}
	if p.Log {
		m["log"] = histories.Value(true)
	}
	return m
}

// floor returns the floor of account a.
func (p BankParams) floor(a string) int64 {
	if f, ok := p.Floors[a]; ok {
		return f
	}
	return p.Floor
}

// bankFromHeader reads BankParams from a bank history's header.
func bankFromHeader(h *histories.Header) (BankParams, error) {
	var p BankParams
	if h == nil {
		return p, errors.New("bank history: no header to read the accounts from")
	}
	raw, ok := h.Params["accounts"]
	if !ok {
		return p, errors.New("bank history: header has no params.accounts (account -> initial balance)")
	}
	if err := json.Unmarshal(raw, &p.Accounts); err != nil || len(p.Accounts) == 0 {
		return p, fmt.Errorf("bank history: params.accounts %s is not an object of account to balance (%v)", raw, err)
	}
	if raw, ok := h.Params["floor"]; ok {
		if err := json.Unmarshal(raw, &p.Floor); err != nil {
			return p, fmt.Errorf("bank history: params.floor %s: %v", raw, err)
		}
	}
	if raw, ok := h.Params["floors"]; ok {
		if err := json.Unmarshal(raw, &p.Floors); err != nil {
			return p, fmt.Errorf("bank history: params.floors %s: %v", raw, err)
		}
	}
	if raw, ok := h.Params["log"]; ok {
		if err := json.Unmarshal(raw, &p.Log); err != nil {
			return p, fmt.Errorf("bank history: params.log %s: want true or false", raw)
		}
	}
	return p, nil
}

// Bank operations, in a history:
//
//	transfer  invoke with a Transfer {"from":"a","to":"b","amount":5}; then ok
//	          (applied), fail (certainly not applied: refused for lack of funds, a
//	          conflict), info or no completion (unknown)
//	read      invoke, then ok with Balances {"a":95,"b":5}, every account of the
//	          header; fail or info reads carry nothing
//
// What the checker proves, exactly:
//
//   - conservation: every ok read's balances sum to the initial total (not-conserved);
//   - floors: no ok read shows a balance below its account's floor (below-floor);
//   - at most once, from the final state: every ok read that begins after every
//     transfer ended (a final read, or Options.Final) must equal the initial balances
//     plus every acknowledged transfer once plus some choice of the unknown transfers,
//     each at most once (final-mismatch). A duplicated or lost transfer is thereby found
//     whenever no such choice hides it; the anomaly names the transfers whose one more
//     (or one less) application would explain the difference.
//
// What it cannot prove: a duplicate hidden by a choice of unknown transfers of the same
// accounts and amounts (an unknown transfer a->b 1 that did not apply and an
// acknowledged a->b 1 that applied twice give the same balances), or by a loss of the
// same shape; that reads during the run are consistent with some order of the
// transfers (only their sums and floors are held); that no transfer overdrew an
// account at the moment it applied when no read saw it. The search over choices of
// unknown transfers groups transfers of the same accounts and amount and prunes every
// partial sum that can no longer reach the target; when it would hold more than
// bankMaxStates partial sums the verdict is Unknown.

// bankMaxStates bounds the partial sums the final-state search keeps.
const bankMaxStates = 1 << 20

// bankGroup is the transfers of one shape (accounts and amount) among the unknown ones.
type bankGroup struct {
	t     Transfer
	delta []int64 // per account, in sorted account order
	n     int     // how many
	ops   []*pairedOp
}

// CheckBank decides whether ops, a bank history over the accounts and floors of p,
// conserves the total at every read, keeps every balance read at or above its floor,
// and applies every transfer at most once (acknowledged ones exactly once) as far as
// the final balances can tell: see the model's documentation above for what that
// proves and what it cannot. Anomaly kinds: not-conserved, below-floor, final-mismatch.
// The error reports a history that cannot be checked: a transfer naming an unknown
// account or a negative amount, a read that does not list every account, an unknown
// function. With p.Log the reads carry the transfer log (BankLog) and the final reads
// are held to it: exactly once per transfer op id, and the balances the log gives
// (anomaly kinds duplicate, lost, fail-applied, phantom, log-mismatch); a history with
// a log and no final read cannot be checked.
func CheckBank(ctx context.Context, ops []histories.Op, p BankParams) (Result, error) {
	if ctx.Err() != nil {
		return interrupted(BankModel, ctx.Err()), nil
	}
	if len(p.Accounts) == 0 {
		return Result{}, errors.New("bank history: no accounts")
	}
	if p.Log {
		return checkBankLog(ctx, ops, p)
	}
	all, err := pairOps(BankModel, ops, "transfer", "read")
	if err != nil {
		return Result{}, err
	}
	c := newBankCheck(p)
	tally, stopped, err := c.scan(ctx, all)
	if stopped {
		return interrupted(BankModel, ctx.Err()), nil
	}
	if err != nil {
		return Result{}, err
	}
	gs := sortedBankGroups(tally.groups)
	finals := finalReads(all, "read")
	applied, undecided, stopped := c.judgeFinals(ctx, finals, tally.target, gs)
	if stopped {
		return interrupted(BankModel, ctx.Err()), nil
	}
	return c.result(tally, len(finals), applied, undecided), nil
}

// newBankCheck prepares the check of a history over p's accounts, in sorted order.
func newBankCheck(p BankParams) bankCheck {
	accounts := make([]string, 0, len(p.Accounts))
	var total int64
	for a, b := range p.Accounts {
		accounts = append(accounts, a)
		total += b
	}
	slices.Sort(accounts)
	at := map[string]int{}
	for i, a := range accounts {
		at[a] = i
	}
	return bankCheck{p: p, accounts: accounts, at: at, total: total}
}

// bankTally is what one pass over a bank history's transfers gathers for the final-state
// search.
type bankTally struct {
	target                []int64 // per account, less what the acknowledged transfers added; plus final - initial, the unknown ones must explain it
	groups                map[Transfer]*bankGroup
	acked, failed, unsure int
}

// scan checks every ok read as it passes and tallies the transfers: acknowledged ones
// into the target, unknown ones into groups of one shape. stopped says ctx ended first;
// the error reports a transfer the history cannot hold.
func (c *bankCheck) scan(ctx context.Context, all []*pairedOp) (t bankTally, stopped bool, err error) {
	t = bankTally{target: make([]int64, len(c.accounts)), groups: map[Transfer]*bankGroup{}}
	for i, o := range all {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return t, true, nil
		}
		if o.inv.F == "read" {
			if o.outcome != histories.OK {
				continue
			}
			bal, err := c.balances(o.ret)
			if err != nil {
				return t, false, err
			}
			c.checkRead(o, bal)
			continue
		}
		tr, err := c.transferOf(o)
		if err != nil {
			return t, false, err
		}
		c.transfers = append(c.transfers, bankTransfer{t: tr, op: o})
		switch o.outcome {
		case histories.OK:
			t.acked++
			t.target[c.at[tr.From]] += tr.Amount
			t.target[c.at[tr.To]] -= tr.Amount
		case histories.Fail:
			t.failed++
		default:
			t.unsure++
			g := t.groups[tr]
			if g == nil {
				g = &bankGroup{t: tr, delta: c.delta(tr)}
				t.groups[tr] = g
			}
			g.n++
			g.ops = append(g.ops, o)
		}
	}
	return t, false, nil
}

// transferOf decodes a transfer's value and holds it to the header's accounts.
func (c *bankCheck) transferOf(o *pairedOp) (Transfer, error) {
	var t Transfer
	if err := json.Unmarshal(o.inv.Value, &t); err != nil {
		return t, fmt.Errorf("history index %d: transfer value %q is not {from, to, amount}: %v", o.inv.Index, o.inv.Value, err)
	}
	if _, ok := c.at[t.From]; !ok {
		return t, fmt.Errorf("history index %d: transfer from %q, an account the header does not list", o.inv.Index, t.From)
	}
	if _, ok := c.at[t.To]; !ok {
		return t, fmt.Errorf("history index %d: transfer to %q, an account the header does not list", o.inv.Index, t.To)
	}
	if t.Amount < 0 {
		return t, fmt.Errorf("history index %d: transfer of a negative amount %d", o.inv.Index, t.Amount)
	}
	return t, nil
}

// sortedBankGroups lists the groups in a fixed order, so that the search, and the
// anomalies it leads to, do not depend on map order.
func sortedBankGroups(groups map[Transfer]*bankGroup) []*bankGroup {
	gs := make([]*bankGroup, 0, len(groups))
	for _, g := range groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *bankGroup) int {
		return strings.Compare(fmt.Sprint(a.t), fmt.Sprint(b.t))
	})
	return gs
}

// judgeFinals searches, for each final read, a choice of unknown transfers that explains
// its balances, and reports a final-mismatch where none does. applied is the choice that
// explained the last explained read; undecided says some search outgrew bankMaxStates;
// stopped says ctx ended first.
func (c *bankCheck) judgeFinals(ctx context.Context, finals []*pairedOp, target []int64, gs []*bankGroup) (applied []int, undecided, stopped bool) {
	for _, r := range finals {
		if ctx.Err() != nil {
			return nil, false, true
		}
		bal, _ := c.balances(r.ret)
		want := slices.Clone(target)
		var sum int64
		for i, a := range c.accounts {
			want[i] += bal[a] - c.p.Accounts[a]
			sum += bal[a]
		}
		if sum != c.total {
			continue // not-conserved already says it, and no choice of transfers can
		}
		choice, found, decided := bankReach(gs, want)
		if !decided {
			undecided = true
			continue
		}
		if found {
			applied = choice
			continue
		}
		c.mismatch(r, bal, want, gs)
	}
	return applied, undecided, false
}

// result gives the verdict: invalid on any anomaly, unknown when a search was cut
// short, else valid with what the final balances told of the unknown transfers.
func (c *bankCheck) result(t bankTally, finals int, applied []int, undecided bool) Result {
	d := map[string]json.RawMessage{
		"accounts":     histories.Value(len(c.accounts)),
		"total":        histories.Value(c.total),
		"acknowledged": histories.Value(t.acked),
		"failed":       histories.Value(t.failed),
		"unknown":      histories.Value(t.unsure),
		"reads":        histories.Value(c.reads),
		"final_reads":  histories.Value(finals),
		"anomalies":    histories.Value(c.found),
	}
	res := Result{Checker: BankModel, Anomalies: c.anomalies, Details: d}
	switch {
	case c.found > 0:
		res.Verdict = Invalid
		res.Summary = "bank: " + firstOf(c.anomalies[0], c.found)
	case undecided:
		res.Verdict = Unknown
		res.Anomalies = []Anomaly{}
		res.Summary = fmt.Sprintf("undecided: the search over which of the %d unknown transfers applied outgrew %d partial sums; every read conserves the total and keeps its floors", t.unsure, bankMaxStates)
	default:
		res.Verdict = Valid
		res.Anomalies = []Anomaly{}
		var b strings.Builder
		fmt.Fprintf(&b, "bank: total %d conserved at %d reads, no balance below its floor; %d acknowledged transfers, %d failed, %d unknown", c.total, c.reads, t.acked, t.failed, t.unsure)
		switch {
		case finals == 0:
			b.WriteString("; no final read, so applications were not counted")
		case applied != nil:
			n := 0
			for _, k := range applied {
				n += k
			}
			fmt.Fprintf(&b, "; the final balances are explained with every acknowledged transfer once and %d of the unknown ones", n)
			d["unknown_applied"] = histories.Value(n)
		}
		res.Summary = b.String()
	}
	return res
}

// bankTransfer is one transfer operation with its value.
type bankTransfer struct {
	t  Transfer
	op *pairedOp
}

// bankCheck accumulates the anomalies of a bank history.
type bankCheck struct {
	p         BankParams
	accounts  []string
	at        map[string]int
	total     int64
	reads     int
	transfers []bankTransfer
	findings
}

// delta is what one application of t adds to each account, in account order.
func (c *bankCheck) delta(t Transfer) []int64 {
	d := make([]int64, len(c.accounts))
	d[c.at[t.From]] -= t.Amount
	d[c.at[t.To]] += t.Amount
	return d
}

// balances decodes an ok read's value and holds it to the header's accounts.
func (c *bankCheck) balances(ret *histories.Op) (Balances, error) {
	var bal Balances
	if err := json.Unmarshal(ret.Value, &bal); err != nil || bal == nil {
		return nil, fmt.Errorf("history index %d: read value %q is not an object of account to balance: %v", ret.Index, ret.Value, err)
	}
	for a := range bal {
		if _, ok := c.at[a]; !ok {
			return nil, fmt.Errorf("history index %d: read gives account %q, which the header does not list", ret.Index, a)
		}
	}
	for _, a := range c.accounts {
		if _, ok := bal[a]; !ok {
			return nil, fmt.Errorf("history index %d: read omits account %q: a bank read lists every account", ret.Index, a)
		}
	}
	return bal, nil
}

// checkRead holds one ok read to conservation and the floors.
func (c *bankCheck) checkRead(o *pairedOp, bal Balances) {
	c.reads++
	var sum int64
	for _, a := range c.accounts {
		sum += bal[a]
		if f := c.p.floor(a); bal[a] < f {
			c.add(Anomaly{Kind: "below-floor", Ops: o.events(), Explanation: fmt.Sprintf(
				"the read at index %d shows account %s at %d, below its floor %d", o.ret.Index, a, bal[a], f)})
		}
	}
	if sum != c.total {
		c.add(Anomaly{Kind: "not-conserved", Ops: o.events(), Explanation: fmt.Sprintf(
			"the read at index %d sums to %d, not the total %d: %s", o.ret.Index, sum, c.total, c.show(bal))})
	}
}

// show writes balances in account order.
func (c *bankCheck) show(bal Balances) string {
	parts := make([]string, len(c.accounts))
	for i, a := range c.accounts {
		parts[i] = fmt.Sprintf("%s=%d", a, bal[a])
	}
	return strings.Join(parts, " ")
}

// mismatch explains a final read no choice of unknown transfers explains, naming the
// transfers whose extra (or missing) applications would.
func (c *bankCheck) mismatch(r *pairedOp, bal Balances, want []int64, gs []*bankGroup) {
	var diff []string
	for i, a := range c.accounts {
		exp := bal[a] - want[i] // initial + acknowledged
		if exp != bal[a] {
			diff = append(diff, fmt.Sprintf("%s %+d", a, bal[a]-exp))
		}
	}
	why := fmt.Sprintf("the final balances (read at index %d: %s) differ from the initial ones plus every acknowledged transfer once by %s, and no choice among the %d unknown transfers explains it",
		r.ret.Index, c.show(bal), strings.Join(diff, ", "), unknownCount(gs))
	ev := []int64{r.inv.Index, r.ret.Index}
	// Try each shape of transfer: k more applications (a duplicate), or k fewer of
	// acknowledged ones (a loss), with the unknown ones free as before.
	shapes := map[Transfer][]*pairedOp{}
	var order []Transfer
	for _, bt := range c.transfers {
		if bt.op.outcome == histories.Fail {
			continue
		}
		if _, seen := shapes[bt.t]; !seen {
			order = append(order, bt.t)
		}
		shapes[bt.t] = append(shapes[bt.t], bt.op)
	}
	var found []string
	for _, t := range order {
		if len(found) >= 3 {
			break
		}
		d := c.delta(t)
		opsOf := shapes[t]
		for k := 1; k <= len(opsOf); k++ {
			for _, sign := range []int64{1, -1} {
				if sign < 0 && !anyOK(opsOf) {
					continue
				}
				w := slices.Clone(want)
				for i := range w {
					w[i] -= sign * int64(k) * d[i]
				}
				if _, ok, dec := bankReach(gs, w); ok && dec {
					what := "applied once more than allowed"
					if k > 1 {
						what = fmt.Sprintf("applied %d more times than allowed", k)
					}
					if sign < 0 {
						what = "lost once"
						if k > 1 {
							what = fmt.Sprintf("lost %d times", k)
						}
					}
					who := "transfer"
					if len(opsOf) > 1 {
						who = "transfers"
					}
					found = append(found, fmt.Sprintf("%s %s->%s %d (%s) %s", who, t.From, t.To, t.Amount, opNames(opsOf), what))
					for _, o := range opsOf {
						if len(ev) < 40 {
							ev = append(ev, o.events()...)
						}
					}
					k = len(opsOf) + 1
					break
				}
			}
		}
	}
	if len(found) > 0 {
		why += "; it is explained by " + strings.Join(found, ", or by ")
	}
	c.add(Anomaly{Kind: "final-mismatch", Ops: ev, Explanation: why})
}

func anyOK(ops []*pairedOp) bool {
	for _, o := range ops {
		if o.outcome == histories.OK {
			return true
		}
	}
	return false
}

// opNames lists the op ids (or indices) of ops, at most five.
func opNames(ops []*pairedOp) string {
	var s []string
	for i, o := range ops {
		if i == 5 {
			s = append(s, fmt.Sprintf("... %d in all", len(ops)))
			break
		}
		if o.inv.OpID != "" {
			s = append(s, o.inv.OpID)
		} else {
			s = append(s, fmt.Sprintf("index %d", o.inv.Index))
		}
	}
	return strings.Join(s, " ")
}

func unknownCount(gs []*bankGroup) int {
	n := 0
	for _, g := range gs {
		n += g.n
	}
	return n
}

// bankReach reports whether some choice of k_g in [0, n_g] per group gives
// Σ k_g·delta_g = target, and returns the choice. It keeps the set of partial sums
// reachable with the groups so far, pruned to those from which the remaining groups
// can still reach the target account by account; decided is false when the set
// outgrows bankMaxStates.
func bankReach(gs []*bankGroup, target []int64) (choice []int, found, decided bool) {
	k := len(target)
	// lo[i][a], hi[i][a]: the least and most the groups from i on can add to account a.
	lo := make([][]int64, len(gs)+1)
	hi := make([][]int64, len(gs)+1)
	lo[len(gs)], hi[len(gs)] = make([]int64, k), make([]int64, k)
	for i := len(gs) - 1; i >= 0; i-- {
		lo[i], hi[i] = slices.Clone(lo[i+1]), slices.Clone(hi[i+1])
		for a, d := range gs[i].delta {
			if d < 0 {
				lo[i][a] += d * int64(gs[i].n)
			} else {
				hi[i][a] += d * int64(gs[i].n)
			}
		}
	}
	fits := func(i int, s []int64) bool {
		for a := range s {
			r := target[a] - s[a]
			if r < lo[i][a] || r > hi[i][a] {
				return false
			}
		}
		return true
	}
	type state struct {
		sum  []int64
		prev int // index into the previous layer
		k    int // applications of the group that led here
	}
	start := make([]int64, k)
	if !fits(0, start) {
		return nil, false, true
	}
	layers := [][]state{{{sum: start, prev: -1}}}
	for i, g := range gs {
		seen := make(map[string]bool, len(layers[i]))
		var next []state
		for j, s := range layers[i] {
			sum := slices.Clone(s.sum)
			for m := 0; m <= g.n; m++ {
				if m > 0 {
					for a, d := range g.delta {
						sum[a] += d
					}
				}
				if !fits(i+1, sum) {
					continue
				}
				key := bankKey(sum)
				if seen[key] {
					continue
				}
				seen[key] = true
				next = append(next, state{sum: slices.Clone(sum), prev: j, k: m})
				if len(next) > bankMaxStates {
					return nil, false, false
				}
			}
		}
		if len(next) == 0 {
			return nil, false, true
		}
		layers = append(layers, next)
	}
	// fits at the last layer means the sum is the target exactly.
	choice = make([]int, len(gs))
	j := 0
	for i := len(gs); i > 0; i-- {
		s := layers[i][j]
		choice[i-1] = s.k
		j = s.prev
	}
	return choice, true, true
}

// bankKey encodes a partial sum as a map key.
func bankKey(sum []int64) string {
	b := make([]byte, 0, 8*len(sum))
	for _, v := range sum {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return string(b)
}
