package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestBankLogGolden checks every history under testdata/bank-log against the verdict
// beside it, through Check and the header's params.log.
func TestBankLogGolden(t *testing.T) {
	goldenWalk(t, "bank-log", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r, err := Check(context.Background(), h, ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r, anomalyKinds(r)
	})
}

// TestBankLogSeesWhatBalancesHide: the same history without the log is valid (an
// unknown transfer of the same shape explains the balances); with it, the duplicate
// is named.
func TestBankLogSeesWhatBalancesHide(t *testing.T) {
	h, ops, err := histories.ReadFile("testdata/bank-log/applied-twice.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	with, err := Check(context.Background(), h, ops, Options{})
	if err != nil || with.Verdict != Invalid || anomalyKinds(with) != "duplicate" {
		t.Fatalf("with the log: %v %s %v", with.Verdict, anomalyKinds(with), err)
	}
	p, err := bankFromHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	p.Log = false
	var plain []histories.Op
	for _, op := range ops {
		if op.F == "read" && op.Type == histories.OK {
			op.Value = []byte(`{"a":80,"b":20}`)
		}
		plain = append(plain, op)
	}
	without, err := CheckBank(context.Background(), plain, p)
	if err != nil || without.Verdict != Valid {
		t.Fatalf("without the log: %v %s %v", without.Verdict, without.Summary, err)
	}
}

func TestBankLogMalformed(t *testing.T) {
	p := BankParams{Accounts: Balances{"a": 1, "b": 0}, Log: true}
	tr := []byte(`{"from":"a","to":"b","amount":1}`)
	for name, ops := range map[string][]histories.Op{
		"a read without the log": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "read"},
			{Index: 1, Process: 0, Type: histories.OK, F: "read", Value: []byte(`{"a":1,"b":0}`)}},
		"a transfer without op id": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "transfer", Value: tr},
			{Index: 1, Process: 0, Type: histories.OK, F: "transfer"}},
		"no final read": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "transfer", OpID: "t", Value: tr},
			{Index: 1, Process: 0, Type: histories.OK, F: "transfer", OpID: "t"}},
	} {
		if _, err := CheckBank(context.Background(), ops, p); err == nil {
			t.Errorf("%s: no error", name)
		} else if strings.Contains(err.Error(), "panic") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
