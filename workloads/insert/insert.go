// Package insert is the primary-key workload: every worker inserts single rows into one
// table whose primary key has one shape (a sequence, a random or time-ordered uuid, a
// key the client chose), and the run reports what the shape costs (throughput, the
// index's size before and after a rebuild, WAL and full-page images per insert,
// sequence gaps) and whether a retried insert stays exactly once.
//
// A key the server generates makes a retry of an insert whose commit was lost a second
// row; a key the client chose before the first attempt makes that retry a unique
// violation, which the store recognises as its own row (workloads.ReasonAlreadyApplied)
// and which proves the first attempt committed. Every row carries its op id, so the
// exactly-once checker counts rows per operation and names each duplicate.
//
// History: an insert is f "apply" with the operation's op id; its invoke value is the
// key the client chose (none for server keys); its ok value is an Outcome. The final
// read is f "read" whose ok value is a checker.ExactlyOnceState: rows per op id.
package insert

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
)

// Key is the shape of the primary key.
type Key string

// The key shapes. Server side: identity (CACHE 1), identity-cache50, bigserial,
// uuidv4 (gen_random_uuid()), uuidv7 (uuidv7(), PostgreSQL 18; client side before).
// Client side, chosen before the first attempt: client-mono (one counter shared by the
// workers), client-randint (random 63-bit), client-uuidv4, client-uuidv7.
const (
	Identity        Key = "identity"
	IdentityCache50 Key = "identity-cache50"
	BigSerial       Key = "bigserial"
	UUIDv4          Key = "uuidv4"
	UUIDv7          Key = "uuidv7"
	ClientMono      Key = "client-mono"
	ClientRandInt   Key = "client-randint"
	ClientUUIDv4    Key = "client-uuidv4"
	ClientUUIDv7    Key = "client-uuidv7"
)

// Keys lists every shape, in the order --key all runs them in its first round.
var Keys = []Key{Identity, IdentityCache50, BigSerial, UUIDv4, UUIDv7, ClientMono, ClientRandInt, ClientUUIDv4, ClientUUIDv7}

// All is the --key value that names every shape.
const All = "all"

// ParseKeys reads --key: one shape, a comma list, or "all".
func ParseKeys(s string) ([]Key, error) {
	if s == All {
		return slices.Clone(Keys), nil
	}
	var out []Key
	for _, p := range strings.Split(s, ",") {
		k := Key(strings.TrimSpace(p))
		if !slices.Contains(Keys, k) {
			return nil, fmt.Errorf("unknown key shape %q (want all or one of %s)", p, choice.List(Keys))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// ClientSide reports whether the shape is always chosen by the client.
func (k Key) ClientSide() bool { return strings.HasPrefix(string(k), "client-") }

// Sequence reports whether the server takes the key from a sequence.
func (k Key) Sequence() bool { return k == Identity || k == IdentityCache50 || k == BigSerial }

// UUID reports whether the key is a uuid.
func (k Key) UUID() bool { return strings.Contains(string(k), "uuid") }

// Rotate returns keys starting at index round (mod len): the order of round number
// round, so that no shape always runs first on a fresh server or last on a full disk.
func Rotate(keys []Key, round int) []Key {
	if len(keys) == 0 {
		return nil
	}
	r := round % len(keys)
	return append(slices.Clone(keys[r:]), keys[:r]...)
}

// Workload binds the insert workload to a Store for one key shape. Set its fields before
// the run; it is then safe for the runner's concurrent workers.
type Workload struct {
	Store Store
	Key   Key

	plan     Plan
	measures Measures
	measErr  string
	mono     atomic.Int64

	mu sync.Mutex
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the insert workload on store for key ("" means Identity).
func New(store Store, key Key) *Workload {
	if key == "" {
		key = Identity
	}
	return &Workload{Store: store, Key: key}
}

// Name is workloads.Insert.
func (w *Workload) Name() workloads.Name { return workloads.Insert }

// Model is the exactly-once model: rows per op id.
func (w *Workload) Model() string { return checker.ExactlyOnceModel }

// Mechanism names the key shape and who generates it.
func (w *Workload) Mechanism() string {
	return fmt.Sprintf("INSERT, key %s: %s", w.Key, w.plan.Generated)
}

// Params records the key shape and how it was generated.
func (w *Workload) Params() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		"key": histories.Value(w.Key), "generated": histories.Value(w.plan.Generated),
		"client_side": histories.Value(w.plan.ClientSide), "server": histories.Value(w.plan.Server),
	}
}

// Setup prepares a fresh table for the key shape.
func (w *Workload) Setup(ctx context.Context) error {
	if !slices.Contains(Keys, w.Key) {
		return fmt.Errorf("unknown key shape %q (want one of %s)", w.Key, choice.List(Keys))
	}
	p, err := w.Store.PrepareInsert(ctx, w.Key)
	if err != nil {
		return err
	}
	w.plan, w.measures, w.measErr = p, Measures{}, ""
	w.mono.Store(0)
	return nil
}

// Plan is the table's plan, once Setup has run.
func (w *Workload) Plan() Plan { return w.plan }

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.Store.InsertSession(ctx, w.plan)
	if err != nil {
		return nil, err
	}
	return &worker{Session: s, w: w}, nil
}

// Final measures what the run cost (before anything else writes WAL), then reads the
// rows per op id.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	m, err := w.Store.MeasureInsert(ctx, w.plan)
	w.mu.Lock()
	if err != nil {
		w.measErr = err.Error()
	} else {
		w.measures = m
	}
	w.mu.Unlock()
	rows, err := w.Store.InsertedRows(ctx)
	if err != nil {
		return nil, nil, err
	}
	return []workloads.Call{{F: "read"}}, []workloads.Reply{{Value: checker.ExactlyOnceState(rows)}}, nil
}

// Outcome is the value of an ok insert.
type Outcome struct {
	// ID is the row's key as text.
	ID string `json:"id"`
	// AlreadyApplied is true when this attempt met a unique violation on the key the
	// client chose, and the row there carries this operation's op id: an earlier
	// attempt committed.
	AlreadyApplied bool `json:"already_applied,omitempty"`
}

type worker struct {
	Session
	w *Workload
}

// Next chooses the operation's key when the client chooses it: once, before the first
// attempt, so that every retry carries the same key.
func (k *worker) Next(rng *rand.Rand) workloads.Call {
	c := workloads.Call{F: "apply"}
	if !k.w.plan.ClientSide {
		return c
	}
	switch k.w.Key {
	case ClientMono:
		c.Value = k.w.mono.Add(1)
	case ClientRandInt:
		c.Value = rng.Int64()
	case ClientUUIDv4:
		c.Value = newUUIDv4(rng)
	default: // client-uuidv7, and uuidv7 on a server without uuidv7()
		c.Value = newUUIDv7(rng, time.Now())
	}
	return c
}

func (k *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	if call.F != "apply" {
		return workloads.Reply{}, fmt.Errorf("insert: unknown operation %q", call.F)
	}
	id, err := k.Insert(ctx, call.Value, req)
	if err != nil {
		if workloads.ReasonOf(err) == workloads.ReasonAlreadyApplied {
			return workloads.Reply{Value: Outcome{ID: fmt.Sprint(call.Value), AlreadyApplied: true}}, nil
		}
		return workloads.Reply{}, err
	}
	return workloads.Reply{Value: Outcome{ID: id}}, nil
}

// newUUIDv4 is a random (version 4) uuid from rng: seeded, so a run's keys repeat.
func newUUIDv4(rng *rand.Rand) string {
	var b [16]byte
	putRandom(b[:], rng)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// newUUIDv7 is a time-ordered (version 7, RFC 9562) uuid: 48 bits of Unix milliseconds,
// then random bits from rng.
func newUUIDv7(rng *rand.Rand, now time.Time) string {
	var b [16]byte
	putRandom(b[:], rng)
	ms := uint64(now.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func putRandom(b []byte, rng *rand.Rand) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func formatUUID(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// maxNamed bounds the duplicated op ids Final names; Duplicates counts all.
const maxNamed = 20

// Final is the `final` section of results.json for the insert workload: what the key
// shape cost, and whether every insert is in the table exactly once.
type Final struct {
	Key        Key    `json:"key"`
	Generated  string `json:"generated"`
	ClientSide bool   `json:"client_side"`
	Server     string `json:"server,omitempty"`
	// Acknowledged counts inserts that completed ok (AlreadyApplied included), Failed
	// those that certainly did not apply, Unknown those whose outcome is unknown.
	Acknowledged int64 `json:"acknowledged"`
	Failed       int64 `json:"failed"`
	Unknown      int64 `json:"unknown"`
	// Attempts counts every attempt of every insert: each one that reached the server
	// took a value from a sequence key's sequence.
	Attempts int64 `json:"attempts"`
	// AlreadyApplied counts retries whose unique violation on the client's own key
	// proved that an earlier attempt had committed.
	AlreadyApplied int64 `json:"unique_violations_already_applied"`
	// Rows is the number of rows the final read counted; nil without a final read.
	Rows *int64 `json:"rows"`
	// Duplicates counts rows beyond the first of an op id (a retried insert that
	// inserted again); DuplicateOps names up to 20 of those op ids, with their rows.
	Duplicates   int64            `json:"duplicates"`
	DuplicateOps map[string]int64 `json:"duplicate_ops,omitempty"`
	// Lost counts acknowledged inserts whose op id has no row.
	Lost int64 `json:"lost"`
	// Measures are the server's figures; MeasureError says why they are missing.
	Measures     Measures `json:"measures"`
	MeasureError string   `json:"measure_error,omitempty"`
	// WALPerInsert is WAL bytes per row in the table; 0 when unknown.
	WALPerInsert float64 `json:"wal_bytes_per_insert"`
	// GapsCause explains the sequence's gaps: they are not an anomaly.
	GapsCause string `json:"gaps_cause,omitempty"`
	// EvidenceCuts counts commits the fault proxy cut after the server applied them
	// (ground truth, never fed to the checker).
	EvidenceCuts int64 `json:"evidence_cuts_applied"`
	// Notes are preparation steps the server refused.
	Notes []string `json:"notes,omitempty"`
}

var _ workloads.Final = Final{}

// Summary computes the final state from the history (final read included) and the
// server's measures.
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	w.mu.Lock()
	f := Final{Key: w.Key, Generated: w.plan.Generated, ClientSide: w.plan.ClientSide, Server: w.plan.Server,
		Measures: w.measures, MeasureError: w.measErr, Notes: w.plan.Notes}
	w.mu.Unlock()
	open := map[int]histories.Op{}
	acked := map[string]bool{}
	var state checker.ExactlyOnceState
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		if op.Type == histories.Invoke {
			open[op.Process] = op
			continue
		}
		inv, ok := open[op.Process]
		if !ok {
			continue
		}
		delete(open, op.Process)
		switch inv.F {
		case "apply":
			f.Attempts += int64(max(op.Attempt, 1))
			switch op.Type {
			case histories.OK:
				f.Acknowledged++
				acked[inv.OpID] = true
				var o Outcome
				if json.Unmarshal(op.Value, &o) == nil && o.AlreadyApplied {
					f.AlreadyApplied++
				}
			case histories.Fail:
				f.Failed++
			default:
				f.Unknown++
			}
		case "read":
			if op.Type == histories.OK {
				var s checker.ExactlyOnceState
				if json.Unmarshal(op.Value, &s) == nil {
					state = s
				}
			}
		}
	}
	for _, inv := range open {
		if inv.F == "apply" {
			f.Unknown++
			f.Attempts++
		}
	}
	if state != nil {
		var rows int64
		var dups []string
		for id, n := range state {
			rows += n
			if n > 1 {
				f.Duplicates += n - 1
				dups = append(dups, id)
			}
		}
		f.Rows = &rows
		sort.Strings(dups)
		if len(dups) > 0 {
			f.DuplicateOps = map[string]int64{}
			for _, id := range dups[:min(len(dups), maxNamed)] {
				f.DuplicateOps[id] = state[id]
			}
		}
		for id := range acked {
			if state[id] == 0 {
				f.Lost++
			}
		}
	}
	if m := f.Measures; m.WALBytes != nil && m.Rows > 0 {
		f.WALPerInsert = float64(*m.WALBytes) / float64(m.Rows)
	}
	f.GapsCause = f.gapsCause()
	return f
}

// gapsCause explains a sequence's gaps from the attempts that left no row and the
// sequence's cache.
func (f Final) gapsCause() string {
	g := f.Measures.Gaps
	if g == nil || *g == 0 {
		return ""
	}
	noRow := f.Attempts - f.Measures.Rows
	s := fmt.Sprintf("%d sequence values hold no row: not an anomaly (a sequence is not transactional: an attempt that failed, was cut or rolled back keeps the value it took; %d attempts left no row)", *g, max(noRow, 0))
	if f.Key == IdentityCache50 {
		s += "; with CACHE 50 every session takes 50 values at a time and the values it has not used when its connection ends are never handed out (each connection the cuts closed discards up to 49)"
	}
	if f.Duplicates > 0 {
		s += "; duplicates are the anomaly, gaps are not"
	}
	return s
}

// Figures shows the acknowledged inserts and the rows in the table.
func (f Final) Figures() workloads.Figures {
	return workloads.Figures{Applied: &f.Acknowledged, Value: f.Rows}
}
