package checker

import (
	"fmt"
	"strings"
)

// orderWitness is the proof that a region has no version order: a tree whose
// branches are the choices of two writes of a key, either way, and whose leaves are the
// cycles each combination of choices closes.
type orderWitness struct {
	p    *orderProblem
	ms   []int32 // the region's transactions, by index
	root *orderNode
	vars []orderVar
}

// maxWitnessLines bounds the lines of a witness's explanation.
const maxWitnessLines = 80

// anomaly explains the witness in the run's words, one line per choice and per edge
// of each cycle, the transactions named T1, T2 ... in the order they appear.
func (w *orderWitness) anomaly(h *txnHistory, s orderSpec) txnAnomaly {
	names := map[int32]string{}
	var txns []int32
	name := func(local int32) string {
		t := w.ms[local%int32(len(w.ms))]
		if n, ok := names[t]; ok {
			return n
		}
		n := fmt.Sprintf("T%d", len(txns)+1)
		names[t] = n
		txns = append(txns, t)
		return n
	}
	var lines []string
	leaves, shown := 0, 0
	var walk func(n *orderNode, depth int)
	walk = func(n *orderNode, depth int) {
		ind := strings.Repeat("  ", depth)
		if n.v < 0 {
			leaves++
			if len(lines) >= maxWitnessLines {
				return
			}
			shown++
			lines = append(lines, ind+"a cycle:")
			for _, e := range n.cycle {
				a, b := name(e.from), name(e.to)
				lines = append(lines, fmt.Sprintf("%s  %s < %s: %s", ind, a, b, w.edgeText(h, e, a, b)))
			}
			return
		}
		v := w.vars[n.v]
		key := h.in.keyString(v.key)
		for side := 0; side < 2; side++ {
			// Transactions are named only as lines name them.
			if len(lines) < maxWitnessLines {
				an, bn := name(v.a), name(v.b)
				first, then := fmt.Sprintf("%s = %s (%s)", key, h.in.valueString(v.va), an), fmt.Sprintf("%s (%s)", h.in.valueString(v.vb), bn)
				if side == 1 {
					first, then = fmt.Sprintf("%s = %s (%s)", key, h.in.valueString(v.vb), bn), fmt.Sprintf("%s (%s)", h.in.valueString(v.va), an)
				}
				lines = append(lines, fmt.Sprintf("%sif %s precedes %s:", ind, first, then))
			}
			walk(n.kids[side], depth+1)
		}
	}
	walk(w.root, 0)
	if leaves > shown {
		lines = append(lines, fmt.Sprintf("  (%d more cycles not shown)", leaves-shown))
	}
	bind := make([]string, len(txns))
	for i, t := range txns {
		bind[i] = fmt.Sprintf("T%d = %s", i+1, h.name(t))
	}
	head := fmt.Sprintf("no version order of the keys these %d transactions write avoids %s, which %s forbids: every choice closes a cycle, %s:",
		len(txns), s.forbids(), friendly(s.model), strings.Join(bind, ", "))
	if w.root.v < 0 {
		head = fmt.Sprintf("a cycle every version order has, of %s, which %s forbids, %s:", s.forbids(), friendly(s.model), strings.Join(bind, ", "))
	}
	return txnAnomaly{txns: txns, text: head + "\n" + strings.Join(lines, "\n")}
}

// edgeText says why a precedes b by e, a and b named an and bn.
func (w *orderWitness) edgeText(h *txnHistory, e orderEdge, an, bn string) string {
	y := e.why
	key := h.in.keyString(y.key)
	assumed := "in this order"
	if y.v < 0 {
		assumed = "in the version order the options' assumptions give"
	}
	switch y.kind {
	case okWR:
		return fmt.Sprintf("%s read %s = %s, which %s wrote", bn, key, h.in.valueString(y.val), an)
	case okInitRW:
		return fmt.Sprintf("%s read %s = null, the initial state, which %s's write of %s replaced", an, key, bn, h.in.valueString(y.val2))
	case okWW:
		return fmt.Sprintf("%s's write of %s = %s comes after %s's %s %s", bn, key, h.in.valueString(y.val2), an, h.in.valueString(y.val), assumed)
	case okRW:
		return fmt.Sprintf("%s read %s = %s, and %s's write of %s comes after it %s", an, key, h.in.valueString(y.val), bn, h.in.valueString(y.val2), assumed)
	case okProcess:
		a := w.ms[e.from%int32(len(w.ms))]
		return fmt.Sprintf("process %d ran %s, then %s", h.txns[a].process, an, bn)
	case okRealtime:
		a, b := w.ms[e.from%int32(len(w.ms))], w.ms[e.to%int32(len(w.ms))]
		return fmt.Sprintf("%s completed at index %d before %s was invoked at index %d", an, h.txns[a].comp, bn, h.txns[b].inv)
	}
	return "?"
}
