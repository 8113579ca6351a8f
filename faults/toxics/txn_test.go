package toxics

import (
	"bytes"
	"fmt"
	"slices"
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

// TestTxnChangedFromTags: the replies to a transaction's statements say what its cut
// commit changed. A transfer whose statements answered counts above zero changed rows;
// a replay whose only write answered "INSERT 0 0" changed nothing, and wrote is false;
// a write whose reply has no count, or a ROLLBACK TO SAVEPOINT, leaves it unknown.
func TestTxnChangedFromTags(t *testing.T) {
	yes, no := true, false
	begin := step{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)}
	stmt := func(sql, tag string) step { return step{pgQuery(sql), append(pgComplete(tag), pgReady('T')...)} }
	commit := step{pgQuery("commit"), append(pgComplete("COMMIT"), pgReady('I')...)}
	for _, tt := range []struct {
		name    string
		steps   []step
		tags    []string
		changed *bool
		wrote   bool
	}{
		{"a transfer changed rows", []step{begin,
			stmt("update accounts set balance = balance - 5 where id = 1", "UPDATE 1"),
			stmt("update accounts set balance = balance + 5 where id = 2", "UPDATE 1"),
			stmt("insert into transfers values ('t1')", "INSERT 0 1"), commit},
			[]string{"UPDATE 1", "UPDATE 1", "INSERT 0 1"}, &yes, true},
		{"a replay changed nothing", []step{begin,
			stmt("insert into transfers values ('t1') on conflict do nothing", "INSERT 0 0"),
			stmt("select response from transfers where id = 't1'", "SELECT 1"), commit},
			[]string{"INSERT 0 0", "SELECT 1"}, &no, false},
		{"one write of two changed a row", []step{begin,
			stmt("update accounts set balance = 0 where false", "UPDATE 0"),
			stmt("delete from holds where id = 7", "DELETE 1"), commit},
			[]string{"UPDATE 0", "DELETE 1"}, &yes, true},
		{"a call says nothing of what it changed", []step{begin,
			stmt("update accounts set balance = 0 where false", "UPDATE 0"),
			stmt("call transfer(1, 2, 5)", "CALL"), commit},
			[]string{"UPDATE 0", "CALL"}, nil, true},
		{"a data-modifying WITH answers SELECT", []step{begin,
			stmt("with d as (delete from holds returning *) select count(*) from d", "SELECT 1"), commit},
			[]string{"SELECT 1"}, nil, true},
		{"a rollback to a savepoint may have undone rows", []step{begin,
			stmt("insert into transfers values ('t1')", "INSERT 0 1"),
			stmt("savepoint s", "SAVEPOINT"),
			stmt("rollback to savepoint s", "ROLLBACK"), commit},
			[]string{"INSERT 0 1", "SAVEPOINT", "ROLLBACK"}, nil, true},
		{"a block in one simple query", []step{{pgQuery("begin; insert into t values (1) on conflict do nothing; commit"),
			bytes.Join([][]byte{pgComplete("BEGIN"), pgComplete("INSERT 0 0"), pgComplete("COMMIT"), pgReady('I')}, nil)}},
			[]string{"INSERT 0 0"}, &no, false},
		{"an autocommit write that matched nothing", []step{{pgQuery("update accounts set balance = 0 where false"),
			append(pgComplete("UPDATE 0"), pgReady('I')...)}},
			[]string{"UPDATE 0"}, &no, false},
		{"the extended protocol", []step{begin,
			{bytes.Join([][]byte{pgParse("s1", "insert into transfers values ($1) on conflict do nothing"), pgBind("", "s1"), pgExecute(""), pgSync()}, nil),
				bytes.Join([][]byte{pgParseComplete(), pgBindComplete(), pgComplete("INSERT 0 0"), pgReady('T')}, nil)},
			{bytes.Join([][]byte{pgParse("", "commit"), pgBind("", ""), pgExecute(""), pgSync()}, nil),
				bytes.Join([][]byte{pgParseComplete(), pgBindComplete(), pgComplete("COMMIT"), pgReady('I')}, nil)}},
			[]string{"INSERT 0 0"}, &no, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, evs := newCommits(t, 1, nil)
			h := newHarness(t, c, 3, 5)
			startupExchange(h)
			// A transaction before: its replies are not the cut one's.
			for _, s := range []step{begin, stmt("insert into log values (1)", "INSERT 0 1"), commit} {
				s.run(h)
			}
			c.Faults.Cut.Set(1, 0)
			for _, s := range tt.steps {
				s.run(h)
			}
			if len(*evs) != 1 || (*evs)[0].Txn == nil {
				t.Fatalf("events %+v, want one cut with its transaction", *evs)
			}
			got := (*evs)[0].Txn
			if !slices.Equal(got.Tags, tt.tags) || !samePtr(got.Changed, tt.changed) || got.Wrote != tt.wrote {
				t.Errorf("txn tags %q changed %v wrote %v; want %q, %v, %v", got.Tags, show(got.Changed), got.Wrote, tt.tags, show(tt.changed), tt.wrote)
			}
		})
	}
}

func samePtr(a, b *bool) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func show(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprint(*b)
}

// TestRespChangedFromReplies: a cut EXEC's reply is held until its array is whole and
// read against the commands queued; a single command's reply likewise. SETNX :0 or DEL
// :0 changed nothing; INCR or SADD :1 changed something; HSET :0 does not tell (it
// also answers 0 when it updated a field).
func TestRespChangedFromReplies(t *testing.T) {
	yes, no := true, false
	multi := func(cmds [][]byte, replies ...[]byte) step {
		req := append(respCmd("multi"), bytes.Join(cmds, nil)...)
		req = append(req, respCmd("exec")...)
		rep := rOK()
		for range cmds {
			rep = append(rep, rLine('+', "QUEUED")...)
		}
		return step{req, append(rep, rAgg('*', len(replies), replies...)...)}
	}
	for _, tt := range []struct {
		name    string
		step    step
		tags    []string
		changed *bool
		wrote   bool
	}{
		{"a replay's SETNX changed nothing", multi([][]byte{respCmd("setnx", "idem:1", "x")}, rInt(0)), []string{":0"}, &no, false},
		{"a transfer changed keys", multi([][]byte{respCmd("incrby", "a", "-5"), respCmd("incrby", "b", "5"), respCmd("sadd", "log", "t1")}, rInt(95), rInt(105), rInt(1)), []string{":95", ":105", ":1"}, &yes, true},
		{"HSET 0 does not tell", multi([][]byte{respCmd("hset", "h", "f", "v")}, rInt(0)), []string{":0"}, nil, true},
		{"a read and a DEL of nothing", multi([][]byte{respCmd("get", "a"), respCmd("del", "b")}, rBulk("x"), rInt(0)), []string{"$1", ":0"}, &no, false},
		{"an error inside EXEC ran nothing of that command", multi([][]byte{respCmd("incr", "s")}, rErr("WRONGTYPE")), []string{"-WRONGTYPE"}, &no, false},
		{"a single DEL of nothing", step{respCmd("del", "k"), rInt(0)}, []string{":0"}, &no, false},
		{"a single SET", step{respCmd("set", "k", "v"), rOK()}, []string{"+OK"}, &yes, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, evs := newProtoCommits(t, Resp{}, 1, nil)
			c.Faults.Cut.Set(1, 0)
			h := newHarness(t, c, 5, 3)
			respHandshake().run(h)
			tt.step.run(h)
			if len(*evs) != 1 || (*evs)[0].Txn == nil {
				t.Fatalf("events %+v, want one cut with its transaction", *evs)
			}
			got := (*evs)[0].Txn
			if !slices.Equal(got.Tags, tt.tags) || !samePtr(got.Changed, tt.changed) || got.Wrote != tt.wrote {
				t.Errorf("txn tags %q changed %v wrote %v; want %q, %v, %v", got.Tags, show(got.Changed), got.Wrote, tt.tags, show(tt.changed), tt.wrote)
			}
			// Nothing of the cut reply reaches the client: a single command's reply, or
			// EXEC's array (after the +OK and +QUEUED replies, which pass).
			cut := 0
			if bytes.Contains(tt.step.req, []byte("multi")) {
				cut = bytes.IndexByte(tt.step.rep, '*')
			}
			if want := len(respHandshake().rep) + cut; len(h.dnOut.b) != want {
				t.Errorf("the client got %q, want the replies before the cut one alone", h.dnOut.b)
			}
		})
	}
}
