package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// TransferModel names the model of the distributed-transaction workloads (transfer and
// two-rows: package workloads/transfer) in a history's header and in Options.Model. Its
// header's params are the bank model's (BankParams).
const TransferModel = "transfer"

// Transfer histories hold bank transfers among rows spread over several servers, and
// what was read back after the run and its recovery:
//
//	transfer  as in a bank history; its op id names its markers
//	total     invoke, then ok with the sum of every row, read server after server
//	rows      invoke with two accounts, then ok with their Balances (two-rows)
//	read      ok with Balances of every account: the final read
//	applied   ok with Markers: per op id, the accounts its transfer applied on, as
//	          found on one server (a final read per server; their union is used)
//	prepared  ok with the transactions still prepared, []string ("gid@server")
//
// What the checker proves, exactly:
//
//   - everything the bank model proves of the transfers and the final balances
//     (not-conserved, below-floor, final-mismatch: see CheckBank);
//   - atomic commitment, from the markers of final applied reads (reads that begin after
//     every transfer ended): a transfer applied on one of its two accounts only
//     (half-applied-transfer), an acknowledged one applied on neither
//     (lost-transfer), a failed one applied on both, or markers of an op id no transfer
//     invoked (failed-transfer-applied);
//   - nothing left prepared: every entry of a final prepared read (left-prepared).
//
// An unknown transfer may be applied on both accounts or on neither. Reads of the total
// are no anomaly when they miss the initial total: without a snapshot across servers a
// read can see a transfer committed on one server and not yet on the other (a fractured
// read); they are counted in Details ("fractured_reads"). Reads of two rows are counted
// and not judged. A history whose only operations are the final reads (no transfer, no
// read of the total or of two rows completed) is Unknown: nothing was checked.
const _ = TransferModel

// Markers is the value of a transfer history's applied read: per op id of a transfer, the
// accounts on which its side applied.
type Markers map[string][]string

// CheckTransfer decides whether ops, a transfer history over the accounts of p, keeps
// the bank model's promises and commits every transfer atomically, and leaves nothing
// prepared (see TransferModel). Anomaly kinds: half-applied-transfer, lost-transfer,
// failed-transfer-applied, left-prepared, and the bank model's not-conserved,
// below-floor, final-mismatch. The error reports a history that cannot be checked: an
// unknown function, a value of the wrong shape, a transfer the bank model refuses.
func CheckTransfer(ctx context.Context, ops []histories.Op, p BankParams) (Result, error) {
	if ctx.Err() != nil {
		return interrupted(TransferModel, ctx.Err()), nil
	}
	all, err := pairOps(TransferModel, ops, "transfer", "total", "rows", "read", "applied", "prepared")
	if err != nil {
		return Result{}, err
	}
	bank, err := CheckBank(ctx, bankEvents(ops), p)
	if err != nil {
		return Result{}, err
	}
	c := transferCheck{total: newBankCheck(p).total}
	if err := c.scan(all); err != nil {
		return Result{}, err
	}
	c.judge()
	return c.result(bank), nil
}

// bankEvents returns the client events of ops that belong to transfers and reads of
// every account, the part of the history the bank model judges, in their order.
func bankEvents(ops []histories.Op) []histories.Op {
	open := map[int]string{} // process -> function of its open operation
	var out []histories.Op
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		f := op.F
		if op.Type == histories.Invoke {
			open[op.Process] = f
		} else {
			f = open[op.Process]
			delete(open, op.Process)
		}
		if f == "transfer" || f == "read" {
			out = append(out, op)
		}
	}
	return out
}

// transferCheck gathers a transfer history's operations and what they show.
type transferCheck struct {
	total int64 // the initial total

	transfers []*pairedOp
	values    map[*pairedOp]Transfer
	markers   Markers     // union of the final applied reads
	markOps   []*pairedOp // those reads
	prepared  []*pairedOp // final prepared reads
	totals    []int64     // ok reads of the total
	rows      int         // ok reads of two rows
	completed int         // transfers and reads that completed (ok, fail, info)

	acked, failed, unsure, unknownApplied int
	fractured                             int
	left                                  []string
	findings
}

// scan sorts the operations, decodes their values, and keeps the applied and prepared
// reads that began after every transfer ended.
func (c *transferCheck) scan(all []*pairedOp) error {
	c.values = map[*pairedOp]Transfer{}
	lastTransfer := -1
	for _, o := range all {
		if o.inv.F == "transfer" {
			lastTransfer = max(lastTransfer, o.invPos, o.retPos)
		}
	}
	for _, o := range all {
		switch o.inv.F {
		case "transfer":
			var t Transfer
			if err := json.Unmarshal(o.inv.Value, &t); err != nil {
				return fmt.Errorf("history index %d: transfer value %q is not {from, to, amount}: %v", o.inv.Index, o.inv.Value, err)
			}
			c.transfers = append(c.transfers, o)
			c.values[o] = t
			if !o.open() {
				c.completed++
			}
		case "total":
			if o.open() {
				continue
			}
			c.completed++
			if o.outcome != histories.OK {
				continue
			}
			var v int64
			if err := json.Unmarshal(o.ret.Value, &v); err != nil {
				return fmt.Errorf("history index %d: total %q is not an integer: %v", o.ret.Index, o.ret.Value, err)
			}
			c.totals = append(c.totals, v)
		case "rows":
			if o.open() {
				continue
			}
			c.completed++
			if o.outcome == histories.OK {
				c.rows++
			}
		case "applied":
			if o.outcome != histories.OK || o.invPos <= lastTransfer {
				continue
			}
			var m Markers
			if err := json.Unmarshal(o.ret.Value, &m); err != nil || m == nil {
				return fmt.Errorf("history index %d: applied %q is not an object of op id to accounts: %v", o.ret.Index, o.ret.Value, err)
			}
			if c.markers == nil {
				c.markers = Markers{}
			}
			for id, accs := range m {
				for _, a := range accs {
					if !slices.Contains(c.markers[id], a) {
						c.markers[id] = append(c.markers[id], a)
					}
				}
			}
			c.markOps = append(c.markOps, o)
		case "prepared":
			if o.outcome != histories.OK || o.invPos <= lastTransfer {
				continue
			}
			var p []string
			if err := json.Unmarshal(o.ret.Value, &p); err != nil {
				return fmt.Errorf("history index %d: prepared %q is not a list of transactions: %v", o.ret.Index, o.ret.Value, err)
			}
			c.prepared = append(c.prepared, o)
			for _, x := range p {
				if !slices.Contains(c.left, x) {
					c.left = append(c.left, x)
				}
			}
		}
	}
	return nil
}

// judge holds every transfer to its markers, and the prepared reads to emptiness.
func (c *transferCheck) judge() {
	var markEvents []int64
	for _, o := range c.markOps {
		markEvents = append(markEvents, o.events()...)
	}
	invoked := map[string]bool{}
	for _, o := range c.transfers {
		t := c.values[o]
		invoked[o.inv.OpID] = true
		switch o.outcome {
		case histories.OK:
			c.acked++
		case histories.Fail:
			c.failed++
		default:
			c.unsure++
		}
		if c.markers == nil {
			continue
		}
		on := c.markers[o.inv.OpID]
		sides := 0
		for _, a := range []string{t.From, t.To} {
			if slices.Contains(on, a) {
				sides++
			}
		}
		name := o.inv.OpID
		if name == "" {
			name = fmt.Sprintf("index %d", o.inv.Index)
		}
		ev := append(o.events(), markEvents...)
		told := o.outcome.String()
		if o.open() {
			told = "never completed"
		}
		switch {
		case sides == 1:
			c.anomaly("half-applied-transfer", ev, fmt.Sprintf("transfer %s (%s->%s %d, client told %s) applied on account %s only: one participant committed, the other did not", name, t.From, t.To, t.Amount, told, strings.Join(on, ", ")))
		case o.outcome == histories.OK && sides == 0:
			c.anomaly("lost-transfer", ev, fmt.Sprintf("transfer %s (%s->%s %d) was acknowledged and applied on neither account", name, t.From, t.To, t.Amount))
		case o.outcome == histories.Fail && sides == 2:
			c.anomaly("failed-transfer-applied", ev, fmt.Sprintf("transfer %s (%s->%s %d) was reported failed and applied on both accounts", name, t.From, t.To, t.Amount))
		case o.outcome != histories.OK && o.outcome != histories.Fail && sides == 2:
			c.unknownApplied++
		}
	}
	ids := make([]string, 0, len(c.markers))
	for id := range c.markers {
		if !invoked[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.anomaly("failed-transfer-applied", markEvents, fmt.Sprintf("op id %s applied on account %s, but no transfer of the history has that op id", id, strings.Join(c.markers[id], ", ")))
	}
	var prepEvents []int64
	for _, o := range c.prepared {
		prepEvents = append(prepEvents, o.events()...)
	}
	for _, x := range c.left {
		c.anomaly("left-prepared", prepEvents, fmt.Sprintf("%s is still prepared after recovery: it holds its locks until someone finishes it", x))
	}
	for _, v := range c.totals {
		if v != c.total {
			c.fractured++
		}
	}
}

// result combines the bank model's verdict with atomic commitment's: invalid on any
// anomaly of either, unknown when the bank search was undecided or nothing was checked.
func (c *transferCheck) result(bank Result) Result {
	bankFound := len(bank.Anomalies)
	if raw, ok := bank.Details["anomalies"]; ok {
		_ = json.Unmarshal(raw, &bankFound)
	}
	d := map[string]any{
		"transfers":        len(c.transfers),
		"acknowledged":     c.acked,
		"failed":           c.failed,
		"unknown":          c.unsure,
		"unknown_applied":  c.unknownApplied,
		"markers_read":     c.markers != nil,
		"total_reads":      len(c.totals),
		"fractured_reads":  c.fractured,
		"row_reads":        c.rows,
		"left_prepared":    len(c.left),
		"anomalies":        c.found + bankFound,
		"bank_verdict":     bank.Verdict.String(),
		"atomic_anomalies": c.found,
	}
	res := Result{Checker: TransferModel, Details: encodeDetails(d)}
	anomalies := append(slices.Clone(c.anomalies), bank.Anomalies...)
	switch {
	case c.found > 0 || bank.Verdict == Invalid:
		res.Verdict = Invalid
		res.Anomalies = anomalies[:min(len(anomalies), maxAnomalies)]
		res.Summary = "transfer: " + firstOf(res.Anomalies[0], c.found+bankFound)
		return res
	case bank.Verdict == Unknown:
		res.Verdict, res.Anomalies, res.Summary = Unknown, []Anomaly{}, bank.Summary
		return res
	case c.completed == 0:
		res.Verdict, res.Anomalies = Unknown, []Anomaly{}
		res.Summary = "nothing was checked: no transfer or read completed"
		return res
	}
	res.Verdict, res.Anomalies = Valid, []Anomaly{}
	var b strings.Builder
	if len(c.transfers) > 0 {
		fmt.Fprintf(&b, "transfer: %d transfers (%d acknowledged, %d failed, %d unknown)", len(c.transfers), c.acked, c.failed, c.unsure)
	} else {
		fmt.Fprintf(&b, "transfer: no transfers, %d reads of two rows", c.rows)
	}
	var finals int
	_ = json.Unmarshal(bank.Details["final_reads"], &finals)
	if finals == 0 {
		b.WriteString("; no final read of every account, so the total was not checked after the run")
	} else {
		fmt.Fprintf(&b, "; total %d conserved", c.total)
	}
	if raw, ok := bank.Details["unknown_applied"]; ok && c.unsure > 0 {
		fmt.Fprintf(&b, ", the final balances explained with every acknowledged transfer once and %s of the unknown ones", raw)
	}
	switch {
	case c.markers == nil && len(c.transfers) > 0:
		b.WriteString("; no markers were read, so atomic commitment was not checked")
	case len(c.transfers) > 0:
		fmt.Fprintf(&b, "; the markers show every transfer applied on both accounts or on neither (%d of the unknown on both), none acknowledged and lost, none failed and applied", c.unknownApplied)
	}
	if len(c.prepared) > 0 {
		b.WriteString("; nothing left prepared")
	}
	if len(c.totals) > 0 {
		fmt.Fprintf(&b, "; %d of %d reads of the total fractured (no snapshot across servers is promised)", c.fractured, len(c.totals))
	}
	res.Summary = b.String()
	return res
}
