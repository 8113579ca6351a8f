package toxics

import (
	"testing"
)

// BenchmarkSession measures what the commit faults add to each request and its reply
// on the direct path: one call of Requests and one of Replies through a Session with
// the knobs at probability 0, which frames and decides every request. Compare it with
// the proxy's CPU per call in faults.BenchmarkProxyRedis.
func BenchmarkSession(b *testing.B) {
	for _, tt := range []struct {
		name      string
		proto     Protocol
		req, resp []byte
		start     []step
	}{
		{"resp GET", Resp{}, respCmd("get", "bench-balance"), rBulk("1152921504606846976"), nil},
		{"resp EVALSHA", Resp{}, respCmd("evalsha", "a42059b356c875f0717db19a51f6aaca9ae659ea", "1", "bench-balance"), rInt(1152921504606846975), nil},
		{"postgres UPDATE", Postgres{},
			append(append(append(pgBind("", "stmtcache_1"), pgDescribe('P', "")...), pgExecute("")...), pgSync()...),
			append(append(pgBindComplete(), pgComplete("UPDATE 1")...), pgReady('I')...),
			[]step{{pgParse("stmtcache_1", "update t set n = n - 1 where id = $1"), pgParseComplete()}}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := NewCommits(Config{Protocol: tt.proto})
			if err != nil {
				b.Fatal(err)
			}
			c.Faults.Mixed.Set(0, 0)
			h := newHarness(&testing.T{}, c, 1, 1<<15)
			if tt.proto.Name() == "postgres" {
				startupExchange(h)
			}
			for _, s := range tt.start {
				s.run(h)
			}
			s := h.s
			discard := func([]byte) error { return nil }
			req, resp := append([]byte(nil), tt.req...), append([]byte(nil), tt.resp...)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !s.Requests(req, discard) || !s.Replies(resp, discard) {
					b.Fatal("the connection ended")
				}
			}
		})
	}
}
