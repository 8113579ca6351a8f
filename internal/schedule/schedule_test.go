package schedule

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		spec string
		want Fault
	}{
		{"commit-cut", Fault{Name: "commit-cut", P: 1}},
		{"commit-cut:0.2@5s-15s", Fault{Name: "commit-cut", P: 0.2, Start: 5 * time.Second, End: 15 * time.Second, Bounded: true}},
		{"commit_drop:0.5,max=3", Fault{Name: "commit-drop", P: 0.5, Max: 3}},
		{"commit-mixed:0.2@1m-", Fault{Name: "commit-mixed", P: 0.2, Start: time.Minute}},
		{"latency:50ms", Fault{Name: "latency", Toxic: &faults.Toxic{Type: "latency", Attributes: map[string]int64{"latency": 50}}}},
		{"latency:50ms~10ms,stream=up@0s-30s", Fault{Name: "latency", Toxic: &faults.Toxic{Type: "latency", Upstream: true,
			Attributes: map[string]int64{"latency": 50, "jitter": 10}}, End: 30 * time.Second, Bounded: true}},
		{"bandwidth:100", Fault{Name: "bandwidth", Toxic: &faults.Toxic{Type: "bandwidth", Attributes: map[string]int64{"rate": 100}}}},
		{"timeout:1s", Fault{Name: "timeout", Toxic: &faults.Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": 1000}}}},
		{"timeout:0s", Fault{Name: "timeout", Toxic: &faults.Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}}},
		{"reset_peer", Fault{Name: "reset_peer", Toxic: &faults.Toxic{Type: "reset_peer", Attributes: map[string]int64{}}}},
		{"reset-peer:500ms", Fault{Name: "reset_peer", Toxic: &faults.Toxic{Type: "reset_peer", Attributes: map[string]int64{"timeout": 500}}}},
		{"slow_close:100ms", Fault{Name: "slow_close", Toxic: &faults.Toxic{Type: "slow_close", Attributes: map[string]int64{"delay": 100}}}},
		{"limit_data:1000", Fault{Name: "limit_data", Toxic: &faults.Toxic{Type: "limit_data", Attributes: map[string]int64{"bytes": 1000}}}},
		{"partition@5s-7s", Fault{Name: "partition", Start: 5 * time.Second, End: 7 * time.Second, Bounded: true}},
		{"partition:halves@1s-2s", Fault{Name: "partition", Shape: Halves, Start: time.Second, End: 2 * time.Second, Bounded: true}},
		{"partition:isolate:n2@1s-2s", Fault{Name: "partition", Shape: Isolate, Target: "n2", Start: time.Second, End: 2 * time.Second, Bounded: true}},
		{"partition:one-way@1s-2s", Fault{Name: "partition", Shape: OneWay, Start: time.Second, End: 2 * time.Second, Bounded: true}},
		{"partition:one-way:n3@1s-2s", Fault{Name: "partition", Shape: OneWay, Target: "n3", Start: time.Second, End: 2 * time.Second, Bounded: true}},
		{"partition:majorities-ring@0s-9s", Fault{Name: "partition", Shape: MajoritiesRing, End: 9 * time.Second, Bounded: true}},
		{"latency:200ms,link=replication@2s-6s", Fault{Name: "latency", Link: "replication", Toxic: &faults.Toxic{Type: "latency", Attributes: map[string]int64{"latency": 200}},
			Start: 2 * time.Second, End: 6 * time.Second, Bounded: true}},
		{"prepare-cut", Fault{Name: "prepare-cut", P: 1, Statement: PrepareStatement}},
		{"prepare_drop:0.3@1s-2s", Fault{Name: "prepare-drop", P: 0.3, Statement: PrepareStatement, Start: time.Second, End: 2 * time.Second, Bounded: true}},
		{"coordinator-crash@2s", Fault{Name: "coordinator-crash", Coordinator: true, Start: 2 * time.Second, Point: true}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseFault(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Spec = tt.spec
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v (toxic %+v), want %+v (toxic %+v)", got, got.Toxic, tt.want, tt.want.Toxic)
			}
		})
	}
}

func TestParseFaultErrors(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"", "no fault name"},
		{"chaos", `unknown fault "chaos"`},
		{"commit-cut:2", "want a number from 0 to 1"},
		{"commit-cut:abc", "want a number from 0 to 1"},
		{"commit-cut:0.5,max=0", "at least 1"},
		{"commit-cut:0.5,stream=up", `takes no option "stream"`},
		{"commit-cut:0.5,0.3", "want KEY=VALUE"},
		{"commit-cut@5s", "want START-END"},
		{"commit-cut@15s-5s", "the end must come after the start"},
		{"commit-cut@x-5s", "window start"},
		{"commit-cut@1s-y", "window end"},
		{"latency", "latency needs a delay"},
		{"latency:abc", "not a duration"},
		{"latency:1500us", "whole number of milliseconds"},
		{"latency:5ms~x", "jitter"},
		{"latency:5ms,stream=sideways", "want up or down"},
		{"bandwidth:-1", "KB/s"},
		{"limit_data:x", "bytes"},
		{"slow_close", "needs a delay"},
		{"partition", "needs a window"},
		{"partition@5s-", "needs a window with an end"},
		{"partition:1@1s-2s", "partition shape"},
		{"partition:square@1s-2s", "want one of isolate-primary"},
		{"partition:isolate@1s-2s", "needs a node"},
		{"partition:halves:n1@1s-2s", "takes no node"},
		{"partition:isolate:N_1@1s-2s", "a node's name"},
		{"partition:halves@1s-", "needs a window with an end"},
		{"latency:5ms,link=gossip", "link="},
		{"coordinator-crash", "give a time"},
		{"coordinator-crash@1s-2s", "happens at an instant"},
		{"coordinator-crash:0.5@1s", "takes no parameter"},
		{"prepare-cut:1.5", "want a number from 0 to 1"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseFault(tt.spec)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") || !strings.Contains(msg, `"`+tt.spec+`"`) {
				t.Errorf("error %q: want one line naming the entry and containing %q", msg, tt.want)
			}
		})
	}
}

func TestParseScheduleOverlap(t *testing.T) {
	if _, err := Parse([]string{"commit-cut:0.1@0s-10s", "commit-cut:0.5@10s-20s", "commit-drop@5s-", "latency:5ms", "latency:9ms@1s-2s"}); err != nil {
		t.Fatalf("back-to-back windows and distinct faults: %v", err)
	}
	for _, specs := range [][]string{
		{"commit-cut:0.1@0s-10s", "commit-cut:0.5@9s-20s"},
		{"commit-drop", "commit-drop@5s-6s"},
		{"partition@1s-3s", "partition@2s-4s"},
		{"partition:halves@1s-3s", "partition:isolate-primary@2s-4s"},
		{"commit-mixed@5s-", "commit-mixed@100s-200s"},
		// prepare-cut arms the same knob as commit-cut.
		{"commit-cut@0s-10s", "prepare-cut@5s-15s"},
	} {
		if _, err := Parse(specs); err == nil || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("%q: error %v, want an overlap", specs, err)
		}
	}
}

func TestBetweenNodesAreLeftToTheRunner(t *testing.T) {
	s, err := Parse([]string{"partition:majority@1s-2s", "latency:5ms,link=replication", "latency:5ms", "partition@3s-4s", "kill@5s"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.BetweenNodes() {
		got = append(got, f.Spec)
	}
	if want := []string{"partition:majority@1s-2s", "latency:5ms,link=replication"}; !reflect.DeepEqual(got, want) {
		t.Errorf("BetweenNodes %q, want %q", got, want)
	}
}

// TestScheduleOnProxy: the proxy's share of a schedule leaves out what the runner
// applies itself, and a second coordinator crash is refused.
func TestScheduleOnProxy(t *testing.T) {
	s, err := Parse([]string{"commit-cut:0.1", "kill@1s-2s", "coordinator-crash@3s", "prepare-drop@4s-5s"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range s.OnProxy() {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "commit-cut prepare-drop" {
		t.Errorf("OnProxy = %v, want commit-cut prepare-drop", names)
	}
	if _, err := Parse([]string{"coordinator-crash@1s", "coordinator-crash@2s"}); err == nil || !strings.Contains(err.Error(), "one coordinator crash") {
		t.Errorf("two crashes: %v", err)
	}
}

func TestParseProcessFaults(t *testing.T) {
	tests := []struct {
		spec string
		want Fault
	}{
		{"kill@5s-8s", Fault{Name: "kill", Process: true, Start: 5 * time.Second, End: 8 * time.Second, Bounded: true}},
		{"kill@5s", Fault{Name: "kill", Process: true, Start: 5 * time.Second, End: 5*time.Second + DefaultKillDowntime, Bounded: true}},
		{"pause@1s-2500ms", Fault{Name: "pause", Process: true, Start: time.Second, End: 2500 * time.Millisecond, Bounded: true}},
		{"restart@3s", Fault{Name: "restart", Process: true, Start: 3 * time.Second, Point: true}},
		{"failover@4s", Fault{Name: "failover", Process: true, Start: 4 * time.Second, Point: true}},
		{"failover:rejoin@4s", Fault{Name: "failover", Process: true, Start: 4 * time.Second, Point: true, Rejoin: true}},
	}
	for _, tt := range tests {
		got, err := ParseFault(tt.spec)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		tt.want.Spec = tt.spec
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.spec, got, tt.want)
		}
	}
	for _, tt := range []struct{ spec, want string }{
		{"kill", "needs a time or a window"},
		{"kill@5s-", "needs a time or a window with an end"},
		{"pause@5s", "pause needs a window"},
		{"restart@1s-2s", "restart happens at an instant"},
		{"kill:9@1s", "takes no parameter"},
		{"kill:rejoin@1s", "takes no parameter"},
		{"failover:later@1s", "takes no parameter"},
		{"restart@x", "want a duration"},
		{"partition@5s", "want START-END"},
	} {
		_, err := ParseFault(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.spec, err, tt.want)
		}
	}
	if _, err := Parse([]string{"kill@1s-3s", "pause@2s-4s"}); err == nil || !strings.Contains(err.Error(), "one process fault at a time") {
		t.Errorf("overlapping process faults: got %v", err)
	}
	s, err := Parse([]string{"restart@1s", "restart@2s", "commit-cut:0.1", "kill@3s-4s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Processes()); got != 3 {
		t.Errorf("Processes: %d faults, want 3", got)
	}
}

func TestParsePowerLoss(t *testing.T) {
	f, err := ParseFault("power-loss@3s")
	if err != nil || f.Name != "power-loss" || !f.Process || !f.Point || f.Start != 3*time.Second || f.Tear {
		t.Fatalf("power-loss@3s: %+v, %v", f, err)
	}
	if f, err := ParseFault("power-loss:tear@1500ms"); err != nil || !f.Tear || f.Start != 1500*time.Millisecond {
		t.Fatalf("power-loss:tear@1500ms: %+v, %v", f, err)
	}
	for spec, want := range map[string]string{
		"power-loss":        "at an instant",
		"power-loss@2s-4s":  "at an instant",
		"power-loss:rip@2s": "tear",
		"power-loss@x":      "duration",
	} {
		if _, err := ParseFault(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", spec, err, want)
		}
	}
	if _, err := Parse([]string{"kill@1s-3s", "power-loss@2s"}); err == nil {
		t.Error("a power loss inside a kill's window: no error")
	}
}
