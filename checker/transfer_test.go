package checker

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

func TestTransferGolden(t *testing.T) { checkGoldenDir(t, TransferModel) }

// TestTransferCountsFracturedReads: a read of the total that misses the initial total is
// a figure, not an anomaly, and the summary says so.
func TestTransferCountsFracturedReads(t *testing.T) {
	h, ops, err := histories.ReadFile(filepath.Join("testdata", TransferModel, "fractured-read-valid.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r := checkAll(t, h, ops)
	var n int
	if err := json.Unmarshal(r.Details["fractured_reads"], &n); err != nil || n != 1 || r.Verdict != Valid {
		t.Fatalf("verdict %s, fractured_reads %s: want valid with 1", r.Verdict, r.Details["fractured_reads"])
	}
	if !strings.Contains(r.Summary, "1 of 1 reads of the total fractured") {
		t.Errorf("summary %q", r.Summary)
	}
}

// TestTransferNamesTheHalf: a half-applied transfer is named with its op id, the account
// it applied on and what the client was told, and the events of its markers.
func TestTransferNamesTheHalf(t *testing.T) {
	h, ops, err := histories.ReadFile(filepath.Join("testdata", TransferModel, "half-applied-conserved.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r := checkAll(t, h, ops)
	if r.Verdict != Invalid || len(r.Anomalies) < 2 || r.Anomalies[0].Kind != "half-applied-transfer" {
		t.Fatalf("result %+v", r)
	}
	if e := r.Anomalies[0].Explanation; !strings.Contains(e, "transfer 0-0 (0->1 1, client told info) applied on account 0 only") {
		t.Errorf("explanation %q", e)
	}
	if len(r.Anomalies[0].Ops) < 4 {
		t.Errorf("events %v: want the transfer's and the markers' reads", r.Anomalies[0].Ops)
	}
}

// TestTransferRefuses lists histories that are not of the model.
func TestTransferRefuses(t *testing.T) {
	p := BankParams{Accounts: Balances{"a": 1, "b": 1}}
	read := func(f, v string) []histories.Op {
		return []histories.Op{{Index: 0, Process: 0, Type: histories.Invoke, F: f}, {Index: 1, Process: 0, Type: histories.OK, F: f, Value: []byte(v)}}
	}
	for name, ops := range map[string][]histories.Op{
		"unknown function":    read("write", `1`),
		"total not a number":  read("total", `"x"`),
		"applied not markers": read("applied", `[1]`),
		"prepared not a list": read("prepared", `{"a":1}`),
	} {
		if _, err := CheckTransfer(context.Background(), ops, p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
