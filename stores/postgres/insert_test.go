package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
)

// A unique violation on a client key is "already applied" only when the row there is
// the same operation's: another operation's row is a definite 23505.
func TestInsertAlreadyAppliedOnlyForOwnRow(t *testing.T) {
	c := open(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plan, err := c.PrepareInsert(ctx, insert.ClientMono)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.ClientSide {
		t.Fatalf("client-mono plan %+v is not client side", plan)
	}
	s, err := c.InsertSession(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if id, err := s.Insert(ctx, int64(7), workloads.Request{OpID: "1-1"}); err != nil || id != "7" {
		t.Fatalf("first insert: %q, %v", id, err)
	}
	_, err = s.Insert(ctx, int64(7), workloads.Request{OpID: "1-1"})
	if workloads.Classify(err) != workloads.ClassDefinite || workloads.ReasonOf(err) != workloads.ReasonAlreadyApplied {
		t.Errorf("retry of the same op: %v (%v, %v), want definite already-applied", err, workloads.Classify(err), workloads.ReasonOf(err))
	}
	_, err = s.Insert(ctx, int64(7), workloads.Request{OpID: "2-1"})
	if workloads.ReasonOf(err) != "23505" {
		t.Errorf("another op on the same key: %v (%v), want 23505", err, workloads.ReasonOf(err))
	}
	rows, err := c.InsertedRows(ctx)
	if err != nil || len(rows) != 1 || rows["1-1"] != 1 {
		t.Errorf("rows by op id %v, %v; want 1-1 once", rows, err)
	}
}
