package checker

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestCheckStreamEqualsCheck: every golden history checks the same read as a stream as
// read whole, verdict, anomalies and figures alike, and so do the simulated ones.
func TestCheckStreamEqualsCheck(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*/*.jsonl")
	if len(paths) < 20 {
		t.Fatalf("only %d golden histories found", len(paths))
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			h, ops, err := histories.ReadFile(path, false)
			if err != nil {
				t.Skip(err)
			}
			want, werr := Check(context.Background(), h, ops, Options{})
			got, gerr := CheckStream(context.Background(), h, sliceNext(ops), Options{})
			// The time a search took differs from run to run.
			delete(got.Details, "check_ms")
			delete(want.Details, "check_ms")
			if errString(werr) != errString(gerr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("stream: %v %+v\nwhole: %v %+v", gerr, got, werr, want)
			}
		})
	}
	// A final state goes through Check, which adds it as a read.
	ops, budget := budgetBenchHistory(1000, true)
	final := Options{Model: "budget", Budget: &budget, Final: []byte(`{"balance":0}`)}
	want, werr := Check(context.Background(), nil, ops, final)
	got, gerr := CheckStream(context.Background(), nil, sliceNext(ops), final)
	if errString(werr) != errString(gerr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("final: stream %v %+v, whole %v %+v", gerr, got, werr, want)
	}
	for _, n := range []int{10, 1000, 20000} {
		ops, budget := budgetBenchHistory(n, true)
		want, werr := CheckBudget(context.Background(), ops, budget)
		got, gerr := CheckStream(context.Background(), nil, sliceNext(ops), Options{Model: "budget", Budget: &budget})
		if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("budget %d: stream %v %+v, whole %v %+v", n, gerr, got, werr, want)
		}
	}
}

// TestCheckStreamReadError: an error reading the history ends the check with that error.
func TestCheckStreamReadError(t *testing.T) {
	bad := errors.New("line 3: malformed")
	for _, model := range []string{"budget", "counter", RegisterModel} {
		n := 0
		next := func() (histories.Op, error) {
			n++
			if n == 2 {
				return histories.Op{}, bad
			}
			return histories.Op{Index: int64(n), Process: 0, Type: histories.Invoke, F: "read"}, nil
		}
		zero := int64(0)
		if _, err := CheckStream(context.Background(), nil, next, Options{Model: model, Budget: &zero, Initial: &zero}); !errors.Is(err, bad) {
			t.Errorf("%s: got %v, want the read error", model, err)
		}
	}
}

func sliceNext(ops []histories.Op) func() (histories.Op, error) {
	return func() (histories.Op, error) {
		if len(ops) == 0 {
			return histories.Op{}, io.EOF
		}
		op := ops[0]
		ops = ops[1:]
		return op, nil
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestTxnStreamEqualsCheck: a transactional history checks the same streamed, its values
// decoded a batch ahead on goroutines of their own, as read whole and decoded in line:
// histories cut short with transactions open, planted anomalies, a value that is no
// transaction and a micro-op the model refuses, far into the history.
func TestTxnStreamEqualsCheck(t *testing.T) {
	for _, model := range []string{ListAppendModel, RWRegisterModel} {
		full := genTxnHistory(model, 5000, 16, 8, 0.01, 7)
		bad := slices.Clone(full)
		bad[7001].Value = []byte(`[["r",1,[1,2]],["x",1,2]]`)
		wrong := slices.Clone(full)
		wrong[8001].Value = []byte(`[["append",1,99999],["w",1,99998]]`)
		for name, ops := range map[string][]histories.Op{"whole": full, "cut": full[:6001], "cut early": full[:1500],
			"bad value": bad, "wrong micro-op": wrong} {
			opt := Options{Model: model}
			want, werr := Check(context.Background(), nil, ops, opt)
			got, gerr := CheckStream(context.Background(), nil, sliceNext(ops), opt)
			delete(got.Details, "check_ms")
			delete(want.Details, "check_ms")
			if strings.HasPrefix(name, "bad") || strings.HasPrefix(name, "wrong") {
				if werr == nil {
					t.Fatalf("%s %s: no error", model, name)
				}
			}
			if errString(werr) != errString(gerr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s:\nstream: %v %+v\nwhole: %v %+v", model, name, gerr, got, werr, want)
			}
		}
	}
}
