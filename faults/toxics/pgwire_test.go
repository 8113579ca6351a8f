package toxics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Builders of PostgreSQL messages for the framer's tests.

func pgMsg(typ byte, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

func cs(s string) []byte { return append([]byte(s), 0) }

func i16(v int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func i32(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func pgUntyped(code int, payload ...[]byte) []byte {
	body := bytes.Join(payload, nil)
	b := i32(8 + len(body))
	b = append(b, i32(code)...)
	return append(b, body...)
}

func pgStartupMsg() []byte {
	return pgUntyped(196608, cs("user"), cs("indoubt"), cs("database"), cs("indoubt"), []byte{0})
}

func pgSSL() []byte    { return pgUntyped(pgSSLRequest) }
func pgGSSENC() []byte { return pgUntyped(pgGSSENCRequest) }

func pgQuery(sql string) []byte { return pgMsg('Q', cs(sql)) }
func pgParse(name, sql string) []byte {
	return pgMsg('P', cs(name), cs(sql), i16(0))
}
func pgBind(portal, stmt string) []byte {
	return pgMsg('B', cs(portal), cs(stmt), i16(0), i16(0), i16(0))
}
func pgDescribe(kind byte, name string) []byte { return pgMsg('D', []byte{kind}, cs(name)) }
func pgExecute(portal string) []byte           { return pgMsg('E', cs(portal), i32(0)) }
func pgSync() []byte                           { return pgMsg('S') }

// The server's side.
func pgAuthOK() []byte             { return pgMsg('R', i32(0)) }
func pgParam(k, v string) []byte   { return pgMsg('S', cs(k), cs(v)) }
func pgReady(status byte) []byte   { return pgMsg('Z', []byte{status}) }
func pgComplete(tag string) []byte { return pgMsg('C', cs(tag)) }
func pgError(msg string) []byte {
	return pgMsg('E', []byte{'S'}, cs("ERROR"), []byte{'M'}, cs(msg), []byte{0})
}
func pgNotice(msg string) []byte {
	return pgMsg('N', []byte{'S'}, cs("WARNING"), []byte{'M'}, cs(msg), []byte{0})
}
func pgDataRow(val []byte) []byte      { return pgMsg('D', i16(1), i32(len(val)), val) }
func pgParseComplete() []byte          { return pgMsg('1') }
func pgBindComplete() []byte           { return pgMsg('2') }
func pgNoData() []byte                 { return pgMsg('n') }
func pgCopyData(data []byte) []byte    { return pgMsg('d', data) }
func pgBackendKey(pid, key int) []byte { return pgMsg('K', i32(pid), i32(key)) }

// framed is one message as a framer reports it: whole, or reassembled from the pieces
// it streamed in, so that any chunking compares equal.
type framed struct {
	Kind frameKind // frameMessage for whole and streamed messages alike
	Typ  byte
	Code uint32
	Raw  string // the message's bytes, header included; opaque: the bytes
}

// runFramer feeds chunks to a framer the way the toxics do (keep what it cannot frame
// yet, append the next chunk) and returns the frames.
func runFramer(f *pgFramer, chunks [][]byte) []framed {
	var out []framed
	var piece, opaque []byte
	feed(chunks, func(b []byte) int {
		fr, ok := f.next(b)
		if !ok {
			return 0
		}
		raw := b[:fr.n]
		switch fr.kind {
		case framePartial:
			piece = append(piece, raw...)
			if f.lf.skip == 0 {
				out = append(out, framed{Kind: frameMessage, Typ: fr.typ, Raw: string(piece)})
				piece = nil
			}
		case frameOpaque:
			opaque = append(opaque, raw...)
		default:
			out = append(out, framed{Kind: fr.kind, Typ: fr.typ, Code: fr.code, Raw: string(raw)})
		}
		return fr.n
	})
	if len(opaque) > 0 {
		out = append(out, framed{Kind: frameOpaque, Raw: string(opaque)})
	}
	return out
}

// chunk splits b at random points, pieces of 1 byte to max bytes.
func chunk(rng *rand.Rand, b []byte, max int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(max)
		if n > len(b) {
			n = len(b)
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func clientStream() []byte {
	big := bytes.Repeat([]byte("x"), 70<<10)
	return bytes.Join([][]byte{
		pgSSL(),
		pgStartupMsg(),
		pgMsg('p', cs("secret")),
		pgQuery("begin"),
		pgQuery("update account set balance = balance - 1 where id = 1"),
		pgQuery("commit"),
		pgParse("stmtcache_1", "update account set balance = balance - $1 where id = 1"),
		pgDescribe('S', "stmtcache_1"),
		pgSync(),
		pgBind("", "stmtcache_1"),
		pgDescribe('P', ""),
		pgExecute(""),
		pgSync(),
		pgQuery("insert into t values ('" + string(big[:66<<10]) + "')"),
		pgMsg('d', big), // CopyData: streams in pieces
		pgMsg('c'),
		pgMsg('X'),
	}, nil)
}

func serverStream() []byte {
	big := bytes.Repeat([]byte("y"), 70<<10)
	return bytes.Join([][]byte{
		{'N'},
		pgAuthOK(),
		pgParam("server_version", "15"),
		pgBackendKey(7, 9),
		pgReady('I'),
		pgNotice("there is no transaction in progress"),
		pgComplete("BEGIN"),
		pgReady('T'),
		pgDataRow(big),
		pgComplete("SELECT 1"),
		pgError("boom"),
		pgReady('E'),
		pgComplete("ROLLBACK"),
		pgReady('I'),
		pgParseComplete(),
		pgBindComplete(),
		pgNoData(),
		pgComplete("UPDATE 1"),
		pgReady('I'),
	}, nil)
}

func TestFramerChunking(t *testing.T) {
	for _, tt := range []struct {
		name    string
		newF    func() *pgFramer
		stream  []byte
		minMsgs int
	}{
		{"client", func() *pgFramer { return &pgFramer{upstream: true, matters: pgRequestMatters} }, clientStream(), 17},
		{"server", func() *pgFramer { return &pgFramer{matters: pgReplyMatters} }, serverStream(), 19},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := runFramer(tt.newF(), [][]byte{tt.stream})
			if len(want) != tt.minMsgs {
				t.Fatalf("whole stream: %d frames, want %d: %v", len(want), tt.minMsgs, kinds(want))
			}
			for _, f := range want {
				if f.Kind == frameOpaque {
					t.Fatalf("whole stream lost framing: %v", kinds(want))
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 60; i++ {
				max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
				got := runFramer(tt.newF(), chunk(rng, tt.stream, max))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("chunks up to %d bytes: frames differ\n got %v\nwant %v", max, kinds(got), kinds(want))
				}
			}
		})
	}
}

func kinds(fs []framed) string {
	var b bytes.Buffer
	for _, f := range fs {
		switch f.Kind {
		case frameMessage:
			if f.Typ == 0 {
				fmt.Fprintf(&b, "[startup %d] ", f.Code)
			} else {
				fmt.Fprintf(&b, "%c(%d) ", f.Typ, len(f.Raw)-5)
			}
		case frameByte:
			fmt.Fprintf(&b, "<%c> ", f.Typ)
		case frameOpaque:
			fmt.Fprintf(&b, "opaque(%d) ", len(f.Raw))
		}
	}
	return b.String()
}

func TestFramerStartup(t *testing.T) {
	hello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	tests := []struct {
		name     string
		upstream bool
		stream   []byte
		want     string
	}{
		{"ssl refused then startup", true, append(pgSSL(), append(pgStartupMsg(), pgQuery("commit")...)...),
			"[startup 80877103] [startup 196608] Q(7) "},
		{"ssl accepted: tls passes through", true, append(pgSSL(), hello...),
			"[startup 80877103] opaque(11) "},
		{"direct tls", true, hello, "opaque(11) "},
		{"gssenc then ssl then startup", true, bytes.Join([][]byte{pgGSSENC(), pgSSL(), pgStartupMsg()}, nil),
			"[startup 80877104] [startup 80877103] [startup 196608] "},
		{"cancel request ends framing", true, append(pgUntyped(pgCancelRequest, i32(1), i32(2)), 'Q', 0, 0),
			"[startup 80877102] opaque(3) "},
		{"unknown code", true, pgUntyped(1234), "opaque(8) "},
		{"server answers N then N then typed", false, append([]byte{'N', 'N'}, append(pgAuthOK(), pgNotice("x")...)...),
			"<N> <N> R(4) N(13) "},
		{"server answers S: tls", false, append([]byte{'S'}, hello...), "<S> opaque(11) "},
		{"server answers G: gss", false, []byte{'G', 0, 0, 0, 9}, "<G> opaque(4) "},
		{"no ssl request: first message typed", false, append(pgAuthOK(), pgReady('I')...), "R(4) Z(1) "},
		{"bad length", false, []byte{'R', 0, 0, 0, 2, 'x'}, "opaque(6) "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kinds(runFramer(&pgFramer{upstream: tt.upstream}, [][]byte{tt.stream}))
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 50; i++ {
				if g := kinds(runFramer(&pgFramer{upstream: tt.upstream}, chunk(rng, tt.stream, 3))); g != got {
					// Opaque bytes are reported in the same total whatever the chunking.
					t.Fatalf("chunked: got %q, want %q", g, got)
				}
			}
		})
	}
}
