package toxics

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// FuzzPostgresFramer checks that the framer never panics, always makes progress, and
// frames any bytes the same whether they come whole or in chunks.
func FuzzPostgresFramer(f *testing.F) {
	f.Add(clientStream()[:4096], uint64(1), true)
	f.Add(serverStream()[:4096], uint64(2), false)
	f.Add(append(pgSSL(), 0x16, 0x03, 0x01), uint64(3), true)
	f.Add([]byte{'N', 'S'}, uint64(4), false)
	f.Add(pgMsg('D', bytes.Repeat([]byte{1}, 200)), uint64(5), false)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, upstream bool) {
		newF := func() *pgFramer {
			if upstream {
				return &pgFramer{upstream: true, matters: pgRequestMatters}
			}
			return &pgFramer{matters: pgReplyMatters}
		}
		whole := runFramer(newF(), [][]byte{data})
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		chunked := runFramer(newF(), chunk(rng, data, 1+int(seed%64)))
		if !reflect.DeepEqual(whole, chunked) {
			t.Fatalf("whole %v, chunked %v", kinds(whole), kinds(chunked))
		}
		// Everything framed adds up to the input, less what is still incomplete.
		n := 0
		for _, fr := range whole {
			n += len(fr.Raw)
		}
		if n > len(data) || !bytes.HasPrefix(data, []byte(joinRaw(whole))) {
			t.Fatalf("frames cover %d bytes that are not a prefix of the %d input bytes", n, len(data))
		}
	})
}

func joinRaw(fs []framed) string {
	var b bytes.Buffer
	for _, f := range fs {
		b.WriteString(f.Raw)
	}
	return b.String()
}

// FuzzPostgresHalves feeds arbitrary bytes from both sides, interleaved, to the two
// halves with every fault armed: no panic, and each direction forwards a prefix of what
// it was given (a fault only ever drops a tail); disarmed, each forwards everything.
func FuzzPostgresHalves(f *testing.F) {
	tx := txSteps()
	ext := extendedSteps()
	f.Add(append(append(pgSSL(), pgStartupMsg()...), join(tx, false)...), append([]byte{'N'}, join(tx, true)...), uint64(1), true)
	f.Add(append(pgStartupMsg(), join(ext, false)...), append(pgReady('I'), join(ext, true)...), uint64(2), true)
	f.Add(clientStream()[:2048], serverStream()[:2048], uint64(3), false)
	f.Fuzz(func(t *testing.T, client, server []byte, seed uint64, armed bool) {
		c, err := NewCommits(Config{Protocol: Postgres{}, Seed: int64(seed)})
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
			// Alternate sides in random slices, as a conversation would.
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
			t.Fatalf("forwarded bytes are not a prefix of the input (up %d of %d, down %d of %d)", len(up), len(client), len(down), len(server))
		}
		if !armed && (h.up.closed || h.down.closed) {
			t.Fatalf("disarmed halves closed the connection")
		}
		if !armed {
			// What is forwarded plus what waits for the rest of a message is all.
			if len(up)+len(h.up.buf) != len(client) || len(down)+len(h.down.buf)+len(h.down.held) != len(server) {
				t.Fatalf("disarmed halves lost bytes: up %d+%d of %d, down %d+%d+%d of %d",
					len(up), len(h.up.buf), len(client), len(down), len(h.down.buf), len(h.down.held), len(server))
			}
		}
	})
}
