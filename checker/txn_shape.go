package checker

import "fmt"

// An ok completion says what its transaction did; its invocation, what it was asked.
// Jepsen lets the completion fill in what the invocation could not know, the values
// its reads returned, and nothing else: the completion has the invocation's micro-ops,
// in the same order, each of the same function and key, each append or write of the
// same value. A completion that answers another transaction than the one invoked is
// refused at its index, not checked as if it were the one asked.

// sameShape decodes invocation value inv and holds the ok completion's micro-ops,
// p.dec.mops[rec.mop:rec.mop+rec.n], to it. The invocation's micro-ops are decoded
// after the completion's and dropped again, so that what the check keeps is unchanged.
func (p *txnPrep) sameShape(inv []byte, rec txnPrepared) error {
	if len(inv) == 0 || rec.err != nil {
		return nil
	}
	mop, list := len(p.dec.mops), len(p.dec.list)
	defer func() { p.dec.mops, p.dec.list = p.dec.mops[:mop], p.dec.list[:list] }()
	if err := p.dec.decodeMore(inv); err != nil {
		return fmt.Errorf("its invocation's value: %w", err)
	}
	asked, told := p.dec.mops[mop:], p.dec.mops[rec.mop:rec.mop+rec.n]
	if len(asked) == 0 {
		// An invocation of null or []: nothing was said of what it asks.
		return nil
	}
	if len(asked) != len(told) {
		return fmt.Errorf("ok completion has %d micro-ops, its invocation %d: a completion fills in what its reads returned, nothing else", len(told), len(asked))
	}
	for i := range asked {
		a, t := &asked[i], &told[i]
		switch {
		case a.kind != t.kind || a.key != t.key:
			return fmt.Errorf("ok completion's micro-op %d is %s of key %s, its invocation's %s of key %s: a completion fills in what its reads returned, nothing else", i+1, t.kind, p.dec.in.keyJSON(t.key), a.kind, p.dec.in.keyJSON(a.key))
		case a.kind != mopRead && (a.val != t.val || a.hasValue != t.hasValue):
			return fmt.Errorf("ok completion's micro-op %d, %s of key %s, has another value than its invocation's: a completion fills in what its reads returned, nothing else", i+1, t.kind, p.dec.in.keyJSON(t.key))
		}
	}
	return nil
}
