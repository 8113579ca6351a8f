package toxics

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Builders of HTTP/1.1 messages for the framer's tests.

func httpReqMsg(method, target string, headers []string, body string) []byte {
	b := fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: svc\r\n", method, target)
	for _, h := range headers {
		b = fmt.Appendf(b, "%s\r\n", h)
	}
	if body != "" {
		b = fmt.Appendf(b, "Content-Length: %d\r\n", len(body))
	}
	return append(append(b, "\r\n"...), body...)
}

func httpRespMsg(status string, headers []string, body string) []byte {
	b := fmt.Appendf(nil, "HTTP/1.1 %s\r\n", status)
	for _, h := range headers {
		b = fmt.Appendf(b, "%s\r\n", h)
	}
	b = fmt.Appendf(b, "Content-Length: %d\r\n\r\n", len(body))
	return append(b, body...)
}

// httpChunked encodes parts as a chunked body with a trailer.
func httpChunked(parts ...string) []byte {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%x;ext=1\r\n%s\r\n", len(p), p)
	}
	return append(b, "0\r\nX-Sum: 1\r\n\r\n"...)
}

func httpPost(key, body string) []byte {
	return httpReqMsg("POST", "/payments", []string{"Idempotency-Key: " + key, "Content-Type: application/json"}, body)
}

func httpCreated(body string) []byte {
	return httpRespMsg("201 Created", []string{"Content-Type: application/json"}, body)
}

func TestHTTPFaults(t *testing.T) {
	get := step{httpReqMsg("GET", "/payments/1", nil, ""), httpRespMsg("200 OK", nil, `{"id":1}`)}
	post := step{httpPost("k-1", `{"amount":5}`), httpCreated(`{"id":2}`)}
	chunkedReq := append(httpReqMsg("PUT", "/accounts/7", []string{"Transfer-Encoding: chunked"}, ""), httpChunked("ab", "cdef")...)
	chunkedRep := append([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), httpChunked("done")...)
	cont := httpReqMsg("POST", "/payments", []string{"Expect: 100-continue", "Content-Length: 3"}, "")
	runFaultCases(t, faultRun{proto: HTTP{}, name: "http"}, []faultCase{
		{"response-cut after a keep-alive read", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{get, post}, 1, -1, 0, CommitCut, "POST /payments", "201 Created"},
		{"request-drop", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{get, post}, 1, 0, 0, CommitDrop, "POST /payments", ""},
		{"chunked request and response, then a cut", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{get, {chunkedReq, chunkedRep}}, 1, -1, 0, CommitCut, "PUT /accounts/7", "200 OK"},
		{"a cut waits for the final response after 100 Continue", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{cont, []byte("HTTP/1.1 100 Continue\r\n\r\n")}, {[]byte("abc"), httpCreated("{}")}}, 1, -1, 0, CommitCut, "POST /payments", "201 Created"},
		{"100-continue: a drop keeps the head from the service", func(f *Faults) { f.Drop.Set(1, 0) },
			[]step{get, {cont, nil}}, 1, 0, 0, CommitDrop, "POST /payments", ""},
		{"pipelined: the read before the write goes through", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{append(append([]byte(nil), get.req...), post.req...), append(append([]byte(nil), get.rep...), post.rep...)}}, 0,
			-1, len(get.rep), CommitCut, "POST /payments", "201 Created"},
		{"a HEAD response has no body", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{httpReqMsg("HEAD", "/payments/1", nil, ""), []byte("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")}, post}, 1,
			-1, 0, CommitCut, "POST /payments", "201 Created"},
		{"a 204 and a 304 have no body", func(f *Faults) { f.Cut.Set(1, 0) },
			[]step{{httpReqMsg("GET", "/a", nil, ""), []byte("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n")},
				{httpReqMsg("DELETE", "/b", nil, ""), []byte("HTTP/1.1 204 No Content\r\n\r\n")}}, 1,
			-1, 0, CommitCut, "DELETE /b", "204 No Content"},
	})
}

// TestHTTPEventNamesTheRequest: the event carries the method, path, idempotency key and
// the status the service answered, and the drop's event no status.
func TestHTTPEventNamesTheRequest(t *testing.T) {
	for _, tt := range []struct {
		arm  func(*Faults)
		want Request
	}{
		{func(f *Faults) { f.Cut.Set(1, 0) }, Request{Method: "POST", Path: "/payments?x=1", IdempotencyKey: "key 7", Status: 201}},
		{func(f *Faults) { f.Drop.Set(1, 0) }, Request{Method: "POST", Path: "/payments?x=1", IdempotencyKey: "key 7"}},
	} {
		c, evs := newProtoCommits(t, HTTP{}, 1, nil)
		tt.arm(&c.Faults)
		h := newHarness(t, c, 1, 1<<10)
		step{httpReqMsg("POST", "/payments?x=1", []string{"idempotency-key:  key 7 "}, "{}"), httpCreated("{}")}.run(h)
		if len(*evs) != 1 || (*evs)[0].Request == nil || *(*evs)[0].Request != tt.want {
			t.Fatalf("events %+v, want one naming %+v", *evs, tt.want)
		}
		if e := (*evs)[0]; e.Txn == nil || e.Txn.Seq != 1 || !e.Txn.Wrote {
			t.Errorf("event txn %+v, want the connection's first request, a write", e.Txn)
		}
	}
}

// TestHTTPErrorsAreReleased: a 4xx or 5xx reaches the client and returns the cut's
// reservation, so the next request that succeeds is cut.
func TestHTTPErrorsAreReleased(t *testing.T) {
	for _, status := range []string{"409 Conflict", "422 Unprocessable Entity", "500 Internal Server Error"} {
		t.Run(status, func(t *testing.T) {
			checkReleased(t, HTTP{}, step{httpPost("k", "{}"), httpRespMsg(status, nil, "no")}, step{httpPost("k2", "{}"), httpCreated("{}")})
		})
	}
}

func TestHTTPSafeMethodsAreNotDefaultPoints(t *testing.T) {
	c, evs := newProtoCommits(t, HTTP{}, 1, nil)
	c.Faults.Drop.Set(1, 0)
	h := newHarness(t, c, 1, 1<<10)
	for _, m := range []string{"GET", "OPTIONS", "TRACE"} {
		step{httpReqMsg(m, "/x", nil, ""), httpRespMsg("200 OK", nil, "")}.run(h)
	}
	if len(*evs) != 0 || h.up.closed {
		t.Fatalf("safe methods were faulted: %+v", *evs)
	}
	step{httpReqMsg("PATCH", "/x", nil, "{}"), nil}.run(h)
	if len(*evs) != 1 || (*evs)[0].Statement != "PATCH /x" || (*evs)[0].Txn.Seq != 4 {
		t.Fatalf("events %+v, want the drop of the fourth request, PATCH /x", *evs)
	}
}

func TestHTTPMatchSeesMethodAndTarget(t *testing.T) {
	var texts []string
	c, evs := newProtoCommits(t, HTTP{}, 1, func(s string) bool {
		texts = append(texts, s)
		return strings.HasPrefix(s, "GET /payments/")
	})
	c.Faults.Cut.Set(1, 0)
	h := newHarness(t, c, 1, 1<<10)
	step{httpPost("k", "{}"), httpCreated("{}")}.run(h)
	step{httpReqMsg("GET", "/payments/3", nil, ""), httpRespMsg("200 OK", nil, "{}")}.run(h)
	if want := []string{"POST /payments", "GET /payments/3"}; !reflect.DeepEqual(texts, want) || len(*evs) != 1 || (*evs)[0].Statement != "GET /payments/3" {
		t.Fatalf("match saw %q (want %q), events %+v", texts, want, *evs)
	}
}

// TestHTTPSwitchedProtocolsPassThrough: after a 101 (a WebSocket), and after bytes that
// do not frame, nothing is judged, and everything is forwarded.
func TestHTTPSwitchedProtocolsPassThrough(t *testing.T) {
	upgrade := step{httpReqMsg("GET", "/ws", []string{"Connection: Upgrade", "Upgrade: websocket"}, ""),
		[]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x02hi")}
	garbage := step{[]byte("POST /payments HTTP/1.1\r\nBad Header\r\n\r\n"), []byte("HTTP/1.1 400 Bad Request\r\n\r\n")}
	for name, first := range map[string]step{"websocket": upgrade, "malformed head": garbage} {
		t.Run(name, func(t *testing.T) {
			c, evs := newProtoCommits(t, HTTP{}, 1, nil)
			c.Faults.Mixed.Set(1, 0)
			h := newHarness(t, c, 1, 5)
			first.run(h)
			post := step{httpPost("k", "{}"), httpCreated("{}")}
			post.run(h)
			gotUp, upClosed := drain(h.upOut)
			gotDn, dnClosed := drain(h.dnOut)
			if !bytes.Equal(gotUp, join([]step{first, post}, false)) || !bytes.Equal(gotDn, join([]step{first, post}, true)) || upClosed || dnClosed || len(*evs) != 0 {
				t.Fatalf("forwarded %q / %q (closed %v %v), events %+v; want everything, unjudged", gotUp, gotDn, upClosed, dnClosed, *evs)
			}
		})
	}
}

func TestHTTPPassesDisarmed(t *testing.T) {
	steps := []step{
		{[]byte("\r\n"), nil},
		{httpReqMsg("GET", "/", nil, ""), append([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"), httpRespMsg("200 OK", nil, "hello")...)},
		{append(httpReqMsg("POST", "/up", []string{"Transfer-Encoding: gzip, chunked"}, ""), httpChunked(strings.Repeat("x", 70000))...),
			append([]byte("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"), httpChunked("a", "b")...)},
		{httpPost("k", strings.Repeat("y", 100000)), httpCreated(strings.Repeat("z", 100000))},
		{httpReqMsg("GET", "/stream", nil, ""), []byte("HTTP/1.0 200 OK\r\n\r\nuntil the service closes HTTP/1.1 200 OK\r\n\r\n")},
	}
	checkPassesDisarmed(t, HTTP{}, []int{1, 7, 32 << 10}, func(*harness) ([]byte, []byte) { return nil, nil }, steps)
}

func httpDecisions(h *harness) {
	step{httpPost("a", "{}"), httpCreated("{}")}.run(h)
	step{httpPost("b", "{}"), httpCreated("{}")}.run(h)
}

func TestHTTPDecisionsAreSeeded(t *testing.T) {
	checkSeededDecisions(t, HTTP{}, httpDecisions)
}

func TestHTTPGarbageNeverPanics(t *testing.T) {
	starts := []string{"POST / HTTP/1.1\r\n", "HTTP/1.1 200 OK\r\n", "Content-Length: ", "Transfer-Encoding: chunked\r\n\r\n", "\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}
	checkGarbage(t, garbageRun{
		proto: HTTP{}, seed: 12, iterations: 1000,
		garbage: func(rng *rand.Rand, j int) ([]byte, bool) {
			b := randomBytes(rng, 200)
			if j%2 == 0 {
				b = append([]byte(starts[rng.IntN(len(starts))]), b...)
			}
			// A plausible request line may frame as a real request: judged, and may fire.
			return b, bytes.Contains(b, []byte(" HTTP/1."))
		},
		good: func(h *harness) string {
			step{httpPost("k", "{}"), httpCreated("{}")}.run(h)
			return "POST /payments"
		},
	})
}

// httpTrace feeds chunks to a connection's two directions, as the Session does, and
// returns what was found where: each point with the offset of its request, each final
// verdict with the offset of its response, and the offset where a direction stopped
// framing. Pieces of bodies depend on the chunking; these do not.
func httpTrace(up, down [][]byte) []string {
	c := &httpConn{}
	var out []string
	off := 0
	feed(up, func(b []byte) int {
		opaque := c.up.opaque
		n, p := c.Request(b)
		if n > 0 && p != nil {
			out = append(out, fmt.Sprintf("point %q at %d", p.Statement, off))
			c.ExpectCut(&Pending{point: *p})
		}
		if c.up.opaque && !opaque {
			out = append(out, fmt.Sprintf("up opaque at %d", off))
		}
		if n > 0 {
			off += n
		}
		return n
	})
	off = 0
	feed(down, func(b []byte) int {
		opaque := c.down.opaque
		n, v := c.Reply(b)
		if n > 0 && v.Action != Pass {
			out = append(out, fmt.Sprintf("verdict %d %q at %d", v.Action, v.Tag, off))
		}
		if c.down.opaque && !opaque {
			out = append(out, fmt.Sprintf("down opaque at %d", off))
		}
		if n > 0 {
			off += n
		}
		return n
	})
	return out
}

// FuzzHTTPFramer: any bytes, either side, frame the same whole and in random chunks of
// 1 byte to 32 KiB, with no panic.
func FuzzHTTPFramer(f *testing.F) {
	f.Add(bytes.Join([][]byte{httpReqMsg("GET", "/", nil, ""), httpPost("k", "{}"), append(httpReqMsg("PUT", "/c", []string{"Transfer-Encoding: chunked"}, ""), httpChunked("ab")...)}, nil),
		bytes.Join([][]byte{httpRespMsg("200 OK", nil, "x"), []byte("HTTP/1.1 100 Continue\r\n\r\n"), httpCreated("{}"), append([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), httpChunked("z")...)}, nil),
		uint64(1))
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), []byte("HTTP/1.1 101 Switching\r\n\r\nxx"), uint64(2))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), []byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00"), uint64(3))
	f.Fuzz(func(t *testing.T, up, down []byte, seed uint64) {
		whole := httpTrace([][]byte{up}, [][]byte{down})
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		max := 1 + int(seed%(32<<10))
		chunked := httpTrace(chunk(rng, up, max), chunk(rng, down, max))
		if !reflect.DeepEqual(whole, chunked) {
			t.Fatalf("whole %q\nchunked (max %d) %q", whole, max, chunked)
		}
	})
}

// TestHTTPFramerChunking runs the fuzz target's property over real conversations in
// chunks from 1 byte to 32 KiB.
func TestHTTPFramerChunking(t *testing.T) {
	up := bytes.Join([][]byte{httpReqMsg("GET", "/", nil, ""), httpPost("k", strings.Repeat("b", 40000)),
		append(httpReqMsg("PUT", "/c", []string{"Transfer-Encoding: chunked"}, ""), httpChunked("ab", strings.Repeat("c", 5000))...),
		httpReqMsg("DELETE", "/c", nil, "")}, nil)
	down := bytes.Join([][]byte{httpRespMsg("200 OK", nil, "x"), httpCreated(strings.Repeat("r", 50000)),
		append([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), httpChunked("z")...),
		[]byte("HTTP/1.1 204 No Content\r\n\r\n")}, nil)
	whole := httpTrace([][]byte{up}, [][]byte{down})
	if want := 8; len(whole) != want {
		t.Fatalf("trace %q: want %d points and verdicts", whole, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, max := range []int{1, 2, 3, 17, 1000, 32 << 10} {
		if got := httpTrace(chunk(rng, up, max), chunk(rng, down, max)); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks of %d: %q, whole %q", max, got, whole)
		}
	}
}

// FuzzHTTPHalves: any bytes through both halves with every request faulted: what is
// forwarded is a prefix of what was sent, the same whatever the chunking, and one
// connection has one fault at most (the first ends it).
func FuzzHTTPHalves(f *testing.F) {
	f.Add(httpPost("k", "{}"), httpCreated("{}"), uint64(1))
	f.Add(append(httpReqMsg("GET", "/", nil, ""), httpPost("k", "{}")...), append(httpRespMsg("200 OK", nil, "x"), httpCreated("{}")...), uint64(2))
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n\r\n"), uint64(3))
	f.Fuzz(func(t *testing.T, cli, srv []byte, seed uint64) {
		checkFuzzHalves(t, HTTP{}, seed, cli, srv)
	})
}
