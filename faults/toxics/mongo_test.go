package toxics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Builders of MongoDB wire messages for the framer's tests, over the driver's BSON
// encoder.

func bsonDoc(t testing.TB, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mongoMessage(reqID, replyTo, op int32, body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(mongoHeader+len(body)))
	b = binary.LittleEndian.AppendUint32(b, uint32(reqID))
	b = binary.LittleEndian.AppendUint32(b, uint32(replyTo))
	b = binary.LittleEndian.AppendUint32(b, uint32(op))
	return append(b, body...)
}

// opMsg builds an OP_MSG: flags, the body, then document sequences given as identifier
// followed by documents.
func opMsg(reqID, replyTo int32, flags uint32, body []byte, seqs ...any) []byte {
	b := binary.LittleEndian.AppendUint32(nil, flags)
	b = append(append(b, 0), body...)
	for i := 0; i < len(seqs); i += 2 {
		sec := append([]byte(seqs[i].(string)), 0)
		for _, d := range seqs[i+1].([][]byte) {
			sec = append(sec, d...)
		}
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(4+len(sec)))
		b = append(b, sec...)
	}
	if flags&mongoChecksumPresent != 0 {
		b = append(b, 1, 2, 3, 4)
	}
	return mongoMessage(reqID, replyTo, mongoOpMsg, b)
}

var testLsid = bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}}}

func mongoCmd(t testing.TB, reqID int32, d bson.D, seqs ...any) []byte {
	return opMsg(reqID, 0, 0, bsonDoc(t, d), seqs...)
}

func mongoOK(t testing.TB, reqID, replyTo int32, extra ...bson.E) []byte {
	d := append(bson.D{}, extra...)
	d = append(d, bson.E{Key: "ok", Value: 1.0})
	return opMsg(reqID, replyTo, 0, bsonDoc(t, d))
}

func mongoFindAndModify(t testing.TB, reqID int32) []byte {
	return mongoCmd(t, reqID, bson.D{
		{Key: "findAndModify", Value: "budget"},
		{Key: "query", Value: bson.D{{Key: "_id", Value: "budget"}, {Key: "balance", Value: bson.D{{Key: "$gt", Value: 0}}}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: -1}}}}},
		{Key: "new", Value: true},
		{Key: "lsid", Value: testLsid},
		{Key: "$db", Value: "indoubt"},
	})
}

func mongoUpdate(t testing.TB, reqID int32) []byte {
	return mongoCmd(t, reqID, bson.D{{Key: "update", Value: "registers"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "indoubt"}},
		"updates", [][]byte{bsonDoc(t, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "k"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: int64(3)}}}}}, {Key: "upsert", Value: true}})})
}

func mongoHandshake(t testing.TB) step {
	hello := bsonDoc(t, bson.D{{Key: "isMaster", Value: 1}, {Key: "client", Value: bson.D{{Key: "driver", Value: "go"}}}})
	query := append(binary.LittleEndian.AppendUint32(nil, 0), "admin.$cmd\x00"...)
	query = binary.LittleEndian.AppendUint32(query, 0)
	query = binary.LittleEndian.AppendUint32(query, 0xffffffff)
	query = append(query, hello...)
	reply := binary.LittleEndian.AppendUint32(nil, 8)
	reply = binary.LittleEndian.AppendUint64(reply, 0)
	reply = binary.LittleEndian.AppendUint32(reply, 0)
	reply = binary.LittleEndian.AppendUint32(reply, 1)
	reply = append(reply, bsonDoc(t, bson.D{{Key: "ismaster", Value: true}, {Key: "maxWireVersion", Value: 21}, {Key: "ok", Value: 1.0}})...)
	return step{
		append(mongoMessage(1, 0, mongoOpQuery, query), mongoCmd(t, 2, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})...),
		append(mongoMessage(100, 1, mongoOpReply, reply), mongoOK(t, 101, 2)...),
	}
}

// mongoRequestTrace feeds chunks to Request as the upstream toxic does and returns the
// points and the switch to pass-through.
func mongoRequestTrace(c *mongoConn, chunks [][]byte) []string {
	var out []string
	opaque := false
	feed(chunks, func(b []byte) int {
		n, p := c.Request(b)
		if n <= 0 || n > len(b) {
			return n
		}
		if p != nil {
			p.rendered()
			out = append(out, fmt.Sprintf("point %d %q default=%v", c.lastID, p.Text, p.Default))
		}
		if c.up.opaque && !opaque {
			opaque = true
			out = append(out, "opaque")
		}
		return n
	})
	return out
}

func TestMongoRequestFraming(t *testing.T) {
	txn := func(id int32, num int64, d bson.D) []byte {
		d = append(d, bson.E{Key: "lsid", Value: testLsid}, bson.E{Key: "txnNumber", Value: num}, bson.E{Key: "autocommit", Value: false})
		return mongoCmd(t, id, d)
	}
	big := strings.Repeat("x", 100<<10)
	stream := bytes.Join([][]byte{
		mongoHandshake(t).req,
		mongoCmd(t, 3, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}),
		mongoCmd(t, 4, bson.D{{Key: "buildInfo", Value: 1}, {Key: "$db", Value: "admin"}}),
		mongoFindAndModify(t, 5),
		mongoUpdate(t, 6),
		mongoCmd(t, 7, bson.D{{Key: "find", Value: "registers"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: "k"}}}, {Key: "$db", Value: "indoubt"}}),
		mongoCmd(t, 8, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "v", Value: big}}}}, {Key: "$db", Value: "x"}}),
		txn(9, 1, bson.D{{Key: "insert", Value: "c"}, {Key: "startTransaction", Value: true}}),
		txn(10, 1, bson.D{{Key: "delete", Value: "c"}}),
		txn(11, 1, bson.D{{Key: "commitTransaction", Value: 1}, {Key: "$db", Value: "admin"}}),
		// A retryable write: txnNumber without autocommit is its own commit.
		mongoCmd(t, 12, bson.D{{Key: "delete", Value: "c"}, {Key: "txnNumber", Value: int64(2)}}),
		opMsg(13, 0, mongoMoreToCome|mongoChecksumPresent, bsonDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}})),
		mongoMessage(14, 0, mongoOpCompressed, bytes.Repeat([]byte{9}, 70<<10)),
		mongoCmd(t, 15, bson.D{{Key: "endSessions", Value: bson.A{testLsid}}, {Key: "$db", Value: "admin"}}),
		mongoMessage(16, 0, 1<<30, nil),                 // an unknown opcode passes
		[]byte{4, 0, 0, 0}, bytes.Repeat([]byte{0}, 12), // a length below 16
		mongoFindAndModify(t, 17),
	}, nil)
	want := []string{
		`point 5 "{findAndModify: \"budget\", query: {_id: \"budget\", balance: {$gt: 0}}, update: {$inc: {balance: -1}}, new: true, lsid: {id: BinData(4, 07070707070707070707070707070707)}, $db: \"indoubt\"}" default=true`,
		`point 6 "{update: \"registers\", ordered: true, $db: \"indoubt\", updates: [{q: {_id: \"k\"}, u: {$set: {value: NumberLong(3)}}, upsert: true}]}" default=true`,
		`point 7 "{find: \"registers\", filter: {_id: \"k\"}, $db: \"indoubt\"}" default=false`,
		fmt.Sprintf(`point 8 "{insert: \"c\", documents: [{v: \"%s\"}], $db: \"x\"}" default=true`, big[:1<<10]),
		`point 11 "{insert: \"c\", startTransaction: true, lsid: {id: BinData(4, 07070707070707070707070707070707)}, txnNumber: NumberLong(1), autocommit: false}; {delete: \"c\", lsid: {id: BinData(4, 07070707070707070707070707070707)}, txnNumber: NumberLong(1), autocommit: false}; {commitTransaction: 1, $db: \"admin\", lsid: {id: BinData(4, 07070707070707070707070707070707)}, txnNumber: NumberLong(1), autocommit: false}" default=true`,
		`point 12 "{delete: \"c\", txnNumber: NumberLong(2)}" default=true`,
		`point 13 "{insert: \"c\", writeConcern: {w: 0}}" default=true`,
		"opaque",
	}
	got := mongoRequestTrace(Mongo{}.NewConn().(*mongoConn), [][]byte{stream})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("whole stream:\n got %q\nwant %q", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
		if g := mongoRequestTrace(Mongo{}.NewConn().(*mongoConn), chunk(rng, stream, max)); !reflect.DeepEqual(g, got) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", max, g, got)
		}
	}
}

// mongoReplyTrace arms a cut on each of the request ids in armed, feeds the chunks to
// Reply and returns the verdicts other than Pass.
func mongoReplyTrace(armed []int32, chunks [][]byte) []string {
	c := Mongo{}.NewConn().(*mongoConn)
	pend := map[*Pending]int32{}
	for _, id := range armed {
		p := &Pending{}
		c.watch[id] = p
		pend[p] = id
	}
	out := traceReplies(c, chunks, func(v Verdict) string {
		if v.Action == Cut {
			return fmt.Sprintf("cut %d %s", pend[v.Pending], v.Tag)
		}
		return fmt.Sprintf("release %d", pend[v.Pending])
	})
	return append(out, fmt.Sprintf("opaque %v watching %d", c.down.opaque, len(c.watch)))
}

func TestMongoReplyFraming(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	stream := bytes.Join([][]byte{
		mongoHandshake(t).rep,
		mongoOK(t, 200, 5, bson.E{Key: "lastErrorObject", Value: bson.D{{Key: "n", Value: 1}, {Key: "updatedExisting", Value: true}}},
			bson.E{Key: "value", Value: bson.D{{Key: "_id", Value: "budget"}, {Key: "balance", Value: int64(9)}}}),
		mongoOK(t, 201, 7, bson.E{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{bson.D{{Key: "v", Value: big}}}}}}),
		opMsg(202, 6, 0, bsonDoc(t, bson.D{{Key: "n", Value: 0}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 11000}}}}, {Key: "ok", Value: 1.0}})),
		opMsg(203, 8, 0, bsonDoc(t, bson.D{{Key: "n", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}}}, {Key: "ok", Value: 1.0}})),
		opMsg(204, 9, 0, bsonDoc(t, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "boom"}, {Key: "code", Value: 2}})),
		opMsg(205, 10, mongoChecksumPresent, bsonDoc(t, bson.D{{Key: "n", Value: 1}, {Key: "writeErrors", Value: bson.A{}}, {Key: "ok", Value: int32(1)}})),
		mongoMessage(206, 11, mongoOpCompressed, bytes.Repeat([]byte{1}, 40)),
		opMsg(207, 12, mongoMoreToCome, bsonDoc(t, bson.D{{Key: "ok", Value: true}})),
		opMsg(208, 207, mongoMoreToCome, bsonDoc(t, bson.D{{Key: "ok", Value: true}})),
		[]byte{0xff, 0xff, 0xff, 0x7f}, bytes.Repeat([]byte{0}, 12), // longer than 48 MB
		mongoOK(t, 209, 13),
	}, nil)
	armed := []int32{5, 6, 8, 9, 10, 11, 12, 13}
	want := []string{
		`cut 5 {lastErrorObject: {n: 1, updatedExisting: true}, value: {_id: "budget", balance: NumberLong(9)}, ok: 1.0}`,
		"release 6", "release 8", "release 9",
		"cut 10 {n: 1, writeErrors: [], ok: 1}",
		"release 11",
		"cut 12 {ok: true}",
		"opaque true watching 1",
	}
	got := mongoReplyTrace(armed, [][]byte{stream})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("whole stream:\n got %q\nwant %q", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
		if g := mongoReplyTrace(armed, chunk(rng, stream, max)); !reflect.DeepEqual(g, got) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", max, g, got)
		}
	}
}

func TestMongoCommitFaults(t *testing.T) {
	fam := mongoFindAndModify(t, 5)
	const famText = `{findAndModify: "budget", query: {_id: "budget", balance: {$gt: 0}}, update: {$inc: {balance: -1}}, new: true, lsid: {id: BinData(4, 07070707070707070707070707070707)}, $db: "indoubt"}`
	famReply := mongoOK(t, 300, 5, bson.E{Key: "value", Value: bson.D{{Key: "balance", Value: int64(9)}}})
	runFaultCases(t, faultRun{proto: Mongo{}, name: "mongo"}, []faultCase{
		{"cut findAndModify", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{mongoHandshake(t), {fam, famReply}}, 1, -1, 0, CommitCut, famText, `{value: {balance: NumberLong(9)}, ok: 1.0}`},
		{"drop findAndModify", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{mongoHandshake(t), {fam, famReply}}, 1, 0, 0, CommitDrop, famText, ""},
		{"pipelined through one connection: replies by responseTo", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{mongoHandshake(t), {
				append(mongoCmd(t, 20, bson.D{{Key: "find", Value: "c"}}), fam...),
				append(mongoOK(t, 301, 20), famReply...)}},
			1, -1, len(mongoOK(t, 301, 20)), CommitCut, famText, `{value: {balance: NumberLong(9)}, ok: 1.0}`},
		{"drop unacknowledged insert", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{mongoHandshake(t), {opMsg(30, 0, mongoMoreToCome, bsonDoc(t, bson.D{{Key: "insert", Value: "c"}})), nil}},
			1, 0, 0, CommitDrop, `{insert: "c"}`, ""},
	})
}

func TestMongoReleases(t *testing.T) {
	tests := []struct {
		name string
		step step
	}{
		{"ok 0", step{mongoFindAndModify(t, 5), opMsg(300, 5, 0, bsonDoc(t, bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: 2}}))}},
		{"write errors", step{mongoUpdate(t, 6), opMsg(300, 6, 0, bsonDoc(t, bson.D{{Key: "n", Value: 0}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "code", Value: 11000}}}}, {Key: "ok", Value: 1.0}}))}},
		{"write concern error", step{mongoUpdate(t, 6), opMsg(300, 6, 0, bsonDoc(t, bson.D{{Key: "n", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}}}, {Key: "ok", Value: 1.0}}))}},
		{"no ok", step{mongoUpdate(t, 6), opMsg(300, 6, 0, bsonDoc(t, bson.D{{Key: "n", Value: 1}}))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkReleased(t, Mongo{}, tt.step, step{mongoFindAndModify(t, 7), mongoOK(t, 301, 7)})
		})
	}
}

func TestMongoMatchAndControl(t *testing.T) {
	var texts []string
	c, evs := newProtoCommits(t, Mongo{}, 1, func(s string) bool {
		texts = append(texts, s)
		return strings.HasPrefix(s, "{find: ")
	})
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 1<<10)
	mongoHandshake(t).run(h)
	for i, cmd := range []string{"hello", "isMaster", "buildInfo", "saslStart", "endSessions", "killCursors", "abortTransaction"} {
		step{mongoCmd(t, int32(10+i), bson.D{{Key: cmd, Value: 1}}), mongoOK(t, int32(100+i), int32(10+i))}.run(h)
	}
	step{mongoCmd(t, 30, bson.D{{Key: "find", Value: "c"}}), nil}.run(h)
	if !reflect.DeepEqual(texts, []string{`{find: "c"}`}) || len(*evs) != 1 {
		t.Errorf("match saw %q, events %+v", texts, *evs)
	}
}

// mongoDecisions runs a connection of two findAndModify writes.
func mongoDecisions(t *testing.T) func(*harness) {
	return func(h *harness) {
		mongoHandshake(t).run(h)
		step{mongoFindAndModify(t, 5), mongoOK(t, 300, 5)}.run(h)
		step{mongoFindAndModify(t, 6), mongoOK(t, 301, 6)}.run(h)
	}
}

func TestMongoDecisionsAreSeeded(t *testing.T) {
	checkSeededDecisions(t, Mongo{}, mongoDecisions(t))
}

func TestMongoGarbageNeverPanics(t *testing.T) {
	fam := mongoFindAndModify(t, 5)
	checkGarbage(t, garbageRun{
		proto: Mongo{}, seed: 12, iterations: 2000,
		garbage: func(rng *rand.Rand, j int) ([]byte, bool) {
			if j%2 == 1 {
				return randomBytes(rng, 200), false
			}
			// A valid message with random bytes written over part of it.
			b := append([]byte(nil), fam...)
			for k := 0; k < 1+rng.IntN(4); k++ {
				b[16+rng.IntN(len(b)-16)] = byte(rng.IntN(256))
			}
			return b, true
		},
		good: func(h *harness) string {
			step{fam, nil}.run(h)
			return "findAndModify"
		},
	})
}

func TestBSONWalkRejectsBadDocuments(t *testing.T) {
	good := bsonDoc(t, bson.D{{Key: "a", Value: "x"}, {Key: "b", Value: bson.D{{Key: "c", Value: 1}}}})
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 20000; i++ {
		b := append([]byte(nil), good[:rng.IntN(len(good)+1)]...)
		if len(b) > 0 && rng.IntN(2) == 0 {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		bsonWalk(b, func(byte, string, []byte) bool { return true })
		_ = bsonText(b)
		_ = mongoCommitted(b)
	}
	if !bsonWalk(good, func(byte, string, []byte) bool { return true }) {
		t.Fatal("a good document did not walk")
	}
}

func FuzzMongoRequest(f *testing.F) {
	f.Add(append(mongoHandshake(f).req, mongoFindAndModify(f, 5)...), uint8(3))
	f.Add(mongoUpdate(f, 6), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, max uint8) {
		whole := mongoRequestTrace(Mongo{}.NewConn().(*mongoConn), [][]byte{b})
		rng := rand.New(rand.NewPCG(uint64(max), uint64(len(b))))
		if got := mongoRequestTrace(Mongo{}.NewConn().(*mongoConn), chunk(rng, b, 1+int(max))); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", 1+int(max), got, whole)
		}
	})
}

func FuzzMongoReply(f *testing.F) {
	f.Add(append(mongoHandshake(f).rep, mongoOK(f, 300, 5)...), uint8(3))
	f.Add(opMsg(202, 6, 0, bsonDoc(f, bson.D{{Key: "n", Value: 0}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "code", Value: 1}}}}, {Key: "ok", Value: 1.0}})), uint8(9))
	f.Fuzz(func(t *testing.T, b []byte, max uint8) {
		armed := []int32{1, 2, 5, 6, 7}
		whole := mongoReplyTrace(armed, [][]byte{b})
		rng := rand.New(rand.NewPCG(uint64(max), uint64(len(b))))
		if got := mongoReplyTrace(armed, chunk(rng, b, 1+int(max))); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", 1+int(max), got, whole)
		}
	})
}

// FuzzMongoHalves runs any client and server bytes through both halves of the toxic.
func FuzzMongoHalves(f *testing.F) {
	f.Add(mongoFindAndModify(f, 5), mongoOK(f, 300, 5), uint64(1))
	f.Add(append(mongoHandshake(f).req, mongoUpdate(f, 6)...), append(mongoHandshake(f).rep, mongoOK(f, 300, 6)...), uint64(2))
	f.Fuzz(func(t *testing.T, cli, srv []byte, seed uint64) {
		checkFuzzHalves(t, Mongo{}, seed, cli, srv)
	})
}
