package insert

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestParseKeys(t *testing.T) {
	if got, err := ParseKeys("all"); err != nil || !slices.Equal(got, Keys) {
		t.Errorf("all: %v, %v", got, err)
	}
	if got, err := ParseKeys("uuidv4, identity,uuidv4"); err != nil || !slices.Equal(got, []Key{UUIDv4, Identity}) {
		t.Errorf("list: %v, %v", got, err)
	}
	for _, bad := range []string{"", "serial", "identity,"} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRotate(t *testing.T) {
	keys := []Key{Identity, UUIDv4, ClientMono}
	for round, want := range [][]Key{{Identity, UUIDv4, ClientMono}, {UUIDv4, ClientMono, Identity}, {ClientMono, Identity, UUIDv4}, {Identity, UUIDv4, ClientMono}} {
		if got := Rotate(keys, round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", round, got, want)
		}
	}
}

var uuidText = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-([89ab])[0-9a-f]{3}-[0-9a-f]{12}$`)

func TestUUIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.UnixMilli(1_700_000_000_000)
	prev := ""
	for i := range 100 {
		v4, v7 := newUUIDv4(rng), newUUIDv7(rng, t0.Add(time.Duration(i)*time.Millisecond))
		if m := uuidText.FindStringSubmatch(v4); m == nil || m[1] != "4" {
			t.Fatalf("v4 %q", v4)
		}
		if m := uuidText.FindStringSubmatch(v7); m == nil || m[1] != "7" {
			t.Fatalf("v7 %q", v7)
		}
		// Later milliseconds sort later: the time-ordered property v7 is chosen for.
		if v7 <= prev {
			t.Fatalf("v7 %q not after %q", v7, prev)
		}
		prev = v7
	}
	if got := newUUIDv7(rng, t0)[:13]; got != "018bcfe5-6800" {
		t.Errorf("v7 timestamp bits %q, want 018bcfe5-6800 for %v", got, t0)
	}
}
