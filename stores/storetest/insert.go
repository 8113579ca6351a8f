package storetest

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
)

// Insert runs the insert conformance suite for each key shape: a fresh table per shape,
// concurrent autocommit inserts each counted once under its op id with distinct keys, the
// server's figures, and, where the client chooses the key, a retry that meets its own
// row told from one that meets another's. open returns the store on the real server.
func Insert(t *testing.T, open func(t *testing.T) insert.Store, keys []insert.Key) {
	for _, key := range keys {
		t.Run(string(key), func(t *testing.T) {
			ctx := testContext(t)
			s := open(t)
			plan, err := s.PrepareInsert(ctx, key)
			if err != nil {
				t.Fatalf("PrepareInsert: %v", err)
			}
			if plan.Key != key || plan.Server == "" || plan.Generated == "" {
				t.Errorf("plan %+v: want key %s, the server and how the key is generated", plan, key)
			}
			if key.ClientSide() && !plan.ClientSide {
				t.Errorf("plan %+v: a client-side shape, not chosen by the client", plan)
			}
			// The key a client-side shape would choose: an integer, or a uuid's text.
			next := 0
			choose := func() any {
				if !plan.ClientSide {
					return nil
				}
				next++
				if key.UUID() {
					b := make([]byte, 16)
					_, _ = rand.Read(b)
					b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
					return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
				}
				return int64(next)
			}
			const workers, each = 4, 10
			chosen := make([][]any, workers)
			for w := range chosen {
				for range each {
					chosen[w] = append(chosen[w], choose())
				}
			}
			sessions := make([]insert.Session, workers)
			for w := range sessions {
				sessions[w], err = s.InsertSession(ctx, plan)
				if err != nil {
					t.Fatalf("InsertSession: %v", err)
				}
				closeOnCleanup(t, sessions[w])
			}
			ids := make([][]string, workers)
			errs := race(workers, func(w int) error {
				for i := range each {
					id, err := sessions[w].Insert(ctx, chosen[w][i], workloads.Request{OpID: fmt.Sprintf("w%d-%d", w, i)})
					if err != nil {
						return err
					}
					ids[w] = append(ids[w], id)
				}
				return nil
			})
			for w, err := range errs {
				if err != nil {
					t.Fatalf("worker %d: %v", w, err)
				}
			}
			seen := map[string]bool{}
			for w := range ids {
				checkLoopbackConn(t, sessions[w].Conn())
				for i, id := range ids[w] {
					if id == "" || seen[id] {
						t.Errorf("insert w%d-%d returned key %q: empty or returned before", w, i, id)
					}
					seen[id] = true
					if c := chosen[w][i]; c != nil && id != fmt.Sprint(c) {
						t.Errorf("insert w%d-%d returned key %q, the client chose %v", w, i, id, c)
					}
				}
			}
			rows, err := s.InsertedRows(ctx)
			if err != nil {
				t.Fatalf("InsertedRows: %v", err)
			}
			if len(rows) != workers*each {
				t.Errorf("InsertedRows: %d op ids, want %d", len(rows), workers*each)
			}
			for id, n := range rows {
				if n != 1 {
					t.Errorf("op %s: %d rows, want 1", id, n)
				}
			}
			m, err := s.MeasureInsert(ctx, plan)
			if err != nil {
				t.Fatalf("MeasureInsert: %v", err)
			}
			if m.Rows != workers*each {
				t.Errorf("MeasureInsert: %d rows, want %d", m.Rows, workers*each)
			}
			if (m.Gaps != nil) != key.Sequence() {
				t.Errorf("gaps %v: want a figure exactly for sequence keys", m.Gaps)
			}
			if !plan.ClientSide {
				return
			}
			// A retry on the client's key: its own row is told apart from another's.
			k := choose()
			if _, err := sessions[0].Insert(ctx, k, workloads.Request{OpID: "mine"}); err != nil {
				t.Fatalf("insert: %v", err)
			}
			_, err = sessions[1].Insert(ctx, k, workloads.Request{OpID: "mine"})
			CheckClass(t, err, workloads.ClassDefinite, workloads.ReasonAlreadyApplied)
			_, err = sessions[1].Insert(ctx, k, workloads.Request{OpID: "theirs"})
			if workloads.Classify(err) != workloads.ClassDefinite || workloads.ReasonOf(err) == workloads.ReasonAlreadyApplied {
				t.Errorf("a key another op holds: %v (%s), want a definite failure that is not already-applied", err, workloads.ReasonOf(err))
			}
		})
	}
}
