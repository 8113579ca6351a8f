package toxics

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Pin names one commit point of a proxy, for a fault that fires there and nowhere else,
// whatever the seeded rolls say. It names the point one of two ways:
//
//   - by Point, the point's number among the commit points the proxy counted, from 1,
//     in the order their requests passed (Event.Point). With one client the order is
//     the client's own; with several the number is reached at the same count, by
//     whichever client gets there.
//   - by Conn and Txn (Point 0): the Txn-th transaction (Txn.Seq, from 1) of the
//     connection the proxy accepted Conn-th (Event.ConnIndex, from 0), which is what
//     faults.jsonl records of every fault.
//
// Only counted points are pinned: those a match function accepts (Config.Match), or
// without one the default points (writes and commits).
type Pin struct {
	// Kind is the fault: CommitCut or CommitDrop.
	Kind Kind
	// Point is the commit point's number; 0 pins by Conn and Txn.
	Point uint64
	// Conn and Txn name a transaction of a connection when Point is 0.
	Conn uint64
	Txn  uint64
}

// String returns the pin as the schedule writes it: commit-cut@commit:N or
// commit-cut@conn:C/txn:T.
func (p Pin) String() string {
	if p.Point > 0 {
		return fmt.Sprintf("%s@commit:%d", p.Kind, p.Point)
	}
	return fmt.Sprintf("%s@conn:%d/txn:%d", p.Kind, p.Conn, p.Txn)
}

// check refuses a pin that names no point or no fault.
func (p Pin) check() error {
	switch {
	case p.Kind != CommitCut && p.Kind != CommitDrop:
		return fmt.Errorf("pin %v: the fault must be commit-cut or commit-drop", p)
	case p.Point == 0 && p.Txn == 0:
		return fmt.Errorf("pin %v: name a commit point (from 1) or a transaction of a connection (from 1)", p)
	}
	return nil
}

type pinKey struct{ point, conn, txn uint64 }

func (p Pin) key() pinKey {
	if p.Point > 0 {
		return pinKey{point: p.Point}
	}
	return pinKey{conn: p.Conn, txn: p.Txn}
}

// Listed holds the pinned faults of one proxy: each fires at its commit point, exactly
// once, since every point has one number and every transaction one place. A pinned
// point takes its fault whatever the knobs are armed to; the point still draws its
// roll, so that the seeded decisions of the other points stay where they were. Its
// methods are safe for concurrent use and take effect on open connections. The zero
// value holds no pin.
type Listed struct {
	mu   sync.Mutex
	pins map[pinKey]Kind
	n    atomic.Int64 // len(pins), read without the lock on every commit point
	// knob carries the reservations and the count of fires of the pinned faults. It
	// is never armed and has no cap: a pin fires whatever the knobs say.
	knob Knob
}

// Add pins a fault. It fails on a pin that names no point, on a kind other than
// CommitCut or CommitDrop, and on a point pinned already.
func (l *Listed) Add(p Pin) error {
	if err := p.check(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pins == nil {
		l.pins = map[pinKey]Kind{}
	}
	k := p.key()
	if old, ok := l.pins[k]; ok {
		return fmt.Errorf("pin %v: that point is pinned already (%v)", p, Pin{Kind: old, Point: k.point, Conn: k.conn, Txn: k.txn})
	}
	l.pins[k] = p.Kind
	l.n.Store(int64(len(l.pins)))
	return nil
}

// Remove unpins the point p names; a point not pinned is left alone.
func (l *Listed) Remove(p Pin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pins, p.key())
	l.n.Store(int64(len(l.pins)))
}

// Len returns how many points are pinned.
func (l *Listed) Len() int { return int(l.n.Load()) }

// Fired returns how many pinned faults have fired since the proxy started.
func (l *Listed) Fired() int64 { return l.knob.Fired() }

// match returns the fault pinned at a point (its number, its connection's accept index
// and its transaction's number), with the knob its reservation goes against, or 0.
func (l *Listed) match(point, conn, txn uint64) (Kind, *Knob) {
	if l.n.Load() == 0 {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.pins[pinKey{point: point}]
	if !ok && txn > 0 {
		k, ok = l.pins[pinKey{conn: conn, txn: txn}]
	}
	if !ok {
		return 0, nil
	}
	l.knob.taken.Add(1)
	return k, &l.knob
}

// Points returns how many commit points the commits have counted so far: the number of
// the last (Event.Point). A pin whose number is at most this has had its chance.
func (c *Commits) Points() uint64 { return c.points.Load() }
