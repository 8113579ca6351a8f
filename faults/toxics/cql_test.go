package toxics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Builders of CQL messages for the framer's tests, written from the protocol
// specification (native_protocol_v4.spec, native_protocol_v5.spec).

func cqlEnv(version byte, response bool, flags byte, stream int16, op byte, body ...[]byte) []byte {
	v := version
	if response {
		v |= 0x80
	}
	b := []byte{v, flags, 0, 0, op, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(stream))
	p := bytes.Join(body, nil)
	binary.BigEndian.PutUint32(b[5:], uint32(len(p)))
	return append(b, p...)
}

func cqlStr(s string) []byte     { return append(i16(len(s)), s...) }
func cqlLongStr(s string) []byte { return append(i32(len(s)), s...) }
func cqlShortBytes(b []byte) []byte {
	return append(i16(len(b)), b...)
}
func cqlBytes(b []byte) []byte {
	if b == nil {
		return i32(-1)
	}
	return append(i32(len(b)), b...)
}

func cqlStrMap(kv ...string) []byte {
	b := i16(len(kv) / 2)
	for _, s := range kv {
		b = append(b, cqlStr(s)...)
	}
	return b
}

// Requests, protocol v4 unless the version says otherwise.

func cqlStartupV(version byte, stream int16, kv ...string) []byte {
	return cqlEnv(version, false, 0, stream, cqlOpStartup, cqlStrMap(append([]string{"CQL_VERSION", "3.0.0"}, kv...)...))
}

func cqlOptionsReq(version byte, stream int16) []byte {
	return cqlEnv(version, false, 0, stream, cqlOpOptions)
}

// queryParams are <consistency><flags> with no values (v4: a byte of flags, v5: an int).
func queryParams(version byte, consistency int) []byte {
	if version >= 5 {
		return append(i16(consistency), i32(0)...)
	}
	return append(i16(consistency), 0)
}

func cqlQueryV(version byte, stream int16, stmt string) []byte {
	return cqlEnv(version, false, 0, stream, cqlOpQuery, cqlLongStr(stmt), queryParams(version, 4))
}

func cqlQuery(stream int16, stmt string) []byte { return cqlQueryV(4, stream, stmt) }

func cqlPrepareReq(stream int16, stmt string) []byte {
	return cqlEnv(4, false, 0, stream, cqlOpPrepare, cqlLongStr(stmt))
}

// cqlExecuteReq sends the prepared id with one bound value, at consistency QUORUM with
// serial consistency SERIAL (as gocql does for an LWT).
func cqlExecuteReq(stream int16, id []byte) []byte {
	params := []byte{0, 4, 0x01 | 0x10}
	params = append(params, i16(1)...)
	params = append(params, cqlBytes([]byte{0, 0, 0, 7})...)
	params = append(params, i16(8)...)
	return cqlEnv(4, false, 0, stream, cqlOpExecute, cqlShortBytes(id), params)
}

// batchEntry is a statement of a BATCH: a query string, or a prepared id.
type batchEntry struct {
	stmt string
	id   []byte
}

func cqlBatchReq(stream int16, typ byte, entries ...batchEntry) []byte {
	b := []byte{typ}
	b = append(b, i16(len(entries))...)
	for _, e := range entries {
		if e.id != nil {
			b = append(b, 1)
			b = append(b, cqlShortBytes(e.id)...)
		} else {
			b = append(b, 0)
			b = append(b, cqlLongStr(e.stmt)...)
		}
		b = append(b, i16(2)...)
		b = append(b, cqlBytes([]byte("a"))...)
		b = append(b, i32(-1)...)
	}
	b = append(b, i16(4)...)
	b = append(b, 0)
	return cqlEnv(4, false, 0, stream, cqlOpBatch, b)
}

func cqlRegisterReq(stream int16) []byte {
	return cqlEnv(4, false, 0, stream, cqlOpRegister, i16(2), cqlStr("STATUS_CHANGE"), cqlStr("SCHEMA_CHANGE"))
}

// Replies.

func cqlReadyV(version byte, stream int16) []byte {
	return cqlEnv(version, true, 0, stream, cqlOpReady)
}

func cqlSupported(version byte, stream int16) []byte {
	return cqlEnv(version, true, 0, stream, cqlOpSupported, i16(1), cqlStr("COMPRESSION"), i16(2), cqlStr("lz4"), cqlStr("snappy"))
}

func cqlVoidV(version byte, stream int16) []byte {
	return cqlEnv(version, true, 0, stream, cqlOpResult, i32(cqlResultVoid))
}

func cqlVoid(stream int16) []byte { return cqlVoidV(4, stream) }

func cqlSetKeyspace(stream int16, ks string) []byte {
	return cqlEnv(4, true, 0, stream, cqlOpResult, i32(3), cqlStr(ks))
}

func cqlSchemaChange(stream int16) []byte {
	return cqlEnv(4, true, 0, stream, cqlOpResult, i32(cqlResultSchemaChange), cqlStr("CREATED"), cqlStr("TABLE"), cqlStr("ks"), cqlStr("t"))
}

// cqlRows is a Rows result with full metadata (one table spec per column), the given
// column names (the first a boolean, the rest bigint) and rows of values.
func cqlRowsV(version byte, stream int16, flags byte, names []string, rows ...[][]byte) []byte {
	body := i32(cqlResultRows)
	body = append(body, i32(0)...)
	body = append(body, i32(len(names))...)
	for i, n := range names {
		body = append(body, cqlStr("ks")...)
		body = append(body, cqlStr("budget")...)
		body = append(body, cqlStr(n)...)
		if i == 0 && n == "[applied]" {
			body = append(body, i16(0x0004)...)
		} else {
			body = append(body, i16(0x0002)...)
		}
	}
	body = append(body, i32(len(rows))...)
	for _, r := range rows {
		for _, v := range r {
			body = append(body, cqlBytes(v)...)
		}
	}
	var prefix []byte
	if flags&cqlFlagWarning != 0 {
		prefix = append(i16(1), cqlStr("Batch is large")...)
	}
	if flags&cqlFlagTracing != 0 {
		prefix = append(bytes.Repeat([]byte{0xab}, 16), prefix...)
	}
	return cqlEnv(version, true, flags, stream, cqlOpResult, prefix, body)
}

func cqlLWT(stream int16, applied bool) []byte {
	if applied {
		return cqlRowsV(4, stream, 0, []string{"[applied]"}, [][]byte{{1}})
	}
	return cqlRowsV(4, stream, 0, []string{"[applied]", "balance"}, [][]byte{{0}, {0, 0, 0, 0, 0, 0, 0, 9}})
}

// cqlLWTNoMetadata is an LWT answer with the No_metadata flag (a client asked to skip it).
func cqlLWTNoMetadata(stream int16, applied bool) []byte {
	v := byte(0)
	if applied {
		v = 1
	}
	return cqlEnv(4, true, 0, stream, cqlOpResult, i32(cqlResultRows), i32(0x0004), i32(1), i32(1), cqlBytes([]byte{v}))
}

func cqlPrepared(stream int16, id []byte) []byte {
	// id, then bind metadata (flags Global_tables_spec, 1 column, 1 pk index, table
	// spec, column), then empty result metadata (No_metadata, 0 columns).
	meta := bytes.Join([][]byte{i32(1), i32(1), i32(1), i16(0), cqlStr("ks"), cqlStr("budget"), cqlStr("account"), i16(0x000D)}, nil)
	return cqlEnv(4, true, 0, stream, cqlOpResult, i32(cqlResultPrepared), cqlShortBytes(id), meta, i32(0x0004), i32(0))
}

func cqlError(stream int16, code int, msg string) []byte {
	return cqlEnv(4, true, 0, stream, cqlOpError, i32(code), cqlStr(msg))
}

func cqlEvent() []byte {
	return cqlEnv(4, true, 0, -1, cqlOpEvent, cqlStr("STATUS_CHANGE"), cqlStr("UP"), []byte{4, 127, 0, 0, 1}, i32(9042))
}

// v5 segments.

// cqlSegment wraps a payload in an uncompressed v5 segment.
func cqlSegment(payload []byte, self bool) []byte {
	v := uint32(len(payload))
	if self {
		v |= 1 << 17
	}
	crc := cqlCRC24(v)
	b := []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(crc), byte(crc >> 8), byte(crc >> 16)}
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, cqlCRC32(payload))
}

// cqlFramed packs envelopes into one self-contained segment, or splits one long
// envelope into segments of at most max payload bytes.
func cqlFramed(max int, envs ...[]byte) []byte {
	all := bytes.Join(envs, nil)
	if len(all) <= max {
		return cqlSegment(all, true)
	}
	var out []byte
	for len(all) > 0 {
		n := min(max, len(all))
		out = append(out, cqlSegment(all[:n], false)...)
		all = all[n:]
	}
	return out
}

// cqlUnitRec is one unit as a framer reports it, whole or reassembled from the pieces
// it streamed, so that any chunking compares equal.
type cqlUnitRec struct {
	Opaque bool
	Piece  bool     // a streamed envelope, reassembled: Raw holds its input bytes
	Envs   []string // whole envelopes: "op/stream/version/len:body"
	Raw    string
}

func envRec(e cqlEnvelope) string {
	return fmt.Sprintf("%d/%d/%d/%d:%x", e.opcode, e.stream, e.version, len(e.body), e.body)
}

func runCQLFramer(f *cqlFramer, chunks [][]byte) []cqlUnitRec {
	var out []cqlUnitRec
	var piece, opaque []byte
	feed(chunks, func(b []byte) int {
		u, ok := f.next(b)
		if !ok {
			return 0
		}
		raw := b[:u.n]
		switch {
		case u.opaque:
			opaque = append(opaque, raw...)
		case u.piece:
			piece = append(piece, raw...)
			if f.lf.skip == 0 && f.chain == 0 {
				out = append(out, cqlUnitRec{Piece: true, Raw: string(piece)})
				piece = nil
			}
		default:
			r := cqlUnitRec{}
			for _, e := range u.envs {
				r.Envs = append(r.Envs, envRec(e))
			}
			out = append(out, r)
		}
		return u.n
	})
	if len(opaque) > 0 {
		out = append(out, cqlUnitRec{Opaque: true, Raw: string(opaque)})
	}
	return out
}

func cqlRecKinds(us []cqlUnitRec) string {
	var b strings.Builder
	for _, u := range us {
		switch {
		case u.Opaque:
			fmt.Fprintf(&b, "opaque(%d) ", len(u.Raw))
		case u.Piece:
			fmt.Fprintf(&b, "streamed(%d) ", len(u.Raw))
		default:
			fmt.Fprintf(&b, "[")
			for i, e := range u.Envs {
				if i > 0 {
					b.WriteByte(' ')
				}
				op, _, _ := strings.Cut(e, "/")
				b.WriteString(op)
			}
			b.WriteString("] ")
		}
	}
	return b.String()
}

var bigStmt = "INSERT INTO ks.blobs (k, v) VALUES ('k', '" + strings.Repeat("x", 200<<10) + "')"

func cqlClientV4() []byte {
	return bytes.Join([][]byte{
		cqlOptionsReq(4, 0),
		cqlStartupV(4, 1),
		cqlRegisterReq(2),
		cqlQuery(3, "SELECT * FROM system.local WHERE key='local'"),
		cqlPrepareReq(4, "UPDATE ks.budget SET balance = ? WHERE account = ? IF balance = ?"),
		cqlExecuteReq(5, []byte{1, 2, 3}),
		cqlBatchReq(6, 0, batchEntry{stmt: "INSERT INTO ks.t (a) VALUES (?)"}, batchEntry{id: []byte{9}}),
		cqlQuery(7, bigStmt),
		cqlEnv(4, false, 0, 8, cqlOpAuthResponse, cqlBytes(bytes.Repeat([]byte("t"), 70<<10))),
	}, nil)
}

func cqlServerV4() []byte {
	return bytes.Join([][]byte{
		cqlSupported(4, 0),
		cqlReadyV(4, 1),
		cqlReadyV(4, 2),
		cqlEvent(),
		cqlRowsV(4, 3, cqlFlagTracing|cqlFlagWarning, []string{"key", "x"}, [][]byte{{1}, bytes.Repeat([]byte("r"), 80<<10)}),
		cqlPrepared(4, []byte{1, 2, 3}),
		cqlLWT(5, true),
		cqlError(6, 0x1100, "write timeout"),
		cqlVoid(7),
	}, nil)
}

func cqlClientV5() []byte {
	return bytes.Join([][]byte{
		cqlFramed(cqlMaxPayload, cqlQueryV(5, 1, "SELECT * FROM t"), cqlQueryV(5, 2, "UPDATE t SET x = 1 WHERE k = 1")),
		cqlFramed(cqlMaxPayload, cqlQueryV(5, 3, bigStmt)),
		cqlFramed(cqlMaxPayload, cqlEnv(5, false, 0, 4, cqlOpAuthResponse, cqlBytes(bytes.Repeat([]byte("t"), 150<<10)))),
		cqlFramed(cqlMaxPayload, cqlEnv(5, false, 0, 5, cqlOpOptions)),
		cqlSegment(nil, true),
	}, nil)
}

func cqlServerV5() []byte {
	return bytes.Join([][]byte{
		cqlFramed(cqlMaxPayload, cqlRowsV(5, 1, 0, []string{"x"}, [][]byte{{1}}), cqlVoidV(5, 2)),
		cqlFramed(cqlMaxPayload, cqlRowsV(5, 4, 0, []string{"key", "x"}, [][]byte{{1}, bytes.Repeat([]byte("r"), 150<<10)})),
		cqlFramed(cqlMaxPayload, cqlVoidV(5, 3)),
	}, nil)
}

func TestCQLFramerChunking(t *testing.T) {
	matters := func(h cqlHeader) bool { return h.opcode != cqlOpResult && h.opcode != cqlOpAuthResponse }
	for _, tt := range []struct {
		name     string
		response bool
		phase    cqlPhase
		stream   []byte
		want     string
	}{
		{"v4 client", false, cqlEnvelopes, cqlClientV4(), "[5] [1] [11] [7] [9] [10] [13] [7] streamed(71693) "},
		{"v4 server", true, cqlEnvelopes, cqlServerV4(), "[6] [2] [2] [12] streamed(82024) [8] [8] [0] [8] "},
		{"v5 client", false, cqlSegments, cqlClientV5(), "[7 7] [7] streamed(153633) [5] [] "},
		{"v5 server", true, cqlSegments, cqlServerV5(), "[8 8] streamed(153690) [8] "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newF := func() *cqlFramer { return &cqlFramer{response: tt.response, phase: tt.phase, matters: matters} }
			want := runCQLFramer(newF(), [][]byte{tt.stream})
			if got := cqlRecKinds(want); got != tt.want {
				t.Fatalf("whole stream: %s, want %s", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 24; i++ {
				max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
				got := runCQLFramer(newF(), chunk(rng, tt.stream, max))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("chunks up to %d bytes: units differ\n got %s\nwant %s", max, cqlRecKinds(got), cqlRecKinds(want))
				}
			}
		})
	}
}

func TestCQLFramerRejects(t *testing.T) {
	good := cqlFramed(cqlMaxPayload, cqlQueryV(5, 1, "SELECT 1"))
	badHeaderCRC := append([]byte(nil), good...)
	badHeaderCRC[4] ^= 1
	badPayloadCRC := append([]byte(nil), good...)
	badPayloadCRC[len(badPayloadCRC)-1] ^= 1
	tests := []struct {
		name     string
		response bool
		phase    cqlPhase
		stream   []byte
		want     string
	}{
		{"v4 request with the reply bit", false, cqlEnvelopes, cqlVoid(1), "opaque(13) "},
		{"v2 header", false, cqlEnvelopes, []byte{2, 0, 1, 7, 0, 0, 0, 0, 0}, "opaque(9) "},
		{"reply opcode upstream", false, cqlEnvelopes, cqlEnv(4, false, 0, 1, cqlOpResult, i32(1)), "opaque(13) "},
		{"negative length", true, cqlEnvelopes, []byte{0x84, 0, 0, 1, 8, 0xff, 0, 0, 0}, "opaque(9) "},
		{"good then garbage", false, cqlEnvelopes, append(cqlQuery(1, "SELECT 1"), "GET / HTTP/1.1\r\n"...), "[7] opaque(16) "},
		{"segment header crc", false, cqlSegments, badHeaderCRC, fmt.Sprintf("opaque(%d) ", len(good))},
		{"segment payload crc", false, cqlSegments, badPayloadCRC, fmt.Sprintf("opaque(%d) ", len(good))},
		{"v4 envelope inside a segment", false, cqlSegments, cqlFramed(cqlMaxPayload, cqlQuery(1, "SELECT 1")), "opaque(34) "},
		{"envelope past the segment", false, cqlSegments, cqlSegment(cqlQueryV(5, 1, "SELECT 1")[:15], true), "opaque(25) "},
		{"unframed envelope where segments are due", false, cqlSegments, cqlQueryV(5, 1, "SELECT 1"), "opaque(27) "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newF := func() *cqlFramer { return &cqlFramer{response: tt.response, phase: tt.phase} }
			got := cqlRecKinds(runCQLFramer(newF(), [][]byte{tt.stream}))
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 20; i++ {
				if g := cqlRecKinds(runCQLFramer(newF(), chunk(rng, tt.stream, 3))); g != got {
					t.Fatalf("chunked: got %q, want %q", g, got)
				}
			}
		})
	}
}

func TestCQLCRC(t *testing.T) {
	// A self-contained segment with an empty payload, as the Java driver and Cassandra
	// encode it: header 00 00 02, its CRC24, and the CRC32 of nothing (seeded).
	seg := cqlSegment(nil, true)
	if len(seg) != 10 || seg[0] != 0 || seg[1] != 0 || seg[2] != 2 {
		t.Fatalf("segment % x", seg)
	}
	// Independent bitwise CRC32 (reflected polynomial 0xEDB88320) over the 4 seed bytes
	// and the payload.
	slow := func(p []byte) uint32 {
		crc := ^uint32(0)
		for _, b := range append([]byte{0xfa, 0x2d, 0x55, 0xca}, p...) {
			crc ^= uint32(b)
			for i := 0; i < 8; i++ {
				if crc&1 != 0 {
					crc = crc>>1 ^ 0xEDB88320
				} else {
					crc >>= 1
				}
			}
		}
		return ^crc
	}
	for _, p := range [][]byte{nil, []byte("a"), cqlQueryV(5, 1, "SELECT 1")} {
		if got, want := cqlCRC32(p), slow(p); got != want {
			t.Errorf("crc32(%x) = %08x, want %08x", p, got, want)
		}
	}
	// CRC24 stays within 24 bits and tells header values apart.
	seen := map[uint32]uint32{}
	for v := uint32(0); v < 1<<18; v += 37 {
		c := cqlCRC24(v)
		if c>>24 != 0 {
			t.Fatalf("crc24(%x) = %x: more than 24 bits", v, c)
		}
		if w, dup := seen[c]; dup {
			t.Fatalf("crc24(%x) = crc24(%x)", v, w)
		}
		seen[c] = v
	}
}

func TestClassifyCQL(t *testing.T) {
	tests := []struct {
		stmt string
		want cqlClass
	}{
		{"INSERT INTO t (a) VALUES (1)", cqlWrite},
		{"  update t set a = 1 where k = 1 IF a = 0", cqlWrite},
		{"DELETE FROM t WHERE k = 1 IF EXISTS", cqlWrite},
		{"-- note\nUPDATE t SET a = 1", cqlWrite},
		{"// note\n/* more */ insert into t (a) values (1)", cqlWrite},
		{"/* CQL comments /* do not nest */ DELETE FROM t WHERE k = 1", cqlWrite},
		{"BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (1); APPLY BATCH", cqlWrite},
		{"TRUNCATE t", cqlWrite},
		{"SELECT balance FROM t WHERE account = ?", cqlRead},
		{"SELECT * FROM system.local WHERE key='local'", cqlRead},
		{"select * from system.peers", cqlRead},
		{"USE ks", cqlRead},
		{"LIST ROLES", cqlRead},
		{"CREATE TABLE IF NOT EXISTS t (a int PRIMARY KEY)", cqlSchema},
		{"DROP KEYSPACE ks", cqlSchema},
		{"GRANT SELECT ON ks.t TO r", cqlSchema},
		{"", cqlRead},
		{"/* unterminated", cqlRead},
		{"'INSERT'", cqlRead},
	}
	for _, tt := range tests {
		if got := classifyCQL(tt.stmt); got != tt.want {
			t.Errorf("classifyCQL(%q) = %d, want %d", tt.stmt, got, tt.want)
		}
	}
}

// The conversations below run through the generic halves of commit.go, driven by the
// harness of commit_test.go.

func newCQLCommits(t *testing.T, seed int64, match func(string) bool) (*Commits, *[]Event) {
	t.Helper()
	return newProtoCommits(t, CQL{}, seed, match)
}

// cqlHandshake runs OPTIONS and STARTUP for a protocol version and returns the bytes
// each side sent.
func cqlHandshake(h *harness, version byte, startup ...string) (cli, srv []byte) {
	steps := []step{
		{cqlOptionsReq(version, 0), cqlSupported(version, 0)},
		{cqlStartupV(version, 1, startup...), cqlReadyV(version, 1)},
	}
	for _, s := range steps {
		s.run(h)
	}
	return join(steps, false), join(steps, true)
}

// A prepared statement the tests execute.
func preparedSteps(stream int16, id []byte, stmt string) []step {
	return []step{{cqlPrepareReq(stream, stmt), cqlPrepared(stream, id)}}
}

func cqlLWTSteps(id []byte, applied bool) []step {
	const lwt = "UPDATE ks.budget SET balance = ? WHERE account = ? IF balance = ?"
	return append(preparedSteps(2, id, lwt),
		step{cqlQuery(3, "SELECT balance FROM ks.budget WHERE account = 'a' LIMIT 1"), cqlRowsV(4, 3, 0, []string{"balance"}, [][]byte{{0, 0, 0, 0, 0, 0, 0, 9}})},
		step{cqlExecuteReq(4, id), cqlLWT(4, applied)})
}

// TestCQLPreparedIDsPerProxy: a prepared id learned through one proxy names a write on
// every connection of that proxy, and on none of another proxy in the same process (it
// may front another server, where the same id means something else or nothing).
func TestCQLPreparedIDsPerProxy(t *testing.T) {
	const stmt = "UPDATE ks.t SET v = ? WHERE k = ?"
	id := []byte("shared-id")
	a, evsA := newCQLCommits(t, 1, nil)
	b, evsB := newCQLCommits(t, 1, nil)
	ha := newHarness(t, a, 1, 1<<10)
	cqlHandshake(ha, 4)
	for _, s := range preparedSteps(2, id, stmt) {
		s.run(ha)
	}
	a.Faults.Drop.Set(1, 0)
	b.Faults.Drop.Set(1, 0)

	hb := newHarness(t, b, 2, 1<<10)
	cqlHandshake(hb, 4)
	step{cqlExecuteReq(3, id), cqlVoid(3)}.run(hb)
	if len(*evsB) != 0 || hb.up.closed {
		t.Fatalf("the other proxy dropped an EXECUTE of an id it never saw prepared: %+v", *evsB)
	}

	ha2 := newHarness(t, a, 3, 1<<10)
	cqlHandshake(ha2, 4)
	step{cqlExecuteReq(3, id), cqlVoid(3)}.run(ha2)
	if len(*evsA) != 1 || (*evsA)[0].Statement != stmt || !ha2.up.closed {
		t.Fatalf("events %+v, want the EXECUTE on another connection of the same proxy dropped as %q", *evsA, stmt)
	}
}

func TestCQLHalvesPassEverythingWhenDisarmed(t *testing.T) {
	steps := append(cqlLWTSteps([]byte("disarmed"), true),
		step{cqlQuery(5, bigStmt[:66<<10]+"')"), cqlVoid(5)},
		step{cqlQuery(6, "SELECT * FROM ks.big"), cqlRowsV(4, 6, 0, []string{"k", "v"}, [][]byte{{1}, bytes.Repeat([]byte("v"), 66<<10)})})
	// Chunks of 2 bytes at most: the harness's channels hold 64Ki chunks.
	checkPassesDisarmed(t, CQL{}, []int{2, 3, 64, 32 << 10}, func(h *harness) (cli, srv []byte) { return cqlHandshake(h, 4) }, steps)
}

func TestCQLCommitFaults(t *testing.T) {
	const lwt = "UPDATE ks.budget SET balance = ? WHERE account = ? IF balance = ?"
	insert := "INSERT INTO ks.t (k, v) VALUES (1, 2)"
	id := func(i int) []byte { return []byte(fmt.Sprintf("faults-%d", i)) }
	cql4 := func(h *harness) (cli, srv []byte) { return cqlHandshake(h, 4) }
	runFaultCases(t, faultRun{proto: CQL{}, name: "cql", hello: cql4}, []faultCase{
		{"drop query", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{{cqlQuery(2, insert), cqlVoid(2)}}, 0, 0, 0, CommitDrop, insert, ""},
		{"cut query", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{cqlQuery(2, insert), cqlVoid(2)}}, 0, -1, 0, CommitCut, insert, "RESULT Void"},
		{"drop lwt execute", func(f *Faults) { f.Drop.Set(1, 0) },
			cqlLWTSteps(id(2), true), 2, 0, 0, CommitDrop, lwt, ""},
		{"cut lwt execute", func(f *Faults) { f.Cut.Set(1, 0) },
			cqlLWTSteps(id(3), true), 2, -1, 0, CommitCut, lwt, "RESULT Rows [applied]=true"},
		{"cut lwt without metadata, after an event and another stream's reply", func(f *Faults) { f.Cut.Set(1, 0) },
			append(preparedSteps(2, id(4), lwt),
				step{append(cqlQuery(3, "SELECT 1 FROM t"), cqlExecuteReq(4, id(4))...),
					bytes.Join([][]byte{cqlEvent(), cqlRowsV(4, 3, 0, []string{"x"}, [][]byte{{1}}), cqlLWTNoMetadata(4, true)}, nil)}),
			1, -1, len(cqlEvent()) + len(cqlRowsV(4, 3, 0, []string{"x"}, [][]byte{{1}})), CommitCut, lwt, "RESULT Rows [applied]=true"},
		{"cut batch of prepared statements", func(f *Faults) { f.Cut.Set(1, 0) },
			append(preparedSteps(2, id(5), lwt),
				step{cqlBatchReq(3, 0, batchEntry{id: id(5)}, batchEntry{stmt: "INSERT INTO ks.budget (account, op) VALUES (?, ?)"}), cqlLWT(3, true)}),
			1, -1, 0, CommitCut, "BEGIN BATCH " + lwt + "; INSERT INTO ks.budget (account, op) VALUES (?, ?); APPLY BATCH", "RESULT Rows [applied]=true"},
		{"drop batch with an unknown id", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{{cqlBatchReq(3, 1, batchEntry{id: []byte{0xde, 0xad}}), cqlVoid(3)}},
			0, 0, 0, CommitDrop, "BEGIN UNLOGGED BATCH <prepared dead>; APPLY BATCH", ""},
		{"cut a warned and traced lwt", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{cqlQuery(2, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS"),
				cqlRowsV(4, 2, cqlFlagTracing|cqlFlagWarning, []string{"[applied]"}, [][]byte{{1}})}},
			0, -1, 0, CommitCut, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS", "RESULT Rows [applied]=true"},
	})
}

// TestCQLArmedCutsEndUnfired: an LWT that did not apply, an error, a result that
// proves nothing: the reply goes on whole, nothing fires, and the cap's reservation is
// returned each time, so the last write is cut.
func TestCQLArmedCutsEndUnfired(t *testing.T) {
	const lwt = "UPDATE ks.budget SET balance = ? WHERE account = ? IF balance = ?"
	id := []byte("unfired")
	for _, max := range []int{1, 7, 32 << 10} {
		c, evs := newCQLCommits(t, 1, nil)
		c.Faults.Cut.Set(1, 1)
		h := newHarness(t, c, uint64(max), max)
		cqlHandshake(h, 4)
		steps := append(preparedSteps(2, id, lwt),
			step{cqlExecuteReq(3, id), cqlLWT(3, false)},
			step{cqlExecuteReq(4, id), cqlLWTNoMetadata(4, false)},
			step{cqlQuery(5, "UPDATE t SET x = 1 WHERE k = 1"), cqlError(5, 0x1100, "Operation timed out - received only 0 responses.")},
			step{cqlQuery(6, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS"), cqlRowsV(4, 6, 0, []string{"k"}, [][]byte{{1}})},
			step{cqlQuery(7, "INSERT INTO t (k) VALUES (2) IF NOT EXISTS"), cqlEnv(4, true, 0, 7, cqlOpResult, i32(cqlResultRows), i32(0))},
		)
		for _, s := range steps {
			s.run(h)
		}
		got, closed := drain(h.dnOut)
		if !bytes.HasSuffix(got, join(steps, true)) || closed || len(*evs) != 0 {
			t.Fatalf("chunks %d: forwarded %q closed %v events %v; want every reply forwarded, no event", max, tail(got), closed, *evs)
		}
		step{cqlQuery(8, "DELETE FROM t WHERE k = 1"), cqlVoid(8)}.run(h)
		if _, closed := drain(h.dnOut); !closed || len(*evs) != 1 {
			t.Fatalf("chunks %d: after the unfired cuts: closed %v events %v, want a cut", max, closed, *evs)
		}
	}
}

func TestCQLPointsAndNonPoints(t *testing.T) {
	tests := []struct {
		name  string
		match func(string) bool
		steps []step
		fire  bool // whether a drop armed at 1 fires on the last request
	}{
		{"serial read: no point", nil, []step{{cqlEnv(4, false, 0, 2, cqlOpQuery, cqlLongStr("SELECT balance FROM ks.budget WHERE account = ?"), []byte{0, 8, 0}), nil}}, false},
		{"control connection reads: no point", nil, []step{
			{cqlRegisterReq(2), cqlReadyV(4, 2)},
			{cqlQuery(3, "SELECT * FROM system.peers"), nil},
		}, false},
		{"use keyspace: no point", nil, []step{{cqlQuery(2, "USE ks"), cqlSetKeyspace(2, "ks")}, {cqlQuery(3, "USE ks"), nil}}, false},
		{"prepare of a write: no point", nil, []step{{cqlPrepareReq(2, "UPDATE t SET x = ? WHERE k = 1"), nil}}, false},
		{"execute of a read: no point", nil, []step{
			{cqlPrepareReq(2, "SELECT x FROM t WHERE k = ?"), cqlPrepared(2, []byte("read-id"))},
			{cqlExecuteReq(3, []byte("read-id")), nil},
		}, false},
		{"execute of an id never prepared here: no point", nil, []step{{cqlExecuteReq(2, []byte("never-seen")), nil}}, false},
		{"prepare that failed teaches nothing", nil, []step{
			{cqlPrepareReq(2, "UPDATE t SET x = ? WHERE k = 1"), cqlError(2, 0x2000, "syntax")},
			{cqlExecuteReq(3, []byte("failed-id")), nil},
		}, false},
		{"schema change: not by default", nil, []step{{cqlQuery(2, "CREATE TABLE t (k int PRIMARY KEY)"), nil}}, false},
		{"schema change: through a match", func(s string) bool { return strings.HasPrefix(s, "CREATE") },
			[]step{{cqlQuery(2, "CREATE TABLE t (k int PRIMARY KEY)"), nil}}, true},
		{"match passes over other writes", func(s string) bool { return strings.Contains(s, "budget") },
			[]step{{cqlQuery(2, "INSERT INTO ks.other (k) VALUES (1)"), cqlVoid(2)}, {cqlQuery(3, "SELECT * FROM ks.budget"), nil}}, false},
		{"write with a custom payload", nil, []step{{cqlEnv(4, false, cqlFlagCustomPayload, 2, cqlOpQuery,
			i16(1), cqlStr("k"), cqlBytes([]byte("v")), cqlLongStr("INSERT INTO t (k) VALUES (1)"), queryParams(4, 1)), nil}}, true},
		{"compressed body: no guess", nil, []step{{cqlEnv(4, false, cqlFlagCompressed, 2, cqlOpQuery, []byte{0, 0, 0, 9, 1, 2, 3}), nil}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, evs := newCQLCommits(t, 1, tt.match)
			c.Faults.Drop.Set(1, 0)
			h := newHarness(t, c, 1, 1<<10)
			cqlHandshake(h, 4)
			for _, s := range tt.steps {
				s.run(h)
			}
			if got := len(*evs) == 1; got != tt.fire {
				t.Errorf("fired %v (%+v), want %v", got, *evs, tt.fire)
			}
		})
	}
}

func TestCQLCompressionPassesThrough(t *testing.T) {
	for _, version := range []byte{4, 5} {
		c, evs := newCQLCommits(t, 1, nil)
		c.Faults.Mixed.Set(1, 0)
		h := newHarness(t, c, 1, 1<<10)
		cli, srv := cqlHandshake(h, version, "COMPRESSION", "lz4")
		// Whatever follows is not parsed: not even a plain write is a point.
		s := step{cqlQueryV(version, 2, "INSERT INTO t (k) VALUES (1)"), cqlVoidV(version, 2)}
		s.run(h)
		gotUp, _ := drain(h.upOut)
		gotDn, _ := drain(h.dnOut)
		if !bytes.Equal(gotUp, append(cli, s.req...)) || !bytes.Equal(gotDn, append(srv, s.rep...)) || len(*evs) != 0 {
			t.Errorf("v%d with compression: events %v, forwarded %d/%d bytes", version, *evs, len(gotUp), len(gotDn))
		}
	}
}

// TestCQLv5 follows a v5 connection: unframed handshake, then segments.
func TestCQLv5(t *testing.T) {
	insert := "INSERT INTO t (k) VALUES (1)"
	seg := func(envs ...[]byte) []byte { return cqlFramed(cqlMaxPayload, envs...) }
	cql5 := func(h *harness) (cli, srv []byte) { return cqlHandshake(h, 5) }
	runFaultCases(t, faultRun{proto: CQL{}, name: "cql", hello: cql5, maxes: []int{1, 9, 32 << 10}}, []faultCase{
		{"cut a write in a segment", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{seg(cqlQueryV(5, 2, "SELECT * FROM t")), seg(cqlRowsV(5, 2, 0, []string{"x"}, [][]byte{{1}}))},
				{seg(cqlQueryV(5, 3, insert)), seg(cqlVoidV(5, 3))}},
			1, -1, 0, CommitCut, insert, "RESULT Void"},
		{"drop a write in a segment", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{{seg(cqlQueryV(5, 3, insert)), seg(cqlVoidV(5, 3))}},
			0, 0, 0, CommitDrop, insert, ""},
		{"drop a long write spanning segments", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{{seg(cqlEnv(5, false, 0, 2, cqlOpOptions)), seg(cqlSupported(5, 2))},
				{seg(cqlQueryV(5, 3, bigStmt)), nil}},
			1, 0, 0, CommitDrop, shorten(bigStmt, 256), ""},
		{"cut with the proof in a long reply", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{seg(cqlQueryV(5, 3, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS")),
				seg(cqlRowsV(5, 3, cqlFlagWarning, []string{"[applied]", "big"}, [][]byte{{1}, bytes.Repeat([]byte("b"), 140<<10)}))}},
			0, -1, 0, CommitCut, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS", "RESULT Rows [applied]=true"},
		{"two writes in one segment: dropped together", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{{seg(cqlQueryV(5, 2, insert), cqlQueryV(5, 3, "DELETE FROM t WHERE k = 2")), nil}},
			0, 0, 0, CommitDrop, insert, ""},
		{"two writes in one segment: not cut", func(f *Faults) { f.Cut.Set(1, 1) },
			[]step{{seg(cqlQueryV(5, 2, insert), cqlQueryV(5, 3, "DELETE FROM t WHERE k = 2")), seg(cqlVoidV(5, 2), cqlVoidV(5, 3))},
				{seg(cqlQueryV(5, 4, "UPDATE t SET x = 1 WHERE k = 3")), seg(cqlVoidV(5, 4))}},
			1, -1, 0, CommitCut, "UPDATE t SET x = 1 WHERE k = 3", "RESULT Void"},
		{"replies to two armed cuts in one segment", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{append(seg(cqlQueryV(5, 2, insert)), seg(cqlQueryV(5, 3, "DELETE FROM t WHERE k = 2"))...),
				seg(cqlEnv(5, true, 0, 2, cqlOpError, i32(0x1000), cqlStr("unavailable")), cqlVoidV(5, 3))}},
			0, -1, 0, CommitCut, "DELETE FROM t WHERE k = 2", "RESULT Void"},
	})
}

// TestCQLv5RefusedStaysUnframed: a server that answers a v5 STARTUP with an error (it
// speaks v4 at most) leaves the connection unframed.
func TestCQLv5RefusedStaysUnframed(t *testing.T) {
	c, evs := newCQLCommits(t, 1, nil)
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 3)
	step{cqlStartupV(5, 0), cqlEnv(4, true, 0, 0, cqlOpError, i32(0x000A), cqlStr("Invalid or unsupported protocol version (5)"))}.run(h)
	step{cqlStartupV(4, 0), cqlReadyV(4, 0)}.run(h)
	step{cqlQuery(1, "INSERT INTO t (k) VALUES (1)"), nil}.run(h)
	if len(*evs) != 1 || (*evs)[0].Kind != CommitDrop {
		t.Fatalf("events %+v, want the insert dropped", *evs)
	}
}

// cqlDecisions runs a connection with two LWTs.
func cqlDecisions(h *harness) {
	id := []byte("decisions")
	cqlHandshake(h, 4)
	for _, s := range append(preparedSteps(2, id, "UPDATE t SET v = ? WHERE k = 1 IF v = 0"),
		step{cqlExecuteReq(3, id), cqlLWT(3, true)}, step{cqlExecuteReq(4, id), cqlLWT(4, true)}) {
		s.run(h)
	}
}

func TestCQLDecisionsAreSeeded(t *testing.T) {
	checkSeededDecisions(t, CQL{}, cqlDecisions)
}

func TestCQLGarbageNeverPanics(t *testing.T) {
	pieces := [][]byte{
		cqlQuery(1, "INSERT INTO t (k) VALUES (1)"), cqlVoid(1), cqlLWT(1, true),
		cqlFramed(cqlMaxPayload, cqlQueryV(5, 1, "UPDATE t SET x = 1")), cqlPrepared(1, []byte{1}),
		cqlExecuteReq(1, []byte{1}), cqlBatchReq(1, 0, batchEntry{id: []byte{1}}),
	}
	const insert = "INSERT INTO ks.t (k, v) VALUES (1, 2)"
	checkGarbage(t, garbageRun{
		proto: CQL{}, seed: 5, iterations: 3000,
		hello: func(h *harness, i int) {
			switch i % 3 {
			case 1:
				cqlHandshake(h, 4)
			case 2:
				cqlHandshake(h, 5)
			}
		},
		garbage: func(rng *rand.Rand, _ int) ([]byte, bool) {
			if rng.IntN(2) == 1 {
				return randomBytes(rng, 200), false
			}
			// A valid message with random bytes flipped.
			b := append([]byte(nil), pieces[rng.IntN(len(pieces))]...)
			for k := rng.IntN(4); k > 0; k-- {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
			return b, true
		},
		good: func(h *harness) string {
			cqlHandshake(h, 4)
			step{cqlQuery(2, insert), cqlVoid(2)}.run(h)
			return insert
		},
	})
}

// Fuzz targets: every input must frame the same whatever the chunking, without panic,
// consuming no more than it was given.

// cqlFuzzConn returns a connection past a v4 or v5 handshake (by the first input
// byte), with a write armed on streams 1 to 3.
func cqlFuzzConn(version byte) (*cqlConn, []*Pending) {
	c := CQL{}.NewConn().(*cqlConn)
	feed := func(f func([]byte) (int, Verdict), b []byte) {
		for len(b) > 0 {
			n, _ := f(b)
			if n <= 0 {
				return
			}
			b = b[n:]
		}
	}
	c.Request(cqlStartupV(version, 0))
	feed(c.Reply, cqlReadyV(version, 0))
	var ps []*Pending
	for s := int16(1); s <= 3; s++ {
		q := cqlQueryV(version, s, "UPDATE t SET x = 1 WHERE k = 1")
		if version == 5 {
			q = cqlFramed(cqlMaxPayload, q)
		}
		if _, p := c.Request(q); p != nil {
			pd := &Pending{}
			if c.ExpectCut(pd) {
				ps = append(ps, pd)
			}
		}
	}
	return c, ps
}

type fuzzOutcome struct {
	consumed int
	points   []string
	cuts     []int // index of the pending each Cut named
	released []int
}

func fuzzRequests(c *cqlConn, chunks [][]byte) fuzzOutcome {
	var o fuzzOutcome
	var buf []byte
	for _, ch := range chunks {
		buf = append(buf, ch...)
		for len(buf) > 0 {
			n, p := c.Request(buf)
			if n <= 0 {
				break
			}
			if n > len(buf) {
				panic(fmt.Sprintf("consumed %d of %d bytes", n, len(buf)))
			}
			if p != nil {
				o.points = append(o.points, fmt.Sprintf("%q %v", p.Text, p.Default))
			}
			o.consumed += n
			buf = buf[n:]
		}
	}
	return o
}

func fuzzReplies(c *cqlConn, ps []*Pending, chunks [][]byte) fuzzOutcome {
	var o fuzzOutcome
	var buf []byte
	index := func(p *Pending) int {
		for i, q := range ps {
			if q == p {
				return i
			}
		}
		panic("verdict names a cut that was never armed")
	}
	for _, ch := range chunks {
		buf = append(buf, ch...)
		for len(buf) > 0 {
			n, v := c.Reply(buf)
			if n <= 0 {
				break
			}
			if n > len(buf) {
				panic(fmt.Sprintf("consumed %d of %d bytes", n, len(buf)))
			}
			switch {
			case v.Action == Cut:
				o.cuts = append(o.cuts, index(v.Pending))
			case v.Pending != nil:
				o.released = append(o.released, index(v.Pending))
			}
			o.consumed += n
			buf = buf[n:]
			if v.Action == Cut {
				return o
			}
		}
	}
	// Releases still queued would be handed back by later calls.
	for _, p := range c.released {
		o.released = append(o.released, index(p))
	}
	return o
}

func fuzzChunks(data []byte, split uint16) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(split), 1))
	return chunk(rng, data, 1+int(split%97))
}

func cqlFuzzSeeds(f *testing.F, streams ...[]byte) {
	for _, s := range streams {
		f.Add(byte(4), s, uint16(3))
	}
}

// Fuzz seeds stay small: long envelopes are split into short segments (the framer
// does not need them full), and the 64 KiB streaming threshold is left to the unit tests.

func fuzzClientV5() []byte {
	return bytes.Join([][]byte{
		cqlFramed(cqlMaxPayload, cqlQueryV(5, 1, "SELECT * FROM t"), cqlQueryV(5, 2, "UPDATE t SET x = 1 WHERE k = 1")),
		cqlFramed(40, cqlQueryV(5, 3, "INSERT INTO ks.t (k, v) VALUES (1, 'a long value that spans segments')")),
		cqlFramed(16, cqlEnv(5, false, 0, 4, cqlOpAuthResponse, cqlBytes(bytes.Repeat([]byte("t"), 40)))),
	}, nil)
}

func fuzzServerV5() []byte {
	return bytes.Join([][]byte{
		cqlFramed(cqlMaxPayload, cqlRowsV(5, 1, 0, []string{"x"}, [][]byte{{1}}), cqlVoidV(5, 2)),
		cqlFramed(30, cqlRowsV(5, 3, cqlFlagWarning, []string{"[applied]", "v"}, [][]byte{{1}, bytes.Repeat([]byte("r"), 30)})),
	}, nil)
}

func FuzzCQLRequests(f *testing.F) {
	cqlFuzzSeeds(f, bytes.Join([][]byte{
		cqlRegisterReq(2),
		cqlQuery(3, "SELECT * FROM system.local WHERE key='local'"),
		cqlPrepareReq(4, "UPDATE ks.budget SET balance = ? WHERE account = ? IF balance = ?"),
		cqlExecuteReq(5, []byte{1, 2, 3}),
	}, nil), cqlQuery(5, "INSERT INTO t (k) VALUES (1)"),
		cqlBatchReq(6, 0, batchEntry{stmt: "INSERT INTO t (a) VALUES (?)"}, batchEntry{id: []byte{9}}))
	f.Add(byte(5), fuzzClientV5(), uint16(7))
	f.Add(byte(5), cqlFramed(cqlMaxPayload, cqlQueryV(5, 2, "DELETE FROM t WHERE k = 1")), uint16(1))
	f.Fuzz(func(t *testing.T, version byte, data []byte, split uint16) {
		version = 4 + version%2
		whole, _ := cqlFuzzConn(version)
		chunked, _ := cqlFuzzConn(version)
		a := fuzzRequests(whole, [][]byte{data})
		b := fuzzRequests(chunked, fuzzChunks(data, split))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("whole %+v, chunked %+v", a, b)
		}
	})
}

func FuzzCQLReplies(f *testing.F) {
	cqlFuzzSeeds(f, bytes.Join([][]byte{
		cqlEvent(),
		cqlRowsV(4, 3, cqlFlagTracing|cqlFlagWarning, []string{"key", "x"}, [][]byte{{1}, {2}}),
		cqlPrepared(4, []byte{1, 2, 3}),
		cqlLWT(1, true),
		cqlError(2, 0x1100, "write timeout"),
	}, nil), append(cqlVoid(1), cqlLWT(2, false)...), cqlLWTNoMetadata(3, true), cqlSchemaChange(1))
	f.Add(byte(5), fuzzServerV5(), uint16(5))
	f.Add(byte(5), cqlFramed(cqlMaxPayload, cqlVoidV(5, 2), cqlVoidV(5, 1)), uint16(2))
	f.Fuzz(func(t *testing.T, version byte, data []byte, split uint16) {
		version = 4 + version%2
		whole, wps := cqlFuzzConn(version)
		chunked, cps := cqlFuzzConn(version)
		if len(wps) != 3 || len(cps) != 3 {
			t.Fatalf("armed %d and %d cuts, want 3", len(wps), len(cps))
		}
		a := fuzzReplies(whole, wps, [][]byte{data})
		b := fuzzReplies(chunked, cps, fuzzChunks(data, split))
		a.consumed, b.consumed = 0, 0 // a cut stops each at a different chunk end
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("whole %+v, chunked %+v", a, b)
		}
	})
}
