package txn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Distribution is how a transaction picks its keys among the active ones.
type Distribution string

const (
	// Uniform picks every active key alike.
	Uniform Distribution = "uniform"
	// Zipf picks the first active keys far more often than the last (exponent 1.5), so
	// that a few keys are hot.
	Zipf Distribution = "zipf"
)

// Distributions lists the distributions in the order help texts show them.
var Distributions = []Distribution{Uniform, Zipf}

// Pattern is the shape of the generated transactions.
type Pattern string

const (
	// Random transactions are 1 to MaxOps micro-ops, each a read with probability
	// ReadFraction, else a write (an append), of a key drawn by the distribution.
	Random Pattern = "random"
	// ReadModifyWrite transactions read each of 1 to MaxOps/2 keys and then write it,
	// the way an application increments a counter it read: the articles' contention
	// row, where READ COMMITTED loses updates.
	ReadModifyWrite Pattern = "read-modify-write"
)

// Patterns lists the patterns in the order help texts show them.
var Patterns = []Pattern{Random, ReadModifyWrite}

// Defaults of Options.
const (
	DefaultKeys            = 8
	DefaultMaxOps          = 4
	DefaultReadFraction    = 0.5
	DefaultMaxWritesPerKey = 32
)

// Options shape the generated transactions. The zero value is the defaults: 8 active
// keys, 1 to 4 micro-ops a transaction, half of them reads, keys drawn uniformly, at
// most 32 writes to a key before it is retired for a fresh one.
type Options struct {
	// Keys is how many keys are active at a time (at least 1).
	Keys int `json:"keys,omitempty"`
	// MaxOps bounds the micro-ops of a transaction: each has 1 to MaxOps.
	MaxOps int `json:"max_ops,omitempty"`
	// ReadFraction is the probability that a micro-op of a Random transaction is a
	// read, above 0 and at most 1; 0 means DefaultReadFraction. Transactions without
	// reads are not offered: only reads tell what happened.
	ReadFraction float64 `json:"read_fraction,omitempty"`
	// Distribution picks keys among the active ones; "" means Uniform.
	Distribution Distribution `json:"distribution,omitempty"`
	// Pattern is the shape of the transactions; "" means Random.
	Pattern Pattern `json:"pattern,omitempty"`
	// MaxWritesPerKey retires a key once that many writes to it have been generated,
	// and activates a fresh key in its place, so that lists stay short and every key's
	// versions are read often (Elle's key rotation).
	MaxWritesPerKey int `json:"max_writes_per_key,omitempty"`
	// ConsistencyModels are the models the history is checked for; empty means those
	// the store promises (Guarantee.Models).
	ConsistencyModels []string `json:"consistency_models,omitempty"`
}

// withDefaults returns o with its zero fields set, or an error naming the field that
// is out of range.
func (o Options) withDefaults() (Options, error) {
	if o.Keys == 0 {
		o.Keys = DefaultKeys
	}
	if o.MaxOps == 0 {
		o.MaxOps = DefaultMaxOps
	}
	if o.ReadFraction == 0 {
		o.ReadFraction = DefaultReadFraction
	}
	if o.Distribution == "" {
		o.Distribution = Uniform
	}
	if o.Pattern == "" {
		o.Pattern = Random
	}
	if o.MaxWritesPerKey == 0 {
		o.MaxWritesPerKey = DefaultMaxWritesPerKey
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// OptionError is an option out of range: Field names the Options field.
type OptionError struct {
	Field string
	Err   error
}

// Error names the field: "txn.Keys: ...".
func (e *OptionError) Error() string { return "txn." + e.Field + ": " + e.Err.Error() }

// Unwrap returns what is wrong with the field.
func (e *OptionError) Unwrap() error { return e.Err }

func optErr(field, format string, a ...any) error {
	return &OptionError{Field: field, Err: fmt.Errorf(format, a...)}
}

// Validate reports the first field out of range, as an *OptionError; zero fields are
// the defaults and valid.
func (o Options) Validate() error {
	switch {
	case o.Keys < 0:
		return optErr("Keys", "must be at least 1 (got %d)", o.Keys)
	case o.MaxOps < 0:
		return optErr("MaxOps", "must be at least 1 (got %d)", o.MaxOps)
	case o.MaxOps > 1000:
		return optErr("MaxOps", "at most 1000 micro-ops a transaction (got %d)", o.MaxOps)
	case o.ReadFraction < 0 || o.ReadFraction > 1:
		return optErr("ReadFraction", "must be above 0 and at most 1 (got %v)", o.ReadFraction)
	case o.MaxWritesPerKey < 0:
		return optErr("MaxWritesPerKey", "must be at least 1 (got %d)", o.MaxWritesPerKey)
	case o.Distribution != "" && !slices.Contains(Distributions, o.Distribution):
		return optErr("Distribution", "unknown distribution %q (want uniform or zipf)", o.Distribution)
	case o.Pattern != "" && !slices.Contains(Patterns, o.Pattern):
		return optErr("Pattern", "unknown pattern %q (want random or read-modify-write)", o.Pattern)
	}
	return nil
}

// IsZero reports whether o sets nothing.
func (o Options) IsZero() bool {
	return o.Keys == 0 && o.MaxOps == 0 && o.ReadFraction == 0 && o.Distribution == "" && o.Pattern == "" &&
		o.MaxWritesPerKey == 0 && len(o.ConsistencyModels) == 0
}

// gen generates the run's transactions. Workers call it concurrently, each with its own
// random source; the key space (which keys are active, how often each was written) and
// the values are shared, so that every value is unique across the run.
type gen struct {
	opt       Options
	singleKey bool

	mu     sync.Mutex
	active []int64       // the active keys
	writes map[int64]int // writes generated to each active key
	next   int64         // the key activated next

	value atomic.Int64 // the last value handed out
}

func newGen(opt Options, singleKey bool) *gen {
	g := &gen{opt: opt, singleKey: singleKey, writes: map[int64]int{}}
	for k := 0; k < opt.Keys; k++ {
		g.active = append(g.active, int64(k))
	}
	g.next = int64(opt.Keys)
	return g
}

// keysUsed returns every key any transaction may have touched: 0 to the last activated.
func (g *gen) keysUsed() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

// picker draws indices of active keys for one worker.
type picker struct {
	rng  *rand.Rand
	zipf *rand.Zipf
}

func (g *gen) picker(rng *rand.Rand) *picker {
	p := &picker{rng: rng}
	if g.opt.Distribution == Zipf && g.opt.Keys > 1 {
		p.zipf = rand.NewZipf(rng, 1.5, 1, uint64(g.opt.Keys-1))
	}
	return p
}

func (p *picker) index(n int) int {
	if p.zipf != nil {
		return int(p.zipf.Uint64())
	}
	return p.rng.IntN(n)
}

// txn generates one transaction of model (Append for list-append, Write for
// rw-register) with p's random source.
func (g *gen) txn(p *picker, write Func) Txn {
	rng := p.rng
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.opt.Pattern {
	case ReadModifyWrite:
		n := 1 + rng.IntN(max(1, g.opt.MaxOps/2))
		if g.singleKey {
			n = 1
		}
		var t Txn
		var picked []int64
		for len(picked) < n {
			k := g.active[p.index(len(g.active))]
			if slices.Contains(picked, k) {
				if len(picked) >= len(g.active) {
					break
				}
				continue
			}
			picked = append(picked, k)
			t = append(t, Mop{F: Read, Key: k}, Mop{F: write, Key: k, Value: g.value.Add(1)})
		}
		for _, k := range picked {
			g.wrote(k)
		}
		return t
	}
	n := 1 + rng.IntN(g.opt.MaxOps)
	t := make(Txn, 0, n)
	key := g.active[p.index(len(g.active))]
	var wrote []int64
	for range n {
		if !g.singleKey {
			key = g.active[p.index(len(g.active))]
		}
		if rng.Float64() < g.opt.ReadFraction {
			t = append(t, Mop{F: Read, Key: key})
			continue
		}
		t = append(t, Mop{F: write, Key: key, Value: g.value.Add(1)})
		wrote = append(wrote, key)
	}
	for _, k := range wrote {
		g.wrote(k)
	}
	return t
}

// wrote counts one write generated to key k, retiring k for a fresh key once it has had
// MaxWritesPerKey. The caller holds g.mu.
func (g *gen) wrote(k int64) {
	g.writes[k]++
	if g.writes[k] < g.opt.MaxWritesPerKey {
		return
	}
	i := slices.Index(g.active, k)
	if i < 0 {
		return // retired already by an earlier write of the same transaction
	}
	delete(g.writes, k)
	g.active[i] = g.next
	g.next++
}
