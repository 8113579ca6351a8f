package indoubttest

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The environment variables of the fault seed: INDOUBT_SEED fixes the seed of every
// server's proxy (to reproduce a failure: the message of a failed Check prints the
// command), INDOUBT_SEEDS says how many seeds Seeds runs.
const (
	envSeedVar  = "INDOUBT_SEED"
	envSeedsVar = "INDOUBT_SEEDS"
)

// seed is a proxy's fault seed and where it came from.
type seed struct {
	n int64
	// fixed: given by the Seed option, so that the command that reproduces the run
	// needs no INDOUBT_SEED.
	fixed bool
}

// seeds holds the seed Seeds gave each of its subtests, by the subtest's name.
var seeds struct {
	mu sync.Mutex
	by map[string]int64
}

// seedFor chooses the proxy's seed for tb: the Seed option, else INDOUBT_SEED, else
// the seed Seeds gave tb's subtest (or one it runs in), else one derived from tb's
// name, the same every run.
func seedFor(tb testing.TB, opts []Option) seed {
	tb.Helper()
	for _, o := range opts {
		if o.seed != nil {
			return seed{n: *o.seed, fixed: true}
		}
	}
	if n, ok := envSeed(tb); ok {
		return seed{n: n}
	}
	seeds.mu.Lock()
	defer seeds.mu.Unlock()
	for name := tb.Name(); name != ""; {
		if n, ok := seeds.by[name]; ok {
			return seed{n: n}
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return seed{n: seedOf(tb.Name())}
}

// envSeed reads INDOUBT_SEED; a value that is not an integer fails the test.
func envSeed(tb testing.TB) (int64, bool) {
	tb.Helper()
	v := os.Getenv(envSeedVar)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		tb.Fatalf("indoubttest: %s=%q is not an integer", envSeedVar, v)
	}
	return n, true
}

// seedOf derives a seed from a name, so that a test makes the same fault decisions for
// the same messages every run: FNV-1a, then splitmix64's finalizer, so that names that
// differ in their last byte (Seeds' "#0", "#1") give seeds unlike each other; 63 bits.
func seedOf(name string) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int64(h >> 1)
}

// Seeds runs f as one subtest per fault seed, named "seed=N", and gives the servers
// made in it (pgtest.Postgres(t), ...) that seed: n seeds derived from the test's name,
// the same every run, or as many as INDOUBT_SEEDS says (a nightly job may ask for
// more). With INDOUBT_SEED set it runs that seed alone, which is how the command a
// failure prints reproduces it. The same seed gives the same fault decisions for the
// same messages in the same order; goroutines scheduled differently send them in
// another order, so a seed narrows a failure down rather than replaying it exactly.
func Seeds(t *testing.T, n int, f func(t *testing.T, seed int64)) {
	t.Helper()
	if v := os.Getenv(envSeedsVar); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("indoubttest: %s=%q is not a positive number of seeds", envSeedsVar, v)
		}
		n = k
	}
	list := make([]int64, 0, n)
	if s, ok := envSeed(t); ok {
		list = append(list, s)
	} else {
		for i := range n {
			list = append(list, seedOf(fmt.Sprintf("%s#%d", t.Name(), i)))
		}
	}
	for _, s := range list {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			seeds.mu.Lock()
			if seeds.by == nil {
				seeds.by = map[string]int64{}
			}
			seeds.by[t.Name()] = s
			seeds.mu.Unlock()
			t.Cleanup(func() {
				seeds.mu.Lock()
				delete(seeds.by, t.Name())
				seeds.mu.Unlock()
			})
			f(t, s)
		})
	}
}

// reproduce is the command that runs tb again with the same fault seed.
func reproduce(tb testing.TB, s seed) string {
	var parts []string
	for _, p := range strings.Split(tb.Name(), "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	cmd := fmt.Sprintf("go test -count=1 -run '%s' .", strings.Join(parts, "/"))
	if !s.fixed {
		cmd = fmt.Sprintf("%s=%d %s", envSeedVar, s.n, cmd)
	}
	if dir, err := os.Getwd(); err == nil {
		cmd = fmt.Sprintf("(cd %s && %s)", dir, cmd)
	}
	return cmd
}
