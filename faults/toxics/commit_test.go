package toxics

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// harness drives the Session of one connection synchronously, as a relay would: the
// framers' unit tests feed scripted client and server bytes to it, in random chunks.
type harness struct {
	c      *Commits
	s      *Session
	up     *upState
	down   *downState
	upOut  *outbox
	dnOut  *outbox
	events []Event
	rng    *rand.Rand
	max    int // largest chunk
}

// outbox collects what one direction forwarded, and whether the Session ended it.
type outbox struct {
	b      []byte
	taken  int
	closed bool
}

func (o *outbox) send(b []byte) error {
	o.b = append(o.b, b...)
	return nil
}

func newHarness(t *testing.T, c *Commits, chunkSeed uint64, max int) *harness {
	t.Helper()
	h := &harness{c: c, rng: rand.New(rand.NewPCG(chunkSeed, 7)), max: max, upOut: &outbox{}, dnOut: &outbox{}}
	h.s = c.Open("")
	h.up, h.down = &h.s.up, &h.s.down
	return h
}

// newCommits returns commit faults whose events the harness of the returned pointer
// collects.
func newCommits(t *testing.T, seed int64, match func(string) bool) (*Commits, *[]Event) {
	t.Helper()
	return newProtoCommits(t, Postgres{}, seed, match)
}

// client passes b to Requests in random chunks, from a buffer that is overwritten
// after each call, as a relay reusing its read buffer would.
func (h *harness) client(b []byte) {
	buf := make([]byte, h.max)
	for _, ch := range chunk(h.rng, b, h.max) {
		if h.upOut.closed {
			return
		}
		n := copy(buf, ch)
		if !h.s.Requests(buf[:n], h.upOut.send) {
			h.upOut.closed = true
		}
		for i := range buf[:n] {
			buf[i] = 0xa5
		}
	}
}

// server passes b to Replies as client does to Requests.
func (h *harness) server(b []byte) {
	buf := make([]byte, h.max)
	for _, ch := range chunk(h.rng, b, h.max) {
		if h.dnOut.closed {
			return
		}
		n := copy(buf, ch)
		if !h.s.Replies(buf[:n], h.dnOut.send) {
			h.dnOut.closed = true
		}
		for i := range buf[:n] {
			buf[i] = 0xa5
		}
	}
}

// drain returns what a direction forwarded since the last drain and whether the
// Session ended it.
func drain(o *outbox) ([]byte, bool) {
	b := o.b[o.taken:]
	o.taken = len(o.b)
	return b, o.closed
}

func startupExchange(h *harness) (cli, srv []byte) {
	cli = append(pgSSL(), pgStartupMsg()...)
	srv = bytes.Join([][]byte{{'N'}, pgAuthOK(), pgParam("server_version", "15"), pgBackendKey(1, 2), pgReady('I')}, nil)
	h.client(pgSSL())
	h.server([]byte{'N'})
	h.client(pgStartupMsg())
	h.server(srv[1:])
	return cli, srv
}

// step is one request and its reply in a scripted conversation.
type step struct {
	req, rep []byte
}

func (s step) run(h *harness) {
	h.client(s.req)
	if !h.up.closed {
		// A dropped request gets no reply: the server never saw it.
		h.server(s.rep)
	}
}

func txSteps() []step {
	return []step{
		{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
		{pgQuery("update account set balance = balance - 1 where id = 1"), append(pgComplete("UPDATE 1"), pgReady('T')...)},
		{pgQuery("commit"), append(pgComplete("COMMIT"), pgReady('I')...)},
	}
}

// prepareSteps is the first phase of two-phase commit on one participant.
func prepareSteps() []step {
	return []step{
		{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
		{pgQuery("update account set balance = balance - 1 where id = 1"), append(pgComplete("UPDATE 1"), pgReady('T')...)},
		{pgQuery("PREPARE TRANSACTION 'g1'"), append(pgComplete("PREPARE TRANSACTION"), pgReady('I')...)},
	}
}

// commitPreparedSteps is the second phase: one statement outside any block.
func commitPreparedSteps() []step {
	return []step{{pgQuery("COMMIT PREPARED 'g1'"), append(pgComplete("COMMIT PREPARED"), pgReady('I')...)}}
}

const extSQL = "UPDATE account SET balance = balance - $1 WHERE id = 1 AND balance > 0"

func extendedSteps() []step {
	sql := extSQL
	return []step{
		{bytes.Join([][]byte{pgParse("stmtcache_9", sql), pgDescribe('S', "stmtcache_9"), pgSync()}, nil),
			bytes.Join([][]byte{pgParseComplete(), pgMsg('t', i16(1), i32(23)), pgNoData(), pgReady('I')}, nil)},
		{bytes.Join([][]byte{pgBind("", "stmtcache_9"), pgDescribe('P', ""), pgExecute(""), pgSync()}, nil),
			bytes.Join([][]byte{pgBindComplete(), pgNoData(), pgComplete("UPDATE 1"), pgReady('I')}, nil)},
	}
}

func join(steps []step, rep bool) []byte {
	var b []byte
	for _, s := range steps {
		if rep {
			b = append(b, s.rep...)
		} else {
			b = append(b, s.req...)
		}
	}
	return b
}

func TestHalvesPassEverythingWhenDisarmed(t *testing.T) {
	checkPassesDisarmed(t, Postgres{}, []int{1, 3, 64, 32 << 10}, startupExchange, append(txSteps(), extendedSteps()...))
}

func TestCommitFaults(t *testing.T) {
	tx, ext := txSteps(), extendedSteps()
	runFaultCases(t, faultRun{proto: Postgres{}, name: "postgres", hello: startupExchange}, []faultCase{
		{"drop commit", func(f *Faults) { f.Drop.Set(1, 0) }, tx, 2, 0, 0, CommitDrop, "commit", ""},
		{"cut commit", func(f *Faults) { f.Cut.Set(1, 0) }, tx, 2, -1, 0, CommitCut, "commit", "COMMIT"},
		{"drop autocommit execute", func(f *Faults) { f.Drop.Set(1, 0) }, ext, 1,
			len(pgBind("", "stmtcache_9")) + len(pgDescribe('P', "")), 0, CommitDrop, extSQL, ""},
		{"cut autocommit execute", func(f *Faults) { f.Cut.Set(1, 0) }, ext, 1,
			-1, len(pgBindComplete()) + len(pgNoData()), CommitCut, extSQL, "UPDATE 1"},
		{"drop prepare transaction", func(f *Faults) { f.Drop.Set(1, 0) }, prepareSteps(), 2, 0, 0, CommitDrop, "PREPARE TRANSACTION 'g1'", ""},
		{"cut prepare transaction", func(f *Faults) { f.Cut.Set(1, 0) }, prepareSteps(), 2, -1, 0, CommitCut, "PREPARE TRANSACTION 'g1'", "PREPARE TRANSACTION"},
		{"drop commit prepared", func(f *Faults) { f.Drop.Set(1, 0) }, commitPreparedSteps(), 0, 0, 0, CommitDrop, "COMMIT PREPARED 'g1'", ""},
		{"cut commit prepared", func(f *Faults) { f.Cut.Set(1, 0) }, commitPreparedSteps(), 0, -1, 0, CommitCut, "COMMIT PREPARED 'g1'", "COMMIT PREPARED"},
		{"cut simple autocommit", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{pgQuery("insert into t values (1)"), append(pgComplete("INSERT 0 1"), pgReady('I')...)}}, 0,
			-1, 0, CommitCut, "insert into t values (1)", "INSERT 0 1"},
	})
}

func tail(b []byte) []byte {
	if len(b) > 40 {
		return b[len(b)-40:]
	}
	return b
}

func TestCommitPointsAndNonPoints(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		fire  bool // whether a drop armed at 1 fires on the last request
	}{
		{"commit in a failed block rolls back: no point", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("update t set x = 1/0"), append(pgError("division by zero"), pgReady('E')...)},
			{pgQuery("commit"), nil},
		}, false},
		{"commit outside a block: no point", []step{{pgQuery("commit"), nil}}, false},
		{"read outside a block: no point", []step{{pgQuery("select balance from account"), nil}}, false},
		{"write in a block: no point", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("delete from t"), nil},
		}, false},
		{"pipelined begin, write and commit: the commit", []step{
			{bytes.Join([][]byte{pgQuery("begin"), pgQuery("update t set x = 1")}, nil), nil},
			{pgQuery("commit"), nil},
		}, true},
		{"multi-statement block in one query", []step{{pgQuery("begin; update t set x = 1; commit"), nil}}, true},
		{"end commits", []step{
			{pgQuery("start transaction"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("END"), nil},
		}, true},
		{"rollback: no point", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("rollback"), nil},
		}, false},
		{"commit prepared", []step{{pgQuery("COMMIT PREPARED 'tx1'"), nil}}, true},
		{"prepare transaction ends a block: the first phase's point", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("update t set x = 1"), append(pgComplete("UPDATE 1"), pgReady('T')...)},
			{pgQuery("PREPARE TRANSACTION 'tx1'"), nil},
		}, true},
		{"prepare transaction outside a block: no point", []step{{pgQuery("PREPARE TRANSACTION 'tx1'"), nil}}, false},
		{"prepare transaction in a failed block rolls back: no point", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{pgQuery("update t set x = 1/0"), append(pgError("division by zero"), pgReady('E')...)},
			{pgQuery("PREPARE TRANSACTION 'tx1'"), nil},
		}, false},
		{"rollback prepared: no point", []step{{pgQuery("ROLLBACK PREPARED 'tx1'"), nil}}, false},
		{"prepared commit via extended protocol", []step{
			{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)},
			{bytes.Join([][]byte{pgParse("c1", "commit"), pgBind("p", "c1"), pgExecute("p"), pgSync()}, nil), nil},
		}, true},
		{"second write of one extended implicit transaction is not a new point", []step{
			{bytes.Join([][]byte{pgParse("", "select 1"), pgBind("", ""), pgExecute(""), pgParse("", "update t set x = 1"), pgBind("", ""), pgExecute(""), pgSync()}, nil), nil},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, evs := newCommits(t, 1, nil)
			c.Faults.Drop.Set(1, 0)
			h := newHarness(t, c, 1, 1<<10)
			startupExchange(h)
			for _, s := range tt.steps {
				s.run(h)
			}
			if got := len(*evs) == 1; got != tt.fire {
				t.Errorf("fired %v (%+v), want %v", got, *evs, tt.fire)
			}
		})
	}
}

func TestArmedCutEndsUnfiredOnError(t *testing.T) {
	c, evs := newCommits(t, 1, nil)
	c.Faults.Cut.Set(1, 1)
	h := newHarness(t, c, 1, 1<<10)
	startupExchange(h)
	q := pgQuery("update t set x = 1; update t set y = 1/0")
	rep := bytes.Join([][]byte{pgComplete("UPDATE 1"), pgError("division by zero"), pgReady('I')}, nil)
	step{q, rep}.run(h)
	_, _ = drain(h.upOut)
	got, closed := drain(h.dnOut)
	if !bytes.HasSuffix(got, rep) || closed || len(*evs) != 0 {
		t.Fatalf("failed statement: forwarded %q closed %v events %v; want the reply forwarded, no event", tail(got), closed, *evs)
	}
	// The cap of 1 is free again: the next commit is cut.
	step{pgQuery("insert into t values (2)"), append(pgComplete("INSERT 0 1"), pgReady('I')...)}.run(h)
	if _, closed := drain(h.dnOut); !closed || len(*evs) != 1 {
		t.Fatalf("after the error: closed %v events %v, want a cut", closed, *evs)
	}
}

func TestMatchSelectsPoints(t *testing.T) {
	c, evs := newCommits(t, 1, func(s string) bool { return strings.Contains(s, "account") })
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 1<<10)
	startupExchange(h)
	step{pgQuery("update other set x = 1"), append(pgComplete("UPDATE 1"), pgReady('I')...)}.run(h)
	step{pgQuery("begin"), append(pgComplete("BEGIN"), pgReady('T')...)}.run(h)
	step{pgQuery("update account set x = 1"), append(pgComplete("UPDATE 1"), pgReady('T')...)}.run(h)
	if len(*evs) != 0 {
		t.Fatalf("fired before the commit: %v", *evs)
	}
	step{pgQuery("commit"), nil}.run(h)
	if len(*evs) != 1 || (*evs)[0].Statement != "commit" {
		t.Fatalf("events %+v, want the commit of the block that touched account", *evs)
	}
}

// decisions runs n connections of two autocommit writes each under the faults arm sets,
// and returns the kind of fault each got (0: none).
func decisions(t *testing.T, seed int64, arm func(*Faults), n int) []Kind {
	t.Helper()
	return decisionsOf(t, Postgres{}, seed, arm, n, pgTwoWrites)
}

// pgTwoWrites runs the startup and two autocommit writes.
func pgTwoWrites(h *harness) {
	startupExchange(h)
	step{pgQuery("update t set x = x + 1"), append(pgComplete("UPDATE 1"), pgReady('I')...)}.run(h)
	step{pgQuery("update t set x = x + 1"), append(pgComplete("UPDATE 1"), pgReady('I')...)}.run(h)
}

func TestDecisionsAreSeeded(t *testing.T) {
	checkSeededDecisions(t, Postgres{}, pgTwoWrites)
}

func equalKinds(a, b []Kind) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCapLimitsFires(t *testing.T) {
	got := decisions(t, 1, func(f *Faults) { f.Cut.Set(1, 3) }, 10)
	n := 0
	for _, k := range got {
		if k != 0 {
			n++
		}
	}
	if n != 3 {
		t.Errorf("fires %v: %d, want 3", got, n)
	}
}

func TestGarbageNeverPanics(t *testing.T) {
	checkGarbage(t, garbageRun{
		proto: Postgres{}, seed: 9, iterations: 2000,
		hello: func(h *harness, i int) {
			if i%2 == 0 {
				startupExchange(h)
			}
		},
		garbage: func(rng *rand.Rand, _ int) ([]byte, bool) { return randomBytes(rng, 200), false },
		good: func(h *harness) string {
			startupExchange(h)
			step{pgQuery("update t set x = 1"), append(pgComplete("UPDATE 1"), pgReady('I')...)}.run(h)
			return "update t set x = 1"
		},
	})
}
