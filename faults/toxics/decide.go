package toxics

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Kind is a commit fault. The zero value is invalid.
type Kind uint8

const (
	// CommitCut lets the commit reach the server, drops the reply that proves it and
	// closes the client's connection: the change is applied, the client is not told.
	CommitCut Kind = 1 + iota
	// CommitDrop never lets the commit reach the server and closes the connection: the
	// change is not applied, and the client sees the same error as after a cut.
	CommitDrop
)

var kindNames = [...]string{CommitCut: "commit-cut", CommitDrop: "commit-drop"}

// String returns commit-cut or commit-drop.
func (k Kind) String() string {
	return enumName(kindNames[:], uint8(k), "kind")
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) {
	if k != CommitCut && k != CommitDrop {
		return nil, fmt.Errorf("invalid fault kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	i, ok := enumParse(kindNames[:], b)
	if !ok {
		return fmt.Errorf("unknown fault kind %q", b)
	}
	*k = Kind(i)
	return nil
}

// Truth is what a fault did to the commit it hit, known to the proxy and never to the
// client. The zero value is invalid.
type Truth uint8

const (
	Applied    Truth = 1 + iota // the server committed the change
	NotApplied                  // the server never received the commit
)

var truthNames = [...]string{Applied: "applied", NotApplied: "not-applied"}

// String returns applied or not-applied.
func (t Truth) String() string {
	return enumName(truthNames[:], uint8(t), "truth")
}

// MarshalText implements encoding.TextMarshaler.
func (t Truth) MarshalText() ([]byte, error) {
	if t != Applied && t != NotApplied {
		return nil, fmt.Errorf("invalid truth %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Truth) UnmarshalText(b []byte) error {
	i, ok := enumParse(truthNames[:], b)
	if !ok {
		return fmt.Errorf("unknown truth %q", b)
	}
	*t = Truth(i)
	return nil
}

// enumName is names[v], or what(v) for a value that has no name, so that a corrupt
// value still prints.
func enumName(names []string, v uint8, what string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, v)
}

// enumParse is the value whose name in names is b.
func enumParse(names []string, b []byte) (uint8, bool) {
	for i, n := range names {
		if n != "" && n == string(b) {
			return uint8(i), true
		}
	}
	return 0, false
}

// Event is one commit fault that fired, with its ground truth. One JSON object per
// event is the faults.jsonl line format (schemas/faults.schema.json in the repository):
//
//	{"time":"2025-01-02T15:04:05.123456789Z","conn":"127.0.0.1:51514","conn_index":3,"point":41,"protocol":"postgres","kind":"commit-cut","truth":"applied","statement":"commit","tag":"COMMIT","txn":{"seq":8,"wrote":true,"digest":"5d2f0c4b9a81e637","text":"insert into orders (id) values ($1); commit"}}
type Event struct {
	// Time is when the fault fired; it carries a monotonic reading for in-process use.
	Time time.Time `json:"time"`
	// Conn is the client's address as the proxy saw it: the client's local address,
	// the same string a client reads from its connection's LocalAddr.
	Conn string `json:"conn"`
	// ConnIndex is the connection's position in the proxy's accept order, from 0.
	ConnIndex uint64 `json:"conn_index"`
	// Point is the commit point's number among the points the proxy counted, from 1
	// (see Pin): commit-cut@commit:N fires at the point numbered N.
	Point uint64 `json:"point,omitempty"`
	// Protocol names the wire protocol (postgres, ...).
	Protocol string `json:"protocol"`
	// Kind is the fault: commit-cut or commit-drop.
	Kind Kind `json:"kind"`
	// Truth is what the fault did to the commit: applied (cut) or not-applied (drop).
	Truth Truth `json:"truth"`
	// Statement is the request that committed (or would have), shortened to 256 bytes.
	Statement string `json:"statement,omitempty"`
	// Tag is the server's reply that proved the commit (cuts only): "COMMIT", "UPDATE 1".
	Tag string `json:"tag,omitempty"`
	// Txn is the transaction the fault hit: which of its connection's transactions,
	// what it ran, and whether it wrote. Nil when the protocol does not tell.
	Txn *Txn `json:"txn,omitempty"`
	// Request is the API request the fault hit (http): method, path, idempotency key
	// and, for a cut, the status the service answered. Nil for database protocols.
	Request *Request `json:"request,omitempty"`
}

// Txn is the transaction a commit fault hit, as the proxy saw it on its connection. An
// operation made of several transactions (read a table of request ids, insert, record
// the request) is explained by the one that was cut: the cut of a read-only COMMIT
// changed nothing.
type Txn struct {
	// Seq numbers the transaction among the transactions of its connection, from 1.
	// Every transaction the proxy saw start there counts, whether it read, wrote or
	// rolled back: PostgreSQL's blocks and autocommit statements (one per simple
	// query, or per Sync of the extended protocol), Redis commands and MULTI blocks,
	// MongoDB commands and session transactions, CQL requests.
	Seq uint64 `json:"seq"`
	// Wrote reports whether the transaction changed data or may have: it is false when
	// its commit is known to have changed nothing, cut or not. That is when every
	// statement of the transaction is a read by its kind (SELECT, GET, find, a CQL
	// SELECT), or when the server's replies to its writes prove they changed nothing
	// (Changed false: a replay whose only write, INSERT ... ON CONFLICT DO NOTHING, was
	// answered "INSERT 0 0"). A statement that can change data is INSERT, UPDATE,
	// DELETE, MERGE, COPY FROM, DDL, CALL, SELECT INTO, nextval/setval; a Redis write
	// command or script (EVAL, EVALSHA, FCALL); a MongoDB write command; a CQL write or
	// schema change. A COMMIT PREPARED, whose transaction ran elsewhere, counts as
	// writing. A function that a SELECT calls could write unseen: the proxy judges
	// statements by their kind and, where it reads them, by the replies' counts.
	Wrote bool `json:"wrote"`
	// Tags are the server's replies to the transaction's statements, in order, up to
	// 16 of them, as the proxy read them before it cut the commit: PostgreSQL's command
	// tags ("BEGIN" aside), such as ["UPDATE 1", "UPDATE 1", "INSERT 0 1"]; for Redis,
	// the first line of each command's reply inside EXEC (":0", "+OK"), or of the
	// single command's. Empty when the protocol does not read them (MongoDB, CQL).
	Tags []string `json:"tags,omitempty"`
	// Changed is what those replies prove the commit changed: true when a write's
	// reply counts rows it touched ("UPDATE 1"), false when every write of the
	// transaction answered a count of zero and no other reply could hide a change.
	// Absent when they do not tell: a write whose reply has no count (DDL, CALL, a
	// data-modifying WITH), a ROLLBACK TO SAVEPOINT, a transaction without a write, or
	// a protocol whose replies the proxy does not read.
	Changed *bool `json:"changed,omitempty"`
	// Digest is the first 16 hex digits of the SHA-256 of the transaction's full text:
	// the same statements give the same digest, so transactions of one shape group
	// together (with prepared statements their parameters are not part of the text).
	Digest string `json:"digest"`
	// Text is the transaction's statements in order, as a match function sees them
	// (Point.Text), shortened to 256 bytes.
	Text string `json:"text"`
}

// Knob controls one commit fault at run time: its probability per commit point and an
// optional cap on how many times it fires. All methods are safe for concurrent use and
// take effect on connections already open; a schedule opens and closes windows with
// Set and Disarm. The zero value is disarmed.
type Knob struct {
	p     atomic.Uint64 // math.Float64bits of the probability
	max   atomic.Int64  // 0: no cap
	taken atomic.Int64  // fires plus cuts decided and not yet resolved, against max
	fired atomic.Int64
}

// Set arms the fault with probability p per commit point (clamped to [0, 1]) and at
// most max fires from now on (0: no cap). It restarts the count that the cap limits.
func (k *Knob) Set(p float64, max int64) {
	if math.IsNaN(p) || p < 0 {
		p = 0
	}
	if p > 1 {
		p = 1
	}
	if max < 0 {
		max = 0
	}
	k.max.Store(max)
	k.taken.Store(0)
	k.p.Store(math.Float64bits(p))
}

// Disarm sets the probability to 0. Cuts already decided for commits in flight still
// happen.
func (k *Knob) Disarm() { k.p.Store(0) }

// P returns the current probability.
func (k *Knob) P() float64 { return math.Float64frombits(k.p.Load()) }

// Max returns the cap on fires that the last Set gave (0: no cap).
func (k *Knob) Max() int64 { return k.max.Load() }

// Fired returns how many times the fault has fired since the proxy started.
func (k *Knob) Fired() int64 { return k.fired.Load() }

// take reserves one fire against the cap; false when the cap is reached.
func (k *Knob) take() bool {
	for {
		n := k.taken.Load()
		m := k.max.Load()
		if m > 0 && n >= m {
			return false
		}
		if k.taken.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// untake returns a reservation whose fault did not fire.
func (k *Knob) untake() { k.taken.Add(-1) }

// Faults holds the knobs of the commit faults of one proxy. There is one decision per
// commit point: one uniform roll u in [0,1) from the connection's seeded generator;
// u < Drop.P() drops, then the next Cut.P() cuts, then the next Mixed.P() fires and a
// fair coin from the same generator picks drop or cut. So the faults never both fire on
// one commit, and with only Mixed armed at P, each commit point fires with P and then
// splits half and half. Probabilities whose sum exceeds 1 are cut at 1 in that order.
//
// Listed holds the faults pinned to one commit point each (see Pin); a pinned point
// takes its fault whatever the knobs say.
type Faults struct {
	Drop  Knob // drops the commit: not applied
	Cut   Knob // cuts the proof of the commit: applied
	Mixed Knob // a drop or a cut, by a fair coin

	Listed Listed
}

// choose makes the decision for one commit point. It returns the fault to apply (0 for
// none) and the knob whose reservation the fault holds.
func (f *Faults) choose(u float64, coin func() bool) (Kind, *Knob) {
	pd, pc, pm := f.Drop.P(), f.Cut.P(), f.Mixed.P()
	switch {
	case u < pd:
		if f.Drop.take() {
			return CommitDrop, &f.Drop
		}
	case u < pd+pc:
		if f.Cut.take() {
			return CommitCut, &f.Cut
		}
	case u < pd+pc+pm:
		k := CommitCut
		if coin() {
			k = CommitDrop
		}
		if f.Mixed.take() {
			return k, &f.Mixed
		}
	}
	return 0, nil
}
