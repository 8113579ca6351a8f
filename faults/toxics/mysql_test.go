package toxics

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The bytes below are built field by field from the protocol's documentation, in the
// shapes MariaDB 10.11 sends and go-sql-driver/mysql 1.10 asks for.

func myPkt(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

func myLenenc(v uint64) []byte {
	switch {
	case v < 0xFB:
		return []byte{byte(v)}
	case v <= 0xFFFF:
		return []byte{0xFC, byte(v), byte(v >> 8)}
	case v <= 0xFFFFFF:
		return []byte{0xFD, byte(v), byte(v >> 8), byte(v >> 16)}
	}
	b := make([]byte, 9)
	b[0] = 0xFE
	binary.LittleEndian.PutUint64(b[1:], v)
	return b
}

const (
	stIdle  = myStatusAutocommit
	stTrans = myStatusAutocommit | myStatusInTrans
)

func myGreeting(status uint16) []byte {
	b := []byte{myProtocolVersion}
	b = append(b, "10.11.19-MariaDB\x00"...)
	b = append(b, 7, 0, 0, 0)          // connection id
	b = append(b, "abcdefgh"...)       // auth data, first part
	b = append(b, 0, 0xFF, 0xF7, 0x2D) // filler, capabilities (low), charset
	b = binary.LittleEndian.AppendUint16(b, status)
	b = append(b, 0xFF, 0x81, 21)        // capabilities (high), auth data length
	b = append(b, make([]byte, 10)...)   // reserved
	b = append(b, "ijklmnopqrst\x00"...) // auth data, second part
	b = append(b, "mysql_native_password\x00"...)
	return myPkt(0, b)
}

func myResponse(caps uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = append(b, 0, 0, 0, 0, 45)
	b = append(b, make([]byte, 23)...)
	b = append(b, "indoubt\x00"...)
	b = append(b, 20)
	b = append(b, bytes.Repeat([]byte{9}, 20)...)
	b = append(b, "indoubt\x00mysql_native_password\x00"...)
	return myPkt(1, b)
}

func myOKPkt(seq byte, affected uint64, status uint16) []byte {
	b := append([]byte{myOK}, myLenenc(affected)...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, status)
	return myPkt(seq, append(b, 0, 0))
}

func myEOFPkt(seq byte, status uint16) []byte {
	b := []byte{myEOF, 0, 0}
	return myPkt(seq, binary.LittleEndian.AppendUint16(b, status))
}

func myErrPkt(seq byte, code uint16, msg string) []byte {
	b := binary.LittleEndian.AppendUint16([]byte{myERR}, code)
	return myPkt(seq, append(append(b, "#40001"...), msg...))
}

func myQuery(sql string) []byte { return myPkt(0, append([]byte{myComQuery}, sql...)) }

// myResultSet is a text result set of one column with rows, ended by an EOF packet
// (deprecateEOF false) or an OK packet with the 0xFE header.
func myResultSet(status uint16, deprecateEOF bool, rows ...string) []byte {
	seq := byte(1)
	next := func(p []byte) []byte { b := myPkt(seq, p); seq++; return b }
	out := next([]byte{1})
	out = append(out, next(append(append([]byte{3}, "def"...), make([]byte, 20)...))...)
	if !deprecateEOF {
		out = append(out, next([]byte{myEOF, 0, 0, byte(status), byte(status >> 8)})...)
	}
	for _, r := range rows {
		out = append(out, next(append(myLenenc(uint64(len(r))), r...))...)
	}
	if deprecateEOF {
		b := []byte{myEOF, 0, 0, byte(status), byte(status >> 8), 0, 0}
		return append(out, next(b)...)
	}
	return append(out, next([]byte{myEOF, 0, 0, byte(status), byte(status >> 8)})...)
}

const myCaps = myClientProtocol41 | 0x00008000 | 0x00000008 // secure connection, connect with db

// myHello runs the connection's start: greeting, response, OK.
func myHello(caps uint32) func(h *harness) (cli, srv []byte) {
	return func(h *harness) (cli, srv []byte) {
		g, r, ok := myGreeting(stIdle), myResponse(caps), myOKPkt(2, 0, stIdle)
		h.server(g)
		h.client(r)
		h.server(ok)
		return r, append(g, ok...)
	}
}

const (
	myUpdate = "UPDATE budget SET balance = balance - 1 WHERE id = 1 AND balance >= 1"
	myInsert = "INSERT INTO ops (id) VALUES ('3-41')"
)

func myPrepareOK(id uint32, params uint16, deprecateEOF bool) []byte {
	b := []byte{myOK}
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, 0, 0) // columns
	b = binary.LittleEndian.AppendUint16(b, params)
	b = append(b, 0, 0, 0)
	out := myPkt(1, b)
	seq := byte(2)
	for i := uint16(0); i < params; i++ {
		out = append(out, myPkt(seq, append(append([]byte{3}, "def"...), make([]byte, 20)...))...)
		seq++
	}
	if params > 0 && !deprecateEOF {
		out = append(out, myEOFPkt(seq, stIdle)...)
	}
	return out
}

func myExecute(id uint32) []byte {
	b := []byte{myComStmtExecute}
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, 0, 1, 0, 0, 0, 0, 1, 8, 0)
	return myPkt(0, append(b, 1, 0, 0, 0, 0, 0, 0, 0))
}

func TestMySQLFaults(t *testing.T) {
	cut := func(f *Faults) { f.Cut.Set(1, 0) }
	drop := func(f *Faults) { f.Drop.Set(1, 0) }
	begin := step{myQuery("START TRANSACTION"), myOKPkt(1, 0, stTrans)}
	upd := step{myQuery(myUpdate), myOKPkt(1, 1, stTrans)}
	ins := step{myQuery(myInsert), myOKPkt(1, 1, stTrans)}
	read := step{myQuery("SELECT balance FROM budget WHERE id = 1"), myResultSet(stIdle, false, "10")}
	for _, deprecateEOF := range []bool{false, true} {
		caps := uint32(myCaps)
		if deprecateEOF {
			caps |= myClientDeprecateEOF
			read = step{myQuery("SELECT balance FROM budget WHERE id = 1"), myResultSet(stIdle, true, "10")}
		}
		runFaultCases(t, faultRun{proto: MySQL{}, name: "mysql", hello: myHello(caps)}, []faultCase{
			{"cut autocommit update", cut, []step{read, {myQuery(myUpdate), myOKPkt(1, 1, stIdle)}}, 1,
				-1, 0, CommitCut, myUpdate, "UPDATE 1"},
			{"drop autocommit update", drop, []step{read, {myQuery(myUpdate), myOKPkt(1, 1, stIdle)}}, 1,
				0, 0, CommitDrop, myUpdate, ""},
			{"cut commit", cut, []step{begin, ins, upd, {myQuery("COMMIT"), myOKPkt(1, 0, stIdle)}}, 3,
				-1, 0, CommitCut, "COMMIT", "COMMIT"},
			{"drop commit", drop, []step{begin, ins, upd, {myQuery("commit"), myOKPkt(1, 0, stIdle)}}, 3,
				0, 0, CommitDrop, "commit", ""},
			{"cut prepared update", cut, []step{
				{myPkt(0, append([]byte{myComStmtPrepare}, myUpdate...)), myPrepareOK(9, 1, deprecateEOF)},
				{myExecute(9), myOKPkt(1, 1, stIdle)}}, 1,
				-1, 0, CommitCut, myUpdate, "UPDATE 1"},
			{"cut the commit of a multi-statement query", cut, []step{
				{myQuery("BEGIN; " + myUpdate + "; COMMIT"), bytes.Join([][]byte{
					myOKPkt(1, 0, stTrans|myStatusMoreResults), myOKPkt(2, 1, stTrans|myStatusMoreResults), myOKPkt(3, 0, stIdle)}, nil)}}, 0,
				-1, 2 * len(myOKPkt(1, 0, stTrans)), CommitCut, "BEGIN; " + myUpdate + "; COMMIT", "COMMIT"},
		})
	}
}

// TestMySQLNoChangeIsNoProof checks that a commit that changed nothing is released to
// the client (no event), and the reservation comes back for the next write, which is cut.
func TestMySQLNoChangeIsNoProof(t *testing.T) {
	next := step{myQuery(myUpdate), myOKPkt(1, 1, stIdle)}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"conditional update that matched nothing", []step{{myQuery(myUpdate), myOKPkt(1, 0, stIdle)}}},
		{"a commit of reads only", []step{
			{myQuery("BEGIN"), myOKPkt(1, 0, stTrans)},
			{myQuery("SELECT id FROM ops WHERE id = '3-41'"), myResultSet(stTrans, false)},
			{myQuery("COMMIT"), myOKPkt(1, 0, stIdle)}}},
		{"an error", []step{{myQuery(myUpdate), myErrPkt(1, 1213, "Deadlock found when trying to get lock")}}},
		{"an error in the transaction's commit", []step{
			{myQuery("BEGIN"), myOKPkt(1, 0, stTrans)},
			{myQuery(myUpdate), myOKPkt(1, 1, stTrans)},
			{myQuery("COMMIT"), myErrPkt(1, 1180, "Got error during COMMIT")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, evs := newProtoCommits(t, MySQL{}, 1, nil)
			c.Faults.Cut.Set(1, 1)
			h := newHarness(t, c, 1, 7)
			myHello(myCaps)(h)
			drain(h.dnOut)
			for _, s := range tc.steps {
				s.run(h)
			}
			got, closed := drain(h.dnOut)
			if !bytes.Equal(got, join(tc.steps, true)) || closed || len(*evs) != 0 {
				t.Fatalf("forwarded %d bytes closed %v events %v; want the replies forwarded, no event", len(got), closed, *evs)
			}
			next.run(h)
			if _, closed := drain(h.dnOut); !closed || len(*evs) != 1 {
				t.Fatalf("after the release: closed %v events %v, want a cut", closed, *evs)
			}
		})
	}
}

// TestMySQLNotPoints checks requests that commit nothing: reads with autocommit on,
// statements inside a transaction, a rollback, and everything after a TLS request.
func TestMySQLNotPoints(t *testing.T) {
	for _, tc := range []struct {
		name  string
		caps  uint32
		steps []step
	}{
		{"reads and a rollback", myCaps, []step{
			{myQuery("SELECT 1"), myResultSet(stIdle, false, "1")},
			{myQuery("BEGIN"), myOKPkt(1, 0, stTrans)},
			{myQuery(myUpdate), myOKPkt(1, 1, stTrans)},
			{myQuery("ROLLBACK"), myOKPkt(1, 0, stIdle)},
			{myPkt(0, []byte{0x0E}), myOKPkt(1, 0, stIdle)}, // COM_PING
		}},
		{"autocommit off until COMMIT", myCaps, []step{
			{myQuery("SET autocommit = 0"), myOKPkt(1, 0, 0)},
			{myQuery(myUpdate), myOKPkt(1, 1, myStatusInTrans)},
		}},
		{"TLS", myCaps | myClientSSL, []step{
			{myQuery(myUpdate), myOKPkt(1, 1, stIdle)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPassesDisarmedArmed(t, tc.caps, tc.steps)
		})
	}
}

// checkPassesDisarmedArmed runs steps with drops armed: nothing may be dropped.
func checkPassesDisarmedArmed(t *testing.T, caps uint32, steps []step) {
	t.Helper()
	for _, max := range []int{1, 3, 32 << 10} {
		c, evs := newProtoCommits(t, MySQL{}, 1, nil)
		c.Faults.Drop.Set(1, 0)
		h := newHarness(t, c, uint64(max), max)
		cli, srv := myHello(caps)(h)
		for _, s := range steps {
			s.run(h)
		}
		gotUp, _ := drain(h.upOut)
		gotDn, _ := drain(h.dnOut)
		if !bytes.Equal(gotUp, append(cli, join(steps, false)...)) || !bytes.Equal(gotDn, append(srv, join(steps, true)...)) || len(*evs) != 0 {
			t.Fatalf("chunks %d: forwarded %d up, %d down, events %v; want everything, no event", max, len(gotUp), len(gotDn), *evs)
		}
	}
}

func TestMySQLSeededDecisions(t *testing.T) {
	checkSeededDecisions(t, MySQL{}, func(h *harness) {
		myHello(myCaps)(h)
		step{myQuery(myUpdate), myOKPkt(1, 1, stIdle)}.run(h)
		step{myQuery(myInsert), myOKPkt(1, 1, stIdle)}.run(h)
	})
}

func TestMySQLGarbage(t *testing.T) {
	checkGarbage(t, garbageRun{
		proto: MySQL{}, seed: 46, iterations: 1000,
		hello: func(h *harness, i int) {
			if i%2 == 0 {
				myHello(myCaps)(h)
			}
		},
		garbage: func(rng *rand.Rand, j int) ([]byte, bool) {
			b := randomBytes(rng, 200)
			if j%2 == 0 && len(b) > 5 {
				// A plausible header reaches deeper into the framer.
				n := len(b) - 4
				b[0], b[1], b[2], b[3] = byte(n), 0, 0, byte(rng.IntN(3))
			}
			return b, false
		},
		good: func(h *harness) string {
			myHello(myCaps)(h)
			step{myQuery(myUpdate), myOKPkt(1, 1, stIdle)}.run(h)
			return "UPDATE budget"
		},
	})
}

// runMyFramer frames chunks as the Session does and returns the packets: whole ones,
// and streamed ones joined; opaque bytes at the end.
func runMyFramer(f *myFramer, chunks [][]byte) []framed {
	var out []framed
	var piece, opaque []byte
	feed(chunks, func(b []byte) int {
		pk, ok := f.next(b)
		if !ok {
			return 0
		}
		raw := b[:pk.n]
		switch pk.kind {
		case framePartial:
			piece = append(piece, raw...)
			if f.lf.skip == 0 {
				out = append(out, framed{Kind: frameMessage, Raw: string(piece)})
				piece = nil
			}
		case frameOpaque:
			opaque = append(opaque, raw...)
		default:
			out = append(out, framed{Kind: frameMessage, Typ: pk.seq, Raw: string(raw)})
		}
		return pk.n
	})
	if len(opaque) > 0 {
		out = append(out, framed{Kind: frameOpaque, Raw: string(opaque)})
	}
	return out
}

func myServerStream() []byte {
	big := bytes.Repeat([]byte("x"), 70<<10)
	return bytes.Join([][]byte{
		myGreeting(stIdle), myOKPkt(2, 0, stIdle),
		myResultSet(stIdle, false, "1", string(big), "3"),
		myOKPkt(1, 1, stIdle),
	}, nil)
}

// TestMySQLFramerChunks frames the same stream whole and in chunks of 1 byte to
// 32 KiB: the packets must be the same, and a row longer than 64 KiB streams.
func TestMySQLFramerChunks(t *testing.T) {
	s := myServerStream()
	whole := runMyFramer(&myFramer{}, [][]byte{s})
	if len(whole) != 10 || len(whole[6].Raw) != 4+4+70<<10 {
		t.Fatalf("%d packets, want 10 with the long row whole", len(whole))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 3, 5, 64, 1 << 10, 32 << 10} {
		if got := runMyFramer(&myFramer{}, chunk(rng, s, max)); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks %d: %d packets, want %d", max, len(got), len(whole))
		}
	}
}

// TestMySQLLongQuery checks that a query longer than one packet (continued) passes
// unjudged, and the write after it is still a point.
func TestMySQLLongQuery(t *testing.T) {
	c, evs := newProtoCommits(t, MySQL{}, 1, nil)
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 32<<10)
	myHello(myCaps)(h)
	long := append([]byte{myComQuery}, "INSERT INTO t (v) VALUES ('"...)
	long = append(long, bytes.Repeat([]byte("y"), myMaxPayload-len(long))...)
	req := append(myPkt(0, long), myPkt(1, []byte("')"))...)
	step{req, myOKPkt(2, 1, stIdle)}.run(h)
	if len(*evs) != 0 || h.up.closed {
		t.Fatalf("a continued query was judged: events %v", *evs)
	}
	step{myQuery(myUpdate), myOKPkt(1, 1, stIdle)}.run(h)
	if len(*evs) != 1 || (*evs)[0].Statement != myUpdate {
		t.Fatalf("events %v, want the update dropped", *evs)
	}
}

func FuzzMySQLFramer(f *testing.F) {
	f.Add(myServerStream()[:4096], uint64(1), false)
	f.Add(append(myResponse(myCaps), myQuery(myUpdate)...), uint64(2), true)
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0, 1, 2, 3}, uint64(3), false)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, upstream bool) {
		whole := runMyFramer(&myFramer{upstream: upstream}, [][]byte{data})
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		chunked := runMyFramer(&myFramer{upstream: upstream}, chunk(rng, data, 1+int(seed%64)))
		if !reflect.DeepEqual(whole, chunked) {
			t.Fatalf("whole %d packets, chunked %d", len(whole), len(chunked))
		}
		if !bytes.HasPrefix(data, []byte(joinRaw(whole))) {
			t.Fatalf("packets are not a prefix of the input")
		}
	})
}

// FuzzMySQLHalves feeds arbitrary bytes from both sides to the two halves with every
// fault armed: no panic, each direction forwards a prefix of its input; disarmed, all.
func FuzzMySQLHalves(f *testing.F) {
	tx := []step{
		{myQuery("BEGIN"), myOKPkt(1, 0, stTrans)},
		{myQuery(myUpdate), myOKPkt(1, 1, stTrans)},
		{myQuery("COMMIT"), myOKPkt(1, 0, stIdle)},
		{myQuery("SELECT 1"), myResultSet(stIdle, false, "1")},
	}
	f.Add(append(myResponse(myCaps), join(tx, false)...), append(append(myGreeting(stIdle), myOKPkt(2, 0, stIdle)...), join(tx, true)...), uint64(1), true)
	f.Add(append(myResponse(myCaps|myClientDeprecateEOF), myPkt(0, append([]byte{myComStmtPrepare}, myUpdate...))...),
		append(append(myGreeting(stIdle), myOKPkt(2, 0, stIdle)...), myPrepareOK(1, 1, true)...), uint64(2), false)
	f.Fuzz(func(t *testing.T, client, server []byte, seed uint64, armed bool) {
		c, err := NewCommits(Config{Protocol: MySQL{}, Seed: int64(seed)})
		if err != nil {
			t.Fatal(err)
		}
		if armed {
			c.Faults.Mixed.Set(1, 0)
		}
		h := newHarness(t, c, seed, 1+int(seed%97))
		rng := rand.New(rand.NewPCG(seed, 3))
		cl, sv := client, server
		for len(cl) > 0 || len(sv) > 0 {
			if len(cl) > 0 && (len(sv) == 0 || rng.IntN(2) == 0) {
				n := 1 + rng.IntN(len(cl))
				h.client(cl[:n])
				cl = cl[n:]
			} else {
				n := 1 + rng.IntN(len(sv))
				h.server(sv[:n])
				sv = sv[n:]
			}
		}
		up, _ := drain(h.upOut)
		down, _ := drain(h.dnOut)
		if !bytes.HasPrefix(client, up) || !bytes.HasPrefix(server, down) {
			t.Fatalf("forwarded bytes are not a prefix of the input")
		}
		if !armed && (len(up)+len(h.up.buf) != len(client) || len(down)+len(h.down.buf)+len(h.down.held) != len(server)) {
			t.Fatalf("disarmed halves lost bytes")
		}
	})
}
