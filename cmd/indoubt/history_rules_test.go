package main

import (
	"strings"
	"testing"
)

// TestCheckRefusesBrokenHistoryRulesAtTheirLine: what no history can hold, by Jepsen's
// rules of a process and of a transaction's completion, is refused with exit 3 and the
// line (or the index) of the event, where it used to be read and end "unknown" far
// from the cause.
func TestCheckRefusesBrokenHistoryRulesAtTheirLine(t *testing.T) {
	const la = `{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append"}}` + "\n"
	const reg = `{"header":{"format":"indoubt-history/1","workload":"register","model":"register"}}` + "\n"
	for _, tc := range []struct{ name, history, want string }{
		{"ok differs from its invoke", la +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["append","x",1]]}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"txn","value":[["append","x",2]]}` + "\n",
			"history index 1: ok completion's micro-op 1, append of key \"x\", has another value than its invocation's"},
		{"ok of another key", la +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["r","x",null]]}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"txn","value":[["r","y",[1]]]}` + "\n",
			"micro-op 1 is r of key \"y\", its invocation's r of key \"x\""},
		{"ok with a micro-op more", la +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["r","x",null]]}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"txn","value":[["r","x",[]],["append","x",1]]}` + "\n",
			"ok completion has 2 micro-ops, its invocation 1"},
		{"two open operations", la +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["append","x",1]]}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"invoke","f":"txn","value":[["append","x",2]]}` + "\n",
			"line 3: process 0 invokes while its operation invoked on line 2 is open"},
		{"completion without invoke", reg +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"write","value":1}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"write","value":1}` + "\n" +
			`{"index":2,"time":3,"process":1,"type":"ok","f":"read","value":1}` + "\n",
			"line 4: ok completion of process 1 without an open invocation"},
		{"invoke after info", la +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["append","x",1]]}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"info","f":"txn"}` + "\n" +
			`{"index":2,"time":3,"process":0,"type":"invoke","f":"txn","value":[["append","x",2]]}` + "\n",
			"line 4: process 0 invokes after its operation ended in info on line 3"},
		{"invoke after completions alone", la +
			`{"index":0,"time":1,"process":0,"type":"ok","f":"txn","value":[["append","x",1]]}` + "\n" +
			`{"index":1,"time":2,"process":1,"type":"invoke","f":"txn","value":[["append","x",2]]}` + "\n",
			"line 3: invocation of process 1 in a history whose completion on line 2 had none"},
		{"byte-order mark", "\xef\xbb\xbf" + reg +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"write","value":1}` + "\n",
			"line 1: starts with a byte-order mark (U+FEFF)"},
		{"invalid UTF-8", reg +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"write","value":1,"op_id":"a` + "\xff" + `"}` + "\n",
			"line 2: malformed event: not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, tc.want, "check", writeFile(t, "h.jsonl", tc.history))
		})
	}
}

// TestCheckEDNRefusesWhatEDNForbids: an EDN map with a key twice (the last one used to
// win: an ok became a fail), a set where an ordered value is read (#{2 1} read as the
// list [2 1]), and a string that is not UTF-8 are refused at their line.
func TestCheckEDNRefusesWhatEDNForbids(t *testing.T) {
	for _, tc := range []struct{ name, history, want string }{
		{"duplicate key", `{:process 0, :type :invoke, :f :txn, :value [[:append :x 1]]}` + "\n" +
			`{:process 0, :type :ok, :f :txn, :value [[:append :x 1]], :type :fail}` + "\n", "line 2: map has the key \":type\" twice"},
		{"set as a read", `{:process 0, :type :invoke, :f :txn, :value [[:r :x nil]]}` + "\n" +
			`{:process 0, :type :ok, :f :txn, :value [[:r :x #{2 1}]]}` + "\n", "line 2: value holds the set \"#{2 1}\""},
		{"duplicate in a set", `{:process :nemesis, :type :info, :f :start, :value #{:n1 :n1}}` + "\n", "line 1: set has the element \":n1\" twice"},
		{"invalid UTF-8", `{:process 0, :type :invoke, :f :txn, :value [[:append "` + "\xc3" + `" 1]]}` + "\n", "line 1: string is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, tc.want, "check", "--format", "jepsen-edn", "--model", "list-append", writeFile(t, "h.edn", tc.history))
		})
	}
}

// TestCheckReadsWhatJepsenAndElleWrite: a read written with JSON's spaces ([1, 2], as
// Python's json.dumps writes it) is read; Elle's own test histories, which leave :f out
// (or write :f nil) and hold completions alone, are read as Elle reads them; an ok may
// fill in its reads.
func TestCheckReadsWhatJepsenAndElleWrite(t *testing.T) {
	const la = `{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append","params":{"consistency_models":["serializable"]}}}` + "\n"
	spaced := la +
		`{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "txn", "value": [["append", "x", 1], ["append", "y", 1]]}` + "\n" +
		`{"index": 1, "time": 2, "process": 0, "type": "ok", "f": "txn", "value": [["append", "x", 1], ["append", "y", 1]]}` + "\n" +
		`{"index": 2, "time": 3, "process": 1, "type": "invoke", "f": "txn", "value": [["append", "x", 2], ["append", "y", 2]]}` + "\n" +
		`{"index": 3, "time": 4, "process": 1, "type": "ok", "f": "txn", "value": [["append", "x", 2], ["append", "y", 2]]}` + "\n" +
		`{"index": 4, "time": 5, "process": 2, "type": "invoke", "f": "txn", "value": [["r", "x", null], ["r", "y", null]]}` + "\n" +
		`{"index": 5, "time": 6, "process": 2, "type": "ok", "f": "txn", "value": [["r", "x", [1, 2]], ["r", "y", [2, 1]]]}` + "\n"
	code, out, errs := invoke(t, "check", writeFile(t, "h.jsonl", spaced))
	if code != 1 || !strings.Contains(out, "G0") {
		t.Errorf("spaced JSON: exit %d, stdout %q, stderr %q; want the G0 of Elle's example, exit 1", code, out, errs)
	}
	// Elle's list_append_test "G0", as its op helper writes it: no :f, process 0,
	// completions alone.
	elle := "{:process 0, :type :ok, :value [[:append :x 1] [:append :y 1]]}\n" +
		"{:process 0, :type :ok, :f nil, :value [[:append :x 2] [:append :y 2]]}\n" +
		"{:process 0, :type :ok, :value [[:r :x [1 2]] [:r :y [2 1]]]}\n"
	code, out, errs = invoke(t, "check", "--format", "jepsen-edn", "--model", "list-append", "--consistency-models", "serializable", writeFile(t, "g0.edn", elle))
	if code != 1 || !strings.Contains(out, "G0") {
		t.Errorf("Elle's G0: exit %d, stdout %q, stderr %q; want G0, exit 1", code, out, errs)
	}
	// For a model whose ops are not all one function, :f stays required.
	wantRefused(t, "op has no :f", "check", "--format", "jepsen-edn", "--model", "register", writeFile(t, "r.edn", "{:process 0, :type :invoke, :value 1}\n"))
}

// TestCheckReadsElleSeveralOpen: two of Elle's own unit tests (list_append_test
// "unobserved write", rw_register_test "initial state") invoke several transactions
// on process 0 before completing them. Elle's checkers read them with completions
// paired in order, and so does check for the transactional models, with Elle's
// verdicts; a register history with the same shape is still refused at its line, as
// jepsen.history's pair index refuses it (::double-invoke).
func TestCheckReadsElleSeveralOpen(t *testing.T) {
	unobserved := "{:index 0 :type :invoke :process 0 :value [[:append :x 1] [:append :y 1]]}\n" +
		"{:index 1 :type :invoke :process 0 :value [[:append :x 2] [:append :y 2]]}\n" +
		"{:index 2 :type :invoke :process 0 :value [[:append :x 3] [:append :y 3]]}\n" +
		"{:index 3 :type :invoke :process 0 :value [[:r :x nil]]}\n" +
		"{:index 4 :type :invoke :process 0 :value [[:r :y nil]]}\n" +
		"{:index 5 :type :ok :process 0 :value [[:append :x 1] [:append :y 1]]}\n" +
		"{:index 6 :type :ok :process 0 :value [[:append :x 2] [:append :y 2]]}\n" +
		"{:index 7 :type :ok :process 0 :value [[:append :x 3] [:append :y 3]]}\n" +
		"{:index 8 :type :ok :process 0 :value [[:r :x [1 2]]]}\n" +
		"{:index 9 :type :ok :process 0 :value [[:r :y [2]]]}\n"
	code, out, errs := invoke(t, "check", "--format", "jepsen-edn", "--model", "list-append", "--consistency-models", "serializable", writeFile(t, "u.edn", unobserved))
	if code != 1 || !strings.Contains(out, "G0") || !strings.Contains(out, "G-single-item") {
		t.Errorf("Elle's unobserved write: exit %d, stdout %q, stderr %q; want G0 and G-single-item, exit 1", code, out, errs)
	}
	initial := "{:index 0 :type :invoke :process 0 :value [[:r :x nil] [:r :y nil]]}\n" +
		"{:index 1 :type :invoke :process 0 :value [[:w :y 1] [:w :x 2]]}\n" +
		"{:index 2 :type :ok :process 0 :value [[:w :y 1] [:w :x 2]]}\n" +
		"{:index 3 :type :ok :process 0 :value [[:r :x nil] [:r :y 1]]}\n"
	code, out, errs = invoke(t, "check", "--format", "jepsen-edn", "--model", "rw-register", "--consistency-models", "serializable", writeFile(t, "i.edn", initial))
	if code != 1 || !strings.Contains(out, "G-single-item") {
		t.Errorf("Elle's initial state: exit %d, stdout %q, stderr %q; want G-single-item, exit 1", code, out, errs)
	}
	// A completion earlier than the invocation it closes is refused all the same.
	early := "{:index 0 :time 5 :type :invoke :process 0 :value [[:append :x 1]]}\n" +
		"{:index 1 :time 6 :type :invoke :process 0 :value [[:append :x 2]]}\n" +
		"{:index 2 :time 4 :type :ok :process 0 :value [[:append :x 1]]}\n"
	wantRefused(t, "line 3: completion of process 0 at time 4 is earlier than its invocation at time 5 on line 1", "check", "--format", "jepsen-edn", "--model", "list-append", writeFile(t, "e.edn", early))
	reg := "{:index 0 :type :invoke :f :write :process 0 :value 1}\n{:index 1 :type :invoke :f :write :process 0 :value 2}\n"
	wantRefused(t, "line 2: process 0 invokes while its operation invoked on line 1 is open", "check", "--format", "jepsen-edn", "--model", "register", writeFile(t, "r.edn", reg))
}
