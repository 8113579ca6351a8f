package checker

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
)

// lostHist builds a history from events in time order, numbering them.
type lostHist struct{ ops []histories.Op }

func (h *lostHist) add(tm int64, p int, typ histories.Type, f, id, v string) *lostHist {
	o := histories.Op{Index: int64(len(h.ops)), Time: tm, Process: p, Type: typ, F: f, Key: "k", OpID: id}
	if v != "" {
		o.Value = []byte(v)
	}
	h.ops = append(h.ops, o)
	return h
}

// fault adds a process fault's two nemesis events, as the runner records them.
func (h *lostHist) fault(spec, action, end string, from, to int64) *lostHist {
	ev := func(tm int64, f string) {
		h.ops = append(h.ops, histories.Op{Index: int64(len(h.ops)), Time: tm, Process: histories.Nemesis, Type: histories.Info, F: f,
			Value: histories.Value(map[string]any{"fault": spec, "server": "redis", "pid": 42})})
	}
	ev(from, action)
	ev(to, end)
	return h
}

const sec = int64(time.Second)

// The lost-write rule on hand-made histories: a read after the restart that returns
// neither the last acknowledged write nor anything that may follow it names that write;
// an unknown write of the value read, or a later write, explains the read.
func TestLostRegisterWrites(t *testing.T) {
	base := func() *lostHist {
		return new(lostHist).add(sec/10, 0, histories.Invoke, "write", "0-0", "3").add(sec/5, 0, histories.OK, "write", "0-0", "")
	}
	cases := []struct {
		name string
		h    *lostHist
		lost bool
	}{
		{"read absent after the kill", base().fault("kill@1s-2s", "kill", "start", sec, 2*sec).
			add(3*sec, 1, histories.Invoke, "read", "1-0", "").add(3*sec+1, 1, histories.OK, "read", "1-0", "null"), true},
		{"read the write", base().fault("kill@1s-2s", "kill", "start", sec, 2*sec).
			add(3*sec, 1, histories.Invoke, "read", "1-0", "").add(3*sec+1, 1, histories.OK, "read", "1-0", "3"), false},
		{"an unknown write of the value read", base().
			add(sec/2, 2, histories.Invoke, "write", "2-0", "4").add(sec-1, 2, histories.Info, "write", "2-0", "").
			fault("kill@1s-2s", "kill", "start", sec, 2*sec).
			add(3*sec, 1, histories.Invoke, "read", "1-0", "").add(3*sec+1, 1, histories.OK, "read", "1-0", "4"), false},
		{"a cas after the restart", base().fault("kill@1s-2s", "kill", "start", sec, 2*sec).
			add(5*sec/2, 2, histories.Invoke, "cas", "2-0", "[3,1]").add(5*sec/2+1, 2, histories.OK, "cas", "2-0", "").
			add(3*sec, 1, histories.Invoke, "read", "1-0", "").add(3*sec+1, 1, histories.OK, "read", "1-0", "1"), false},
		{"a read during the downtime does not count", base().
			add(3*sec/2, 1, histories.Invoke, "read", "1-0", "").fault("kill@1s-2s", "kill", "start", sec, 2*sec).
			add(3*sec, 1, histories.OK, "read", "1-0", "null"), false},
		{"a pause loses nothing", base().fault("pause@1s-2s", "pause", "resume", sec, 2*sec).
			add(3*sec, 1, histories.Invoke, "read", "1-0", "").add(3*sec+1, 1, histories.OK, "read", "1-0", "null"), false},
	}
	for _, tc := range cases {
		got := lostRegisterWrites(tc.h.ops)
		if (len(got) > 0) != tc.lost {
			t.Errorf("%s: lost %+v, want lost=%v", tc.name, got, tc.lost)
			continue
		}
		if tc.lost && (got[0].OpID != "0-0" || got[0].AckBeforeFaultS != 0.8 || got[0].Fault != "kill@1s-2s") {
			t.Errorf("%s: %+v", tc.name, got[0])
		}
		// The same through Check: the lost write makes the history invalid, with the
		// anomaly kind and the lost write in the Result.
		res, err := Check(context.Background(), &histories.Header{Model: CASRegisterModel}, tc.h.ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.lost && (res.Verdict != Invalid || len(res.LostWrites) != 1 || res.Anomalies[len(res.Anomalies)-1].Kind != LostWriteKind) {
			t.Errorf("%s: Check gave %v %+v", tc.name, res.Verdict, res.LostWrites)
		}
		if !tc.lost && len(res.LostWrites) != 0 {
			t.Errorf("%s: Check names lost writes %+v", tc.name, res.LostWrites)
		}
		// And when porcupine's page cannot be written whole (a directory that is gone, a full
		// disk, a history too long to draw): the warning comes with the same verdict and lost writes, as
		// indoubt check without --html gives them. A run draws the page; the lost
		// writes went missing from its verdict when the page was partial.
		viz, err := Check(context.Background(), &histories.Header{Model: CASRegisterModel}, tc.h.ops, Options{VisualizePath: filepath.Join(t.TempDir(), "gone", "linearizability.html")})
		if err == nil {
			t.Errorf("%s: a page that could not be written gave no warning", tc.name)
		}
		if viz.Verdict != res.Verdict || len(viz.LostWrites) != len(res.LostWrites) || len(viz.Anomalies) != len(res.Anomalies) {
			t.Errorf("%s: with the page failing, Check gave %v with %d lost writes and %d anomalies; without it %v, %d, %d",
				tc.name, viz.Verdict, len(viz.LostWrites), len(viz.Anomalies), res.Verdict, len(res.LostWrites), len(res.Anomalies))
		}
	}
}

// ProcessFaults pairs each fault's events into its window and skips the other nemesis
// events (windows of the proxy's faults, the proxy's events, a rejoin).
func TestProcessFaults(t *testing.T) {
	h := new(lostHist).fault("kill@1s-2s", "kill", "start", sec, 2*sec)
	h.ops = append(h.ops,
		histories.Op{Index: 2, Time: 2 * sec, Process: histories.Nemesis, Type: histories.Info, F: "start", Value: []byte(`{"fault":"commit-cut:0.1"}`)},
		histories.Op{Index: 3, Time: 2 * sec, Process: histories.Nemesis, Type: histories.Info, F: "commit-cut", Value: []byte(`{"truth":"applied"}`)},
	)
	h.fault("failover:rejoin@3s", "failover", "promoted", 3*sec, 4*sec)
	h.ops = append(h.ops, histories.Op{Index: 6, Time: 5 * sec, Process: histories.Nemesis, Type: histories.Info, F: "rejoin", Value: []byte(`{"fault":"failover:rejoin@3s","server":"pg","pid":1}`)})
	h.fault("pause@6s-7s", "pause", "resume", 6*sec, 7*sec)
	got := outages.ProcessFaults(h.ops)
	want := []outages.ProcessFault{
		{Fault: "kill@1s-2s", Action: "kill", Server: "redis", Pid: 42, Start: sec, End: 2 * sec},
		{Fault: "failover:rejoin@3s", Action: "failover", Server: "redis", Pid: 42, Start: 3 * sec, End: 4 * sec},
		{Fault: "pause@6s-7s", Action: "pause", Server: "redis", Pid: 42, Start: 6 * sec, End: 7 * sec},
	}
	if len(got) != len(want) {
		t.Fatalf("faults %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fault %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !got[0].LosesData() || !got[1].LosesData() || got[2].LosesData() {
		t.Errorf("loses data: %v %v %v", got[0].LosesData(), got[1].LosesData(), got[2].LosesData())
	}
}

// A budget whose final balance is higher than the acknowledged decrements allow after a
// kill: the count is lost, named with the kill and the last acknowledgement before it;
// an account that is gone names every acknowledged decrement. Both are found by Check
// and by CheckStream alike.
func TestLostBudget(t *testing.T) {
	build := func(final string, finalType histories.Type) *lostHist {
		h := new(lostHist)
		for i := range 4 {
			id := "0-" + string(rune('0'+i))
			h.add(int64(i)*sec/10, 0, histories.Invoke, "decrement", id, "").add(int64(i)*sec/10+1, 0, histories.OK, "decrement", id, `{"applied":true,"balance":-1}`)
		}
		h.fault("kill@1s-2s", "kill", "start", sec, 2*sec)
		return h.add(3*sec, 9, histories.Invoke, "read", "final-0", "").add(3*sec+1, 9, finalType, "read", "final-0", final)
	}
	hdr := &histories.Header{Model: "budget", Params: map[string]json.RawMessage{"budget": []byte("10")}}
	for _, tc := range []struct {
		name        string
		h           *lostHist
		count       int64
		explanation string
	}{
		{"balance too high", build(`{"balance":8}`, histories.OK), 2, "2 acknowledged decrements missing from the final state after kill@1s-2s (kill of pid 42 at 1.00s); the last decrement acknowledged before it, 0-3, was acknowledged 0.700s before the fault; the last 2 acknowledged span the 0.800s before it"},
		{"account gone", build(`{"missing":true}`, histories.Fail), 4, "the account is gone after kill@1s-2s (kill of pid 42 at 1.00s): the final read found no balance at all, so the budget of 10 the run set up and all 4 decrements acknowledged as applied are lost, from 0-0, 0-1, 0-2, 0-3 (acknowledged 0.700s before the fault)"},
	} {
		for _, stream := range []bool{false, true} {
			var res Result
			var err error
			if stream {
				i := 0
				res, err = CheckStream(context.Background(), hdr, func() (histories.Op, error) {
					if i == len(tc.h.ops) {
						return histories.Op{}, io.EOF
					}
					i++
					return tc.h.ops[i-1], nil
				}, Options{})
			} else {
				res, err = Check(context.Background(), hdr, tc.h.ops, Options{})
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != Invalid || len(res.LostWrites) != 1 {
				t.Fatalf("%s (stream %v): %v %s %+v", tc.name, stream, res.Verdict, res.Summary, res.LostWrites)
			}
			l := res.LostWrites[0]
			if l.Count != tc.count || l.OpID != "0-3" || l.Fault != "kill@1s-2s" || l.Explanation != tc.explanation {
				t.Errorf("%s (stream %v): %+v", tc.name, stream, l)
			}
			if !strings.HasPrefix(res.Summary, "acknowledged writes were lost after a process fault: ") && tc.name == "account gone" {
				t.Errorf("%s: summary %q", tc.name, res.Summary)
			}
		}
	}
}

// A counter that lost increments in a restart: the count names the restart.
func TestLostCounter(t *testing.T) {
	h := new(lostHist)
	for i := range 5 {
		id := "0-" + string(rune('0'+i))
		h.add(int64(i)*sec/10, 0, histories.Invoke, "increment", id, "").add(int64(i)*sec/10+1, 0, histories.OK, "increment", id, `{"wrote":`+string(rune('1'+i))+`}`)
	}
	h.fault("restart@1s", "restart", "started", sec, 2*sec)
	h.add(3*sec, 9, histories.Invoke, "read", "final-0", "").add(3*sec+1, 9, histories.OK, "read", "final-0", `{"value":3}`)
	hdr := &histories.Header{Model: "counter", Params: map[string]json.RawMessage{"before": []byte("0")}}
	res, err := Check(context.Background(), hdr, h.ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid || len(res.LostWrites) != 1 || res.LostWrites[0].Count != 2 || res.LostWrites[0].Fault != "restart@1s" {
		t.Fatalf("%v %s %+v", res.Verdict, res.Summary, res.LostWrites)
	}
}

// An exactly-once apply acknowledged before a power loss and absent after it is named
// with the fault; one acknowledged after it is the checker's plain "lost".
func TestLostEffects(t *testing.T) {
	h := new(lostHist).
		add(sec/10, 0, histories.Invoke, "apply", "p-1", "").add(sec/5, 0, histories.OK, "apply", "p-1", "").
		fault("power-loss@1s", "power-loss", "start", sec, 2*sec).
		add(3*sec, 0, histories.Invoke, "apply", "p-2", "").add(3*sec+1, 0, histories.OK, "apply", "p-2", "").
		add(4*sec, 9, histories.Invoke, "read", "final", "").add(4*sec+1, 9, histories.OK, "read", "final", `{}`)
	res, err := Check(context.Background(), &histories.Header{Model: ExactlyOnceModel}, h.ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid || len(res.LostWrites) != 1 || res.LostWrites[0].OpID != "p-1" || res.LostWrites[0].Fault != "power-loss@1s" {
		t.Fatalf("%v %s %+v", res.Verdict, res.Summary, res.LostWrites)
	}
}

// Values are compared as values: numbers by their exact value.
func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"3", "3.0", true}, {"3", "3", true}, {"3", "4", false}, {"null", "null", true}, {"null", "0", false},
		{"9007199254740993", "9007199254740992", false}, {`[1,2]`, `[1.0, 2]`, true}, {`{"a":1}`, `{"a":1.0}`, true},
		{`"3"`, "3", false}, {"", "3", false},
	} {
		if got := sameValue([]byte(tc.a), []byte(tc.b)); got != tc.same {
			t.Errorf("sameValue(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// Nothing checked is not valid: a history whose only completed operation is the final
// read, or that holds nemesis events alone, is unknown, saying so; what a final state
// proves wrong without any operation stands.
func TestNothingCheckedIsUnknown(t *testing.T) {
	budget := &histories.Header{Model: "budget", Params: map[string]json.RawMessage{"budget": []byte("10")}}
	onlyFinal := new(lostHist).add(0, 0, histories.Invoke, "decrement", "0-0", "").
		add(1500*time.Millisecond.Nanoseconds(), 9, histories.Invoke, "read", "final-0", "").add(1500*time.Millisecond.Nanoseconds()+1, 9, histories.OK, "read", "final-0", `{"balance":10}`)
	res, err := Check(context.Background(), budget, onlyFinal.ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Unknown || res.Summary != "nothing was checked: 0 operations completed in 1.5s" {
		t.Errorf("only a final read: %v %q", res.Verdict, res.Summary)
	}
	nemesis := new(lostHist).fault("kill@1s-2s", "kill", "start", sec, 2*sec)
	res, err = Check(context.Background(), &histories.Header{Model: CASRegisterModel}, nemesis.ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Unknown || res.Verdict.ExitCode() != 2 {
		t.Errorf("nemesis events alone: %v %q", res.Verdict, res.Summary)
	}
	phantom := new(lostHist).add(0, 9, histories.Invoke, "read", "final", "").add(1, 9, histories.OK, "read", "final", `{"p-9":1}`)
	res, err = Check(context.Background(), &histories.Header{Model: ExactlyOnceModel}, phantom.ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid {
		t.Errorf("a phantom in the final state: %v %q", res.Verdict, res.Summary)
	}
}
