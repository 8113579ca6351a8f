package schedule

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

func TestParseListed(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want toxics.Pin
	}{
		{"commit-cut@commit:3", toxics.Pin{Kind: toxics.CommitCut, Point: 3}},
		{"commit_drop@commit:1", toxics.Pin{Kind: toxics.CommitDrop, Point: 1}},
		{" commit-cut @ conn:2/txn:5", toxics.Pin{Kind: toxics.CommitCut, Conn: 2, Txn: 5}},
		{"commit-drop@conn:0/txn:1", toxics.Pin{Kind: toxics.CommitDrop, Conn: 0, Txn: 1}},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			f, err := ParseFault(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if f.Pin == nil || *f.Pin != tt.want {
				t.Fatalf("pin %+v, want %+v", f.Pin, tt.want)
			}
			if f.Name != tt.want.Kind.String() || f.Bounded || f.Process || f.Toxic != nil {
				t.Errorf("fault %+v: want a commit fault with no window", f)
			}
			// The pin's own spelling parses back to the same pin.
			g, err := ParseFault(f.Pin.String())
			if err != nil || *g.Pin != tt.want {
				t.Errorf("%s parses back to %+v, %v", f.Pin, g.Pin, err)
			}
		})
	}
}

func TestParseListedErrors(t *testing.T) {
	for _, tt := range []struct{ spec, want string }{
		{"commit-cut@commit:0", "from 1"},
		{"commit-cut@commit:x", "want its number"},
		{"commit-cut:0.5@commit:3", "takes no probability"},
		{"commit-cut,max=2@commit:3", "takes no probability"},
		{"commit-mixed@commit:3", "commit-mixed's coin"},
		{"kill@commit:3", "only commit-cut and commit-drop"},
		{"commit-cut@conn:1", "want conn:C/txn:T"},
		{"commit-cut@conn:1/txn:0", "from 1"},
		{"commit-cut@conn:-1/txn:2", "accept index"},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseFault(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.spec) {
				t.Fatalf("error %v, want one naming %q and saying %q", err, tt.spec, tt.want)
			}
		})
	}
}

func TestParseScheduleListed(t *testing.T) {
	// Listed entries have no window: they never overlap one another or a window of
	// the same knob.
	s, err := Parse([]string{"commit-cut@commit:3", "commit-cut@commit:9", "commit-cut:0.1@1s-2s", "commit-drop@conn:1/txn:2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.OnProxy()) != 4 {
		t.Errorf("on the proxy: %d entries, want 4", len(s.OnProxy()))
	}
	if _, err := Parse([]string{"commit-cut@commit:3", "commit-drop@commit:3"}); err == nil || !strings.Contains(err.Error(), "lists already") {
		t.Errorf("one point listed twice: %v", err)
	}
}

// FuzzParseFault: no entry makes ParseFault panic, and a listed fault's own spelling
// parses back to the same point.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"commit-cut@commit:3", "commit-drop@conn:2/txn:5", "kill@1s-2s", "commit-cut:0.2@5s-15s", "latency:50ms~10ms,stream=up@0s-", "commit-cut@conn:/txn:", "@commit:", "failover:rejoin@2s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fl, err := ParseFault(spec)
		if err != nil || fl.Pin == nil {
			return
		}
		g, err := ParseFault(fl.Pin.String())
		if err != nil || g.Pin == nil || *g.Pin != *fl.Pin {
			t.Fatalf("%q lists %+v; its spelling %q parses to %+v, %v", spec, *fl.Pin, fl.Pin.String(), g.Pin, err)
		}
	})
}
