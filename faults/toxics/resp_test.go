package toxics

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Builders of RESP messages for the framer's tests.

func respCmd(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

func rLine(typ byte, s string) []byte { return append(append([]byte{typ}, s...), '\r', '\n') }
func rOK() []byte                     { return rLine('+', "OK") }
func rErr(s string) []byte            { return rLine('-', s) }
func rInt(n int) []byte               { return rLine(':', fmt.Sprint(n)) }
func rBulk(s string) []byte           { return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(s), s) }
func rBlob(typ byte, s string) []byte { return fmt.Appendf(nil, "%c%d\r\n%s\r\n", typ, len(s), s) }
func rAgg(typ byte, n int, elems ...[]byte) []byte {
	return append(fmt.Appendf(nil, "%c%d\r\n", typ, n), bytes.Join(elems, nil)...)
}

// newProtoCommits returns commit faults for proto whose events the returned slice
// collects.
func newProtoCommits(t *testing.T, proto Protocol, seed int64, match func(string) bool) (*Commits, *[]Event) {
	t.Helper()
	var evs []Event
	c, err := NewCommits(Config{Protocol: proto, Seed: seed, Match: match, Events: func(e Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	return c, &evs
}

// respRequestTrace feeds chunks to a connection's Request the way Session.Requests
// does and returns what it found: each request queued, each point, and the switch to
// pass-through.
func respRequestTrace(c *respConn, chunks [][]byte) []string {
	var out []string
	queued := 0
	opaque := false
	feed(chunks, func(b []byte) int {
		n, p := c.Request(b)
		if n <= 0 || n > len(b) {
			return n
		}
		for ; queued < len(c.queue); queued++ {
			out = append(out, "req "+c.queue[queued].name)
		}
		if p != nil {
			// Rendered while b is still the request's, as Session.Requests does.
			p.rendered()
			out = append(out, fmt.Sprintf("point %q default=%v", p.Text, p.Default))
		}
		if c.up.opaque && !opaque {
			opaque = true
			out = append(out, "opaque")
		}
		return n
	})
	return out
}

func respClientStream() []byte {
	big := strings.Repeat("v", 3000)
	return bytes.Join([][]byte{
		respCmd("HELLO", "3"),
		respCmd("CLIENT", "SETINFO", "LIB-NAME", "go-redis"),
		[]byte("PING\r\n"),
		[]byte("\r\n"),
		[]byte("*0\r\n"),
		[]byte("*-1\r\n"),
		respCmd("set", "k", "v"),
		respCmd("get", "k"),
		respCmd("EVALSHA", "abc", "1", "{b}:balance", ""),
		respCmd("MULTI"),
		respCmd("SET", "a", "1"),
		respCmd("INCR", "b"),
		respCmd("EXEC"),
		respCmd("SET", "big", big), // longer than the test's maxWhole: streamed, unjudged
		respCmd("GET", "big"),
		[]byte("incr \"my key\"\n"),
		respCmd("DEL", "k"),
		respCmd("SUBSCRIBE", "ch"),
		respCmd("SET", "after", "subscribe"),
	}, nil)
}

var respClientTrace = []string{
	"req HELLO", "req CLIENT", "req PING",
	"req SET", `point "SET k v" default=true`,
	"req GET", `point "GET k" default=false`,
	"req EVALSHA", `point "EVALSHA abc 1 {b}:balance \"\"" default=true`,
	"req MULTI", "req SET", "req INCR",
	"req EXEC", `point "SET a 1; INCR b; EXEC" default=true`,
	"req SET",
	"req GET", `point "GET big" default=false`,
	"req INCR", `point "INCR \"my key\"" default=true`,
	"req DEL", `point "DEL k" default=true`,
	"req SUBSCRIBE", "opaque",
}

func newRespConn(maxWhole int) *respConn {
	c := Resp{}.NewConn().(*respConn)
	c.up.maxWhole = maxWhole
	return c
}

func TestRespRequestChunking(t *testing.T) {
	stream := respClientStream()
	want := respRequestTrace(newRespConn(1024), [][]byte{stream})
	if !reflect.DeepEqual(want, respClientTrace) {
		t.Fatalf("whole stream:\n got %q\nwant %q", want, respClientTrace)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
		got := respRequestTrace(newRespConn(1024), chunk(rng, stream, max))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks up to %d bytes:\n got %q\nwant %q", max, got, want)
		}
	}
}

func TestRespRequestFraming(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []string
	}{
		{"inline with lf only", "set a 1\nget a\n", []string{"req SET", `point "SET a 1" default=true`, "req GET", `point "GET a" default=false`}},
		{"blank inline lines get no reply", "\r\n   \r\n\nPING\r\n", []string{"req PING"}},
		{"empty arrays get no reply", "*0\r\n*-5\r\n*1\r\n$4\r\nPING\r\n", []string{"req PING"}},
		{"header ends at cr as in redis", "*1\rx$4\r\nPING\rx", []string{"req PING"}},
		{"bad count", "*x\r\n" + string(respCmd("SET", "a", "1")), []string{"opaque"}},
		{"plus sign is not a count", "*+1\r\n$4\r\nPING\r\n", []string{"opaque"}},
		{"element not a bulk string", "*1\r\n:4\r\n", []string{"opaque"}},
		{"negative bulk length", "*1\r\n$-1\r\n", []string{"opaque"}},
		{"nul in an inline line", "PI\x00NG\r\n", []string{"opaque"}},
		{"nul in a header", "*1\x00\r\n", []string{"opaque"}},
		{"quoted words", `SET "a b" 'c\'d'` + "\r\n", []string{"req SET", `point "SET \"a b\" \"c'd\"" default=true`}},
		{"exec without multi is no point", string(respCmd("EXEC")), []string{"req EXEC"}},
		{"discard ends multi", string(bytes.Join([][]byte{respCmd("MULTI"), respCmd("SET", "a", "1"), respCmd("DISCARD"), respCmd("SET", "b", "2")}, nil)),
			[]string{"req MULTI", "req SET", "req DISCARD", "req SET", `point "SET b 2" default=true`}},
		{"monitor", string(append(respCmd("MONITOR"), respCmd("SET", "a", "1")...)), []string{"req MONITOR", "opaque"}},
		{"client reply", string(append(respCmd("CLIENT", "REPLY", "OFF"), respCmd("SET", "a", "1")...)), []string{"req CLIENT", "opaque"}},
		{"too long inline", strings.Repeat("x", respMaxInline+2), []string{"opaque"}},
		{"huge first word", string(respCmd(strings.Repeat("S", 2000))), []string{"req "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := respRequestTrace(newRespConn(1024), [][]byte{[]byte(tt.stream)})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 20; i++ {
				if g := respRequestTrace(newRespConn(1024), chunk(rng, []byte(tt.stream), 3)); !reflect.DeepEqual(g, got) {
					t.Fatalf("chunked: got %q, want %q", g, got)
				}
			}
		})
	}
}

// respReplyTrace queues one request per entry of reqs ("exec", "cut", "execcut" or
// plain), feeds the chunks to Reply as the downstream toxic does and returns the
// verdicts other than Pass, with the number of replies started.
func respReplyTrace(reqs []string, chunks [][]byte) []string {
	c := newRespConn(maxWhole)
	pend := map[*Pending]int{}
	for i, r := range reqs {
		q := &respReq{name: "X", exec: strings.HasPrefix(r, "exec")}
		if strings.HasSuffix(r, "cut") {
			q.cut = &Pending{}
			pend[q.cut] = i
		}
		if r == "subscribe" {
			q.last = true
		}
		c.queue = append(c.queue, q)
	}
	out := traceReplies(c, chunks, func(v Verdict) string {
		switch {
		case v.Action == Cut:
			return fmt.Sprintf("cut %d %q", pend[v.Pending], v.Tag)
		case v.Pending != nil:
			return fmt.Sprintf("release %d", pend[v.Pending])
		}
		return "release"
	})
	return append(out, fmt.Sprintf("replies %d opaque %v", c.down.replies, c.down.opaque))
}

func TestRespReplyChunking(t *testing.T) {
	long := strings.Repeat("L", respMaxInline+100)
	bigBulk := strings.Repeat("B", 100<<10)
	replies := [][]byte{
		rOK(),               // 0
		rErr("ERR unknown"), // 1 cut: released
		rInt(7),             // 2 cut
		rBulk("hello"),      // 3
		[]byte("$-1\r\n"),   // 4
		[]byte("*-1\r\n"),   // 5 exec cut: null, released
		rAgg('*', 2, rInt(1), rAgg('*', 2, rBulk("a"), []byte("_\r\n"))), // 6 exec cut
		[]byte("_\r\n"),    // 7
		[]byte("#t\r\n"),   // 8
		[]byte(",1.5\r\n"), // 9
		[]byte("(3492890328409238509324850943850943825024385\r\n"),                          // 10
		rBlob('!', "SYNTAX invalid syntax"),                                                 // 11 cut: released
		rBlob('=', "txt:Some string"),                                                       // 12
		rAgg('%', 2, rBulk("k"), rInt(1), rLine('+', "k2"), rAgg('~', 2, rInt(1), rInt(2))), // 13
		rAgg('>', 3, rBulk("message"), rBulk("ch"), rBulk("hi")),                            // a push: no reply
		rAgg('|', 1, rLine('+', "key-popularity"), rAgg('%', 1, rBulk("a"), rLine(',', "0.19"))),
		rAgg('*', 2, rInt(2039123), rInt(9543892)), // 14 cut, with its attribute
		rAgg('|', 1, rLine('+', "x"), rLine('+', "y")),
		rErr("ERR after attribute"),                                                          // 15 cut: released with its attribute
		rAgg('*', 3, rInt(1), rAgg('|', 1, rLine('+', "ttl"), rInt(3600)), rInt(2), rInt(3)), // 16: attribute inside
		rLine('+', long), // 17 cut: a long line
		rLine('-', long), // 18
		rBulk(bigBulk),   // 19 cut
		rAgg('*', 0),     // 20
		rAgg('>', 0),     // a push
		rOK(),            // 21: subscribe, opaque from here
		rAgg('*', 3, rBulk("subscribe"), rBulk("ch"), rInt(1)),
	}
	reqs := make([]string, 22)
	for _, i := range []int{1, 2, 14, 15, 17, 19} {
		reqs[i] = "cut"
	}
	reqs[5], reqs[6] = "execcut", "execcut"
	reqs[11] = "cut"
	reqs[21] = "subscribe"
	stream := bytes.Join(replies, nil)
	want := respReplyTrace(reqs, [][]byte{stream})
	wantTrace := []string{
		"release 1", `cut 2 ":7"`, "release 5", "hold", `cut 6 "*2"`, "release 11", "hold", `cut 14 "*2"`, "hold", "release 15",
		fmt.Sprintf("cut 17 %q", "+"+long[:respMaxTag-1]), fmt.Sprintf("cut 19 %q", "$"+fmt.Sprint(len(bigBulk))),
		"replies 22 opaque true",
	}
	if !reflect.DeepEqual(want, wantTrace) {
		t.Fatalf("whole stream:\n got %q\nwant %q", want, wantTrace)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 60; i++ {
		max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
		if max == 1 && i > 6 {
			continue // byte by byte through 200 KB twice is enough
		}
		got := respReplyTrace(reqs, chunk(rng, stream, max))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks up to %d bytes:\n got %q\nwant %q", max, got, want)
		}
	}
}

func TestRespReplyFraming(t *testing.T) {
	tests := []struct {
		name   string
		reqs   []string
		stream string
		want   []string
	}{
		{"unsolicited reply passes", nil, "-ERR max number of clients reached\r\n", []string{"replies 1 opaque false"}},
		{"bad type", []string{"cut"}, "?1\r\n", []string{"replies 0 opaque true"}},
		{"bad length", []string{"cut"}, "$x\r\n", []string{"replies 0 opaque true"}},
		{"negative count", []string{"cut"}, "%-1\r\n", []string{"replies 0 opaque true"}},
		{"held attribute released when framing is lost", []string{"cut"}, "|1\r\n+a\r\n+b\r\n?\r\n", []string{"hold", "release", "replies 0 opaque true"}},
		{"exec reply null in resp3", []string{"execcut"}, "_\r\n", []string{"release 0", "replies 1 opaque false"}},
		{"exec with an error inside ran the rest", []string{"execcut"}, "*2\r\n+OK\r\n-ERR wrong type\r\n", []string{"hold", `cut 0 "*2"`, "replies 1 opaque false"}},
		{"pipelined: the third reply", []string{"", "", "cut"}, "$1\r\na\r\n:1\r\n+OK\r\n", []string{`cut 2 "+OK"`, "replies 3 opaque false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := respReplyTrace(tt.reqs, [][]byte{[]byte(tt.stream)})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 20; i++ {
				if g := respReplyTrace(tt.reqs, chunk(rng, []byte(tt.stream), 2)); !reflect.DeepEqual(g, got) {
					t.Fatalf("chunked: got %q, want %q", g, got)
				}
			}
		})
	}
}

// respSteps is a go-redis style conversation: handshake, a script, a transaction.
func respHandshake() step {
	return step{
		bytes.Join([][]byte{respCmd("hello", "3"), respCmd("client", "setinfo", "LIB-NAME", "go-redis(,go1.26)"), respCmd("client", "setinfo", "LIB-VER", "9.23.0")}, nil),
		bytes.Join([][]byte{rAgg('%', 1, rBulk("server"), rBulk("redis")), rOK(), rOK()}, nil),
	}
}

func TestRespCommitFaults(t *testing.T) {
	evalsha := respCmd("evalsha", "1f0e", "2", "{b}:balance", "{b}:ops", "")
	runFaultCases(t, faultRun{proto: Resp{}, name: "resp"}, []faultCase{
		{"cut set", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{respHandshake(), {respCmd("get", "k"), rBulk("1")}, {respCmd("set", "k", "2"), rOK()}}, 2,
			-1, 0, CommitCut, "SET k 2", "+OK"},
		{"drop set", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{respHandshake(), {respCmd("get", "k"), rBulk("1")}, {respCmd("set", "k", "2"), rOK()}}, 2,
			0, 0, CommitDrop, "SET k 2", ""},
		{"noscript is released, the eval that follows is cut", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{respHandshake(),
				{evalsha, rErr("NOSCRIPT No matching script. Please use EVAL.")},
				{respCmd("eval", "return redis.call('DECR', KEYS[1])", "1", "{b}:balance"), rInt(9)}}, 2,
			-1, 0, CommitCut, `EVAL "return redis.call('DECR', KEYS[1])" 1 {b}:balance`, ":9"},
		{"cut exec", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{respHandshake(), {bytes.Join([][]byte{respCmd("multi"), respCmd("set", "a", "1"), respCmd("del", "b"), respCmd("exec")}, nil),
				bytes.Join([][]byte{rOK(), rLine('+', "QUEUED"), rLine('+', "QUEUED"), rAgg('*', 2, rOK(), rInt(1))}, nil)}}, 1,
			-1, len(rOK()) + 2*len(rLine('+', "QUEUED")), CommitCut, "EXEC", "*2"},
		{"drop exec", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{respHandshake(), {bytes.Join([][]byte{respCmd("multi"), respCmd("set", "a", "1"), respCmd("exec")}, nil),
				bytes.Join([][]byte{rOK(), rLine('+', "QUEUED"), rAgg('*', 1, rOK())}, nil)}}, 1,
			len(respCmd("multi")) + len(respCmd("set", "a", "1")), 0, CommitDrop, "EXEC", ""},
		{"pipelined: cut the write's reply, the read before it goes through", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{respHandshake(), {bytes.Join([][]byte{respCmd("get", "a"), respCmd("incr", "a"), respCmd("get", "a")}, nil),
				bytes.Join([][]byte{rBulk("1"), rInt(2), rBulk("2")}, nil)}}, 1,
			-1, len(rBulk("1")), CommitCut, "INCR a", ":2"},
		{"push before the reply is forwarded, attribute dropped with it", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{respHandshake(), {respCmd("set", "k", "2"),
				bytes.Join([][]byte{rAgg('>', 2, rBulk("invalidate"), rAgg('*', 1, rBulk("k"))), rAgg('|', 1, rBulk("a"), rInt(1)), rOK()}, nil)}}, 1,
			-1, len(rAgg('>', 2, rBulk("invalidate"), rAgg('*', 1, rBulk("k")))), CommitCut, "SET k 2", "+OK"},
	})
}

func TestRespReleases(t *testing.T) {
	tests := []struct {
		name string
		step step
	}{
		{"script error", step{respCmd("eval", "redis.call('SET', KEYS[1], 1); return redis.error_reply('boom')", "1", "k"), rErr("boom script: ...")}},
		{"bulk error", step{respCmd("set", "k", "1"), rBlob('!', "ERR oops")}},
		{"exec aborted by watch", step{bytes.Join([][]byte{respCmd("watch", "k"), respCmd("multi"), respCmd("set", "k", "1"), respCmd("exec")}, nil),
			bytes.Join([][]byte{rOK(), rOK(), rLine('+', "QUEUED"), []byte("*-1\r\n")}, nil)}},
		{"execabort", step{bytes.Join([][]byte{respCmd("multi"), respCmd("nosuch"), respCmd("exec")}, nil),
			bytes.Join([][]byte{rOK(), rErr("ERR unknown command 'nosuch'"), rErr("EXECABORT Transaction discarded because of previous errors.")}, nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkReleased(t, Resp{}, tt.step, step{respCmd("incr", "n"), rInt(1)})
		})
	}
}

func TestRespSubscribePassesThrough(t *testing.T) {
	c, evs := newProtoCommits(t, Resp{}, 1, nil)
	c.Faults.Cut.Set(1, 0)
	h := newHarness(t, c, 1, 7)
	sub := step{respCmd("subscribe", "ch"), rAgg('*', 3, rBulk("subscribe"), rBulk("ch"), rInt(1))}
	sub.run(h)
	msg := rAgg('*', 3, rBulk("message"), rBulk("ch"), rBulk("set k 1"))
	h.client(respCmd("set", "k", "1")) // refused in subscribe mode, unjudged
	h.server(append(msg, rErr("ERR Can't execute 'set'")...))
	gotUp, _ := drain(h.upOut)
	gotDn, closed := drain(h.dnOut)
	if !bytes.Equal(gotUp, append(sub.req, respCmd("set", "k", "1")...)) || closed || len(*evs) != 0 {
		t.Errorf("upstream %q events %v", gotUp, *evs)
	}
	if want := bytes.Join([][]byte{sub.rep, msg, rErr("ERR Can't execute 'set'")}, nil); !bytes.Equal(gotDn, want) {
		t.Errorf("downstream %q, want %q", gotDn, want)
	}
}

func TestRespMatchSeesText(t *testing.T) {
	var texts []string
	c, evs := newProtoCommits(t, Resp{}, 1, func(s string) bool {
		texts = append(texts, s)
		return strings.HasPrefix(s, "EVALSHA 1f0e ")
	})
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 1<<10)
	respHandshake().run(h)
	step{respCmd("ping"), rLine('+', "PONG")}.run(h)
	step{respCmd("set", "x", "1"), rOK()}.run(h)
	step{respCmd("get", "x"), rBulk("1")}.run(h)
	step{respCmd("evalsha", "1f0e", "1", "k"), rInt(1)}.run(h)
	want := []string{"SET x 1", "GET x", "EVALSHA 1f0e 1 k"}
	if !reflect.DeepEqual(texts, want) || len(*evs) != 1 || (*evs)[0].Statement != "EVALSHA 1f0e 1 k" {
		t.Errorf("match saw %q (want %q), events %+v", texts, want, *evs)
	}
}

// respDecisions runs a connection of two writes.
func respDecisions(h *harness) {
	respHandshake().run(h)
	step{respCmd("incr", "n"), rInt(1)}.run(h)
	step{respCmd("incr", "n"), rInt(2)}.run(h)
}

func TestRespDecisionsAreSeeded(t *testing.T) {
	checkSeededDecisions(t, Resp{}, respDecisions)
}

func TestRespGarbageNeverPanics(t *testing.T) {
	checkGarbage(t, garbageRun{
		proto: Resp{}, seed: 11, iterations: 2000,
		garbage: func(rng *rand.Rand, j int) ([]byte, bool) {
			b := randomBytes(rng, 200)
			if j%2 == 0 && len(b) > 0 {
				// Plausible starts reach deeper into the framers.
				b[0] = "*$+-:>|%~_#,(!="[rng.IntN(15)]
			}
			return b, false
		},
		good: func(h *harness) string {
			step{respCmd("SET", "k", "v"), []byte("+OK\r\n")}.run(h)
			return "SET k v"
		},
	})
}

// fuzzHarness runs a client stream and then a server stream through both halves with
// every commit point faulted, in chunks of at most max bytes, and returns what each
// half forwarded and the events.
func fuzzHarness(t *testing.T, proto Protocol, seed uint64, cli, srv []byte, max int) (up, down []byte, evs []Event) {
	c, events := newProtoCommits(t, proto, int64(seed), nil)
	c.Faults.Mixed.Set(1, 0)
	h := newHarness(t, c, seed, max)
	h.client(cli)
	if !h.up.closed {
		h.server(srv)
	}
	up, _ = drain(h.upOut)
	down, _ = drain(h.dnOut)
	return up, down, *events
}

// checkFuzzHalves checks the properties every protocol keeps on any bytes: forwarded
// bytes are a prefix of what was sent, and chunking changes nothing.
func checkFuzzHalves(t *testing.T, proto Protocol, seed uint64, cli, srv []byte) {
	up, down, evs := fuzzHarness(t, proto, seed, cli, srv, 1<<20)
	if !bytes.HasPrefix(cli, up) || !bytes.HasPrefix(srv, down) {
		t.Fatalf("forwarded bytes that were not sent")
	}
	if len(evs) > 1 {
		t.Fatalf("%d events on one connection", len(evs))
	}
	for _, max := range []int{1, 1 + int(seed%13)} {
		up2, down2, evs2 := fuzzHarness(t, proto, seed, cli, srv, max)
		if !bytes.Equal(up, up2) || !bytes.Equal(down, down2) || len(evs) != len(evs2) {
			t.Fatalf("chunks of %d: forwarded %d/%d bytes and %d events, whole: %d/%d and %d",
				max, len(up2), len(down2), len(evs2), len(up), len(down), len(evs))
		}
	}
}

func FuzzRespRequest(f *testing.F) {
	f.Add(respClientStream(), uint8(3))
	f.Add([]byte("set a 1\r\n*1\r\n$4\r\nPING\r\n"), uint8(1))
	f.Add(respCmd("MULTI"), uint8(7))
	f.Fuzz(func(t *testing.T, b []byte, max uint8) {
		whole := respRequestTrace(newRespConn(1024), [][]byte{b})
		rng := rand.New(rand.NewPCG(uint64(max), uint64(len(b))))
		got := respRequestTrace(newRespConn(1024), chunk(rng, b, 1+int(max)))
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", 1+int(max), got, whole)
		}
	})
}

func FuzzRespReply(f *testing.F) {
	f.Add([]byte("+OK\r\n:1\r\n|1\r\n+a\r\n+b\r\n*2\r\n$1\r\nx\r\n_\r\n>1\r\n+p\r\n-ERR x\r\n"), uint8(2), uint8(0x55))
	f.Add([]byte("%1\r\n+k\r\n~1\r\n,1.5\r\n!3\r\nERR\r\n=7\r\ntxt:abc\r\n"), uint8(1), uint8(0xff))
	f.Fuzz(func(t *testing.T, b []byte, max, arm uint8) {
		reqs := make([]string, 8)
		for i := range reqs {
			switch arm >> (i % 8) & 1 {
			case 1:
				reqs[i] = "cut"
			}
			if i%3 == 0 {
				reqs[i] = "exec" + reqs[i]
			}
		}
		whole := respReplyTrace(reqs, [][]byte{b})
		rng := rand.New(rand.NewPCG(uint64(max), uint64(len(b))))
		got := respReplyTrace(reqs, chunk(rng, b, 1+int(max)))
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks up to %d:\n got %q\nwant %q", 1+int(max), got, whole)
		}
	})
}

// FuzzRespHalves runs any client and server bytes through both halves of the toxic.
func FuzzRespHalves(f *testing.F) {
	f.Add(respCmd("set", "k", "1"), rOK(), uint64(1))
	f.Add(bytes.Join([][]byte{respCmd("multi"), respCmd("incr", "a"), respCmd("exec")}, nil),
		bytes.Join([][]byte{rOK(), rLine('+', "QUEUED"), rAgg('*', 1, rInt(1))}, nil), uint64(2))
	f.Add(append(respCmd("get", "k"), respCmd("set", "k", "1")...), []byte("|1\r\n+a\r\n+b\r\n$1\r\nx\r\n+OK\r\n"), uint64(3))
	f.Fuzz(func(t *testing.T, cli, srv []byte, seed uint64) {
		checkFuzzHalves(t, Resp{}, seed, cli, srv)
	})
}
