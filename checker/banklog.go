package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// BankLog is the value of an ok read of a bank history with a transfer log
// (BankParams.Log): the balances, and the log, each transfer's op id with how many
// times the store logged it. A store that writes each transfer's op id into a log table
// in the same transaction as the transfer gives it with SELECT op_id, count(*) ...
// GROUP BY op_id beside its balances.
type BankLog struct {
	Balances Balances         `json:"balances"`
	Log      ExactlyOnceState `json:"log"`
}

// The bank model with a transfer log. Every transfer carries its op id, the identity
// the store logs it under. Every ok read must conserve the total and keep the floors,
// as without a log; every final read (one begun after every transfer ended) is held to
// exactly once per op id, by the log (the exactly-once rules: an acknowledged transfer
// logged once, a failed one not at all, an unknown one at most once: duplicate, lost,
// fail-applied, phantom), and its balances to the log: the initial balances plus each
// logged transfer as many times as the log holds it (log-mismatch when they differ: a
// transfer whose money moved without its log row, or the reverse). No search is needed:
// the log says which transfers applied. A rollback that leaves a failed transfer's log
// row committed is fail-applied; a transfer retried after a cut commit and applied
// twice is a duplicate whether or not its amounts could hide among the unknown ones.

// checkBankLog is CheckBank for a history whose reads carry the transfer log.
func checkBankLog(ctx context.Context, ops []histories.Op, p BankParams) (Result, error) {
	all, err := pairOps(BankModel, ops, "transfer", "read")
	if err != nil {
		return Result{}, err
	}
	c := newBankCheck(p)
	effects := map[string]*exactlyOnceEffect{}
	shapes := map[string]Transfer{}
	logs := map[*pairedOp]BankLog{}
	var acked, failed, unsure int
	for i, o := range all {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return interrupted(BankModel, ctx.Err()), nil
		}
		if o.inv.F == "read" {
			if o.outcome != histories.OK {
				continue
			}
			var l BankLog
			if err := json.Unmarshal(o.ret.Value, &l); err != nil || l.Balances == nil || l.Log == nil {
				return Result{}, fmt.Errorf("history index %d: read value %s is not {\"balances\":{account: balance}, \"log\":{op id: count}} (params.log is true)", o.ret.Index, short(o.ret.Value))
			}
			ret := *o.ret
			ret.Value = histories.Value(l.Balances)
			bal, err := c.balances(&ret)
			if err != nil {
				return Result{}, err
			}
			for id, n := range l.Log {
				if n < 0 {
					return Result{}, fmt.Errorf("history index %d: the log gives op id %q a negative count %d", o.ret.Index, id, n)
				}
			}
			c.checkRead(o, bal)
			logs[o] = l
			continue
		}
		tr, err := c.transferOf(o)
		if err != nil {
			return Result{}, err
		}
		id := o.inv.OpID
		if id == "" {
			return Result{}, fmt.Errorf("history index %d: transfer without op_id: with a transfer log the op id is the identity the log holds", o.inv.Index)
		}
		if prev, ok := shapes[id]; ok && prev != tr {
			return Result{}, fmt.Errorf("history index %d: op id %s names two transfers (%+v and %+v)", o.inv.Index, id, prev, tr)
		}
		shapes[id] = tr
		e := effects[id]
		if e == nil {
			e = &exactlyOnceEffect{id: id}
			effects[id] = e
		}
		e.ops = append(e.ops, o)
		switch o.outcome {
		case histories.OK:
			e.ok++
			acked++
		case histories.Fail:
			e.failed++
			failed++
		default:
			e.unsure++
			unsure++
		}
	}
	finals := finalReads(all, "read")
	if len(finals) == 0 {
		return Result{}, fmt.Errorf("bank history with a transfer log: %w", errNoFinalRead)
	}
	var once exactlyOnceFindings
	logged := 0
	for _, r := range finals {
		l := logs[r]
		once.judge(r, l.Log, effects)
		logged = 0
		for id, e := range effects {
			if e.ok == 0 && e.unsure > 0 && l.Log[id] > 0 {
				logged++
			}
		}
	}
	// The exactly-once sentences speak of applies; here they are transfers.
	words := strings.NewReplacer("its apply ", "its transfer ", " applies were ", " transfers were ", "no operation applied it", "no transfer has that op id")
	for _, a := range once.anomalies {
		a.Explanation = words.Replace(a.Explanation)
		c.add(a)
	}
	c.found += once.found - len(once.anomalies)
	// The balances against the log come after: a transfer the log holds wrongly is the
	// cause a reader needs first.
	for _, r := range finals {
		c.logMismatch(r, logs[r], shapes)
	}
	res := c.result(bankTally{acked: acked, failed: failed, unsure: unsure}, len(finals), nil, false)
	res.Details["log"] = histories.Value(true)
	res.Details["unknown_logged"] = histories.Value(logged)
	if res.Verdict == Valid {
		res.Summary = fmt.Sprintf("bank with a transfer log: total %d conserved at %d reads, no balance below its floor; exactly once by the log: %d acknowledged transfers logged once, %d failed ones absent, %d unknown ones at most once (%d of them logged); the final balances are the initial ones plus every logged transfer",
			c.total, c.reads, acked, failed, unsure, logged)
	}
	return res, nil
}

// logMismatch holds a final read's balances to its log: the initial balances plus each
// logged transfer (of a known op id) as many times as the log holds it.
func (c *bankCheck) logMismatch(r *pairedOp, l BankLog, shapes map[string]Transfer) {
	want := make(Balances, len(c.accounts))
	for a, b := range c.p.Accounts {
		want[a] = b
	}
	for id, n := range l.Log {
		t, ok := shapes[id]
		if !ok {
			continue // a phantom: the exactly-once judgement names it
		}
		want[t.From] -= n * t.Amount
		want[t.To] += n * t.Amount
	}
	var diff []string
	for _, a := range c.accounts {
		if l.Balances[a] != want[a] {
			diff = append(diff, fmt.Sprintf("%s is %d, the log gives %d", a, l.Balances[a], want[a]))
		}
	}
	if len(diff) == 0 {
		return
	}
	c.add(Anomaly{Kind: "log-mismatch", Ops: r.events(), Explanation: fmt.Sprintf(
		"the final balances (read at index %d) are not the initial ones plus each logged transfer as many times as the log holds it: %s; money moved without its log row, or a row was logged without its transfer",
		r.ret.Index, strings.Join(diff, ", "))})
}
