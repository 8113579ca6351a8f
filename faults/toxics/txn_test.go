package toxics

import (
	"bytes"
	"testing"
)

// TestEventsNameTheTransaction: an operation made of three transactions on one
// connection (read a table of request ids in a block, insert in autocommit, record the
// request in a block), with the cut armed for one of them at a time: the event numbers
// the transaction that was cut among the connection's, says whether it wrote, and gives
// its statements and their digest.
func TestEventsNameTheTransaction(t *testing.T) {
	check := []step{
		{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
		{pgQuery("select 1 from requests where id = 'r1'"), bytes.Join([][]byte{pgDataRow(nil), pgComplete("SELECT 0"), pgReady('T')}, nil)},
		{pgQuery("commit"), append(pgComplete("COMMIT"), pgReady('I')...)},
	}
	insert := []step{
		{pgQuery("insert into orders values ('o1')"), append(pgComplete("INSERT 0 1"), pgReady('I')...)},
	}
	record := []step{
		{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
		{pgQuery("insert into requests values ('r1')"), append(pgComplete("INSERT 0 1"), pgReady('T')...)},
		{pgQuery("commit"), append(pgComplete("COMMIT"), pgReady('I')...)},
	}
	ops := [][]step{check, insert, record}
	for _, tt := range []struct {
		cut   int // the transaction cut, from 1
		wrote bool
		text  string
	}{
		{1, false, "select 1 from requests where id = 'r1'; commit"},
		{2, true, "insert into orders values ('o1')"},
		{3, true, "insert into requests values ('r1'); commit"},
	} {
		c, evs := newCommits(t, 1, nil)
		h := newHarness(t, c, uint64(tt.cut), 7)
		startupExchange(h)
		// A read in autocommit before the operation is a transaction too.
		step{pgQuery("select 1"), bytes.Join([][]byte{pgDataRow([]byte("1")), pgComplete("SELECT 1"), pgReady('I')}, nil)}.run(h)
		for i, op := range ops[:tt.cut] {
			if i == tt.cut-1 {
				c.Faults.Cut.Set(1, 0)
			}
			for _, s := range op {
				s.run(h)
			}
		}
		if len(*evs) != 1 {
			t.Fatalf("cut of transaction %d: events %+v, want one", tt.cut, *evs)
		}
		e := (*evs)[0]
		if e.Txn == nil || e.Txn.Seq != uint64(tt.cut)+1 || e.Txn.Wrote != tt.wrote || e.Txn.Text != tt.text || len(e.Txn.Digest) != 16 {
			t.Errorf("cut of transaction %d: txn %+v, want seq %d wrote %v text %q", tt.cut, e.Txn, tt.cut+1, tt.wrote, tt.text)
		}
	}
}

// TestTxnWroteByKind: what counts as writing, protocol by protocol.
func TestTxnWroteByKind(t *testing.T) {
	for _, tt := range []struct {
		sql   string
		wrote bool
	}{
		{"select * from t", false},
		{"select count(*) from t where x in (select y from u)", false},
		{"select * into copy_of_t from t", true},
		{"select nextval('s')", true},
		{"with x as (delete from t returning *) select * from x", true},
		{"update t set x = 1", true},
		{"create table u (x int)", true},
		{"call p()", true},
		{"show search_path", false},
	} {
		if got := writes(tt.sql, classify(tt.sql)); got != tt.wrote {
			t.Errorf("%q: writes %v, want %v", tt.sql, got, tt.wrote)
		}
	}
	// Redis: a MULTI of reads only wrote nothing; a command not known to read may write.
	for _, tt := range []struct {
		steps []step
		wrote bool
	}{
		{[]step{respHandshake(), {bytes.Join([][]byte{respCmd("multi"), respCmd("get", "a"), respCmd("exec")}, nil),
			bytes.Join([][]byte{rOK(), rLine('+', "QUEUED"), rAgg('*', 1, rBulk("1"))}, nil)}}, false},
		{[]step{respHandshake(), {bytes.Join([][]byte{respCmd("multi"), respCmd("get", "a"), respCmd("incr", "a"), respCmd("exec")}, nil),
			bytes.Join([][]byte{rOK(), rLine('+', "QUEUED"), rLine('+', "QUEUED"), rAgg('*', 2, rBulk("1"), rInt(2))}, nil)}}, true},
		{[]step{respHandshake(), {respCmd("json.set", "k", "$", "1"), rOK()}}, true},
	} {
		c, evs := newProtoCommits(t, Resp{}, 1, func(string) bool { return true })
		c.Faults.Cut.Set(1, 0)
		h := newHarness(t, c, 1, 5)
		for _, s := range tt.steps {
			s.run(h)
		}
		if len(*evs) != 1 || (*evs)[0].Txn == nil || (*evs)[0].Txn.Wrote != tt.wrote || (*evs)[0].Txn.Seq != 1 {
			t.Errorf("%q: events %+v, want one cut of transaction 1 with wrote %v", tt.steps[1].req, *evs, tt.wrote)
		}
	}
}
