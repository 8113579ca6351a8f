package cqle2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/internal/faultstest"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/cql"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var node = servertest.New("cassandra", func(ctx context.Context) (*cassandra.Server, error) {
	return cassandra.Start(ctx, cassandra.Options{
		Settings: map[string]string{
			// A loaded 2-core machine: Paxos rounds must not time out for reasons of
			// their own, or a timeout would be mistaken for the fault under test.
			"cas_contention_timeout": "20000ms",
			"write_request_timeout":  "20000ms",
			"read_request_timeout":   "20000ms",
		},
	})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, node)) }

const keyspace = "faults_e2e"

var schemaOnce sync.Once

// direct returns a session straight to the server (no proxy) with the test schema.
func direct(t *testing.T) *gocql.Session {
	t.Helper()
	srv := node.Get(t)
	s, err := cluster(srv.Addr, nil).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var serr error
	schemaOnce.Do(func() {
		for _, q := range []string{
			"CREATE KEYSPACE IF NOT EXISTS " + keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
			"CREATE TABLE IF NOT EXISTS " + keyspace + ".acct (id text PRIMARY KEY, balance bigint, note text)",
			"CREATE TABLE IF NOT EXISTS " + keyspace + ".hits (id text PRIMARY KEY, n counter)",
		} {
			if serr = s.Query(q).Exec(); serr != nil {
				return
			}
		}
	})
	if serr != nil {
		t.Fatal(serr)
	}
	return s
}

// cluster is gocql as stores/cql configures it: protocol v4, one connection, no peer
// discovery (peers would be dialed around the proxy), no retries.
func cluster(addr string, d gocql.Dialer) *gocql.ClusterConfig {
	cl := gocql.NewCluster(addr)
	cl.ProtoVersion = 4
	cl.NumConns = 1
	cl.Consistency = gocql.Quorum
	cl.SerialConsistency = gocql.Serial
	cl.DisableInitialHostLookup = true
	cl.Events.DisableTopologyEvents = true
	cl.RetryPolicy = nil
	cl.Timeout = 30 * time.Second
	cl.ConnectTimeout = 30 * time.Second
	cl.Logger = log.New(io.Discard, "", 0)
	if d != nil {
		cl.Dialer = d
	}
	return cl
}

func startProxy(t *testing.T, seed int64) (*faults.Proxy, *faultstest.Log) {
	t.Helper()
	evs := &faultstest.Log{}
	px, err := faults.Start(faults.Options{Upstream: node.Get(t).Addr, Protocol: toxics.CQL{}, Seed: seed, Events: evs.Add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px, evs
}

// dialer records the local address of every connection gocql opens.
type dialer struct {
	d     net.Dialer
	mu    sync.Mutex
	local map[string]bool
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		if d.local == nil {
			d.local = map[string]bool{}
		}
		d.local[c.LocalAddr().String()] = true
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialer) has(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.local[addr]
}

func viaProxy(t *testing.T, px *faults.Proxy) (*gocql.Session, *dialer) {
	t.Helper()
	d := &dialer{}
	s, err := cluster(px.Addr(), d).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, d
}

func serialBalance(t *testing.T, s *gocql.Session, id string) int64 {
	t.Helper()
	var b int64
	if err := s.Query("SELECT balance FROM "+keyspace+".acct WHERE id = ?", id).Consistency(gocql.Consistency(gocql.Serial)).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

const lwt = "UPDATE " + keyspace + ".acct SET balance = ? WHERE id = ? IF balance = ?"

// TestLWTCutAndDrop: gocql's LWT through the proxy. A cut leaves the row changed (the
// truth says applied), a drop leaves it as it was (not applied), and the client sees
// the same class of error either way. An LWT whose condition fails wrote nothing and is
// not cut; the cap's reservation comes back for the next one.
func TestLWTCutAndDrop(t *testing.T) {
	db := direct(t)
	px, evs := startProxy(t, 1)
	id := fmt.Sprintf("lwt-%d", time.Now().UnixNano())
	if err := db.Query("INSERT INTO "+keyspace+".acct (id, balance) VALUES (?, 10)", id).Exec(); err != nil {
		t.Fatal(err)
	}
	try := func(from int64) (bool, error) {
		s, _ := viaProxy(t, px)
		var cur int64
		return s.Query(lwt, from-1, id, from).ScanCAS(&cur)
	}

	// A losing condition with a cut armed (cap 1): no fault, the answer gets through.
	px.Faults().Cut.Set(1, 1)
	applied, err := try(7)
	if err != nil || applied || len(evs.All()) != 0 {
		t.Fatalf("lwt with a false condition: applied %v err %v events %v; want not applied, no error, no event", applied, err, evs.All())
	}

	s, d := viaProxy(t, px)
	var cur int64
	_, cutErr := s.Query(lwt, 9, id, 10).ScanCAS(&cur)
	if cutErr == nil {
		t.Fatal("cut lwt: no error")
	}
	if b := serialBalance(t, db, id); b != 9 {
		t.Fatalf("after the cut the balance is %d, want 9: the server applied the LWT", b)
	}
	got := evs.All()
	if len(got) != 1 {
		t.Fatalf("events %+v, want the cut", got)
	}
	if e := got[0]; e.Kind != toxics.CommitCut || e.Truth != toxics.Applied || e.Statement != lwt ||
		e.Tag != "RESULT Rows [applied]=true" || e.Protocol != "cql" || !d.has(e.Conn) {
		t.Errorf("cut event %+v: want commit-cut, applied, the LWT, a connection of this session", e)
	} else if e.Txn == nil || !e.Txn.Wrote || e.Txn.Seq == 0 || e.Txn.Text != lwt {
		t.Errorf("cut event's transaction %+v, want a numbered write of the LWT", e.Txn)
	}
	px.Faults().Cut.Disarm()

	px.Faults().Drop.Set(1, 1)
	s, d = viaProxy(t, px)
	_, dropErr := s.Query(lwt, 8, id, 9).ScanCAS(&cur)
	if dropErr == nil {
		t.Fatal("dropped lwt: no error")
	}
	if b := serialBalance(t, db, id); b != 9 {
		t.Fatalf("after the drop the balance is %d, want 9: the server never saw the LWT", b)
	}
	got = evs.All()
	if len(got) != 2 {
		t.Fatalf("events %+v, want the cut and the drop", got)
	}
	if e := got[1]; e.Kind != toxics.CommitDrop || e.Truth != toxics.NotApplied || e.Statement != lwt || !d.has(e.Conn) {
		t.Errorf("drop event %+v: want commit-drop, not applied, the LWT, a connection of this session", e)
	}

	// The client cannot tell the two apart: both are a lost connection, which the
	// adapter's contract calls unknown for a write, for the same reason.
	t.Logf("cut: %v; drop: %v", cutErr, dropErr)
	cc, dc := cql.Classify(cutErr), cql.Classify(dropErr)
	if workloads.Classify(cc) != workloads.ClassUnknown || workloads.Classify(dc) != workloads.ClassUnknown || workloads.ReasonOf(cc) != workloads.ReasonOf(dc) {
		t.Errorf("cut classified %v (%s), drop %v (%s); want both unknown for one reason",
			workloads.Classify(cc), workloads.ReasonOf(cc), workloads.Classify(dc), workloads.ReasonOf(dc))
	}
	var re gocql.RequestError
	if errors.As(cutErr, &re) || errors.As(dropErr, &re) {
		t.Errorf("a server error reached the client: %v", re)
	}
}

// TestAdapterThroughProxy runs stores/cql's budget adapter through the proxy with a
// drop armed at probability 1 the whole time: gocql's control connection, the SERIAL
// reads of the LWT loop and of Balance must pass, and only the LWT is dropped. Then the
// idempotent decrement (a conditional batch) is cut, and its retry finds the op id the
// cut batch recorded.
func TestAdapterThroughProxy(t *testing.T) {
	direct(t) // the keyspace exists before the adapter adds its tables
	px, evs := startProxy(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cql.Open(ctx, cql.Config{Hosts: []string{px.Addr()}, Keyspace: keyspace, Timeout: 30 * time.Second, ConnectTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Reset(ctx, 10); err != nil {
		t.Fatal(err)
	}

	px.Faults().Drop.Set(1, 0)
	sess, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Decrement(ctx, workloads.Request{OpID: "op-1"})
	sess.Close()
	if !errors.Is(err, workloads.ErrUnknown) {
		t.Fatalf("dropped decrement: %v, want an unknown outcome", err)
	}
	if b, err := c.Balance(ctx); err != nil || b != 10 {
		t.Fatalf("balance %d (%v) with the drop still armed, want 10: the SERIAL read is no commit point", b, err)
	}
	got := evs.All()
	if len(got) != 1 || got[0].Kind != toxics.CommitDrop || !strings.HasPrefix(got[0].Statement, "UPDATE "+keyspace+".budget SET balance = ?") {
		t.Fatalf("events %+v, want one drop, of the LWT", got)
	}
	px.Faults().Drop.Disarm()

	px.Faults().Cut.Set(1, 1)
	sess, err = c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Decrement(ctx, workloads.Request{OpID: "op-2", Idempotent: true})
	sess.Close()
	if !errors.Is(err, workloads.ErrUnknown) {
		t.Fatalf("cut decrement: %v, want an unknown outcome", err)
	}
	got = evs.All()
	if len(got) != 2 || got[1].Kind != toxics.CommitCut || got[1].Truth != toxics.Applied ||
		!strings.HasPrefix(got[1].Statement, "BEGIN BATCH UPDATE "+keyspace+".budget SET balance = ?") || got[1].Tag != "RESULT Rows [applied]=true" {
		t.Fatalf("events %+v, want the cut of the conditional batch", got)
	}
	px.Faults().Cut.Disarm()

	sess, err = c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Decrement(ctx, workloads.Request{OpID: "op-2", Idempotent: true})
	if err != nil || !out.Applied || !out.Replayed || out.Balance != 9 {
		t.Fatalf("retry of the cut decrement: %+v %v, want the recorded outcome (applied, replayed, balance 9)", out, err)
	}
	if b, err := c.Balance(ctx); err != nil || b != 9 {
		t.Fatalf("balance %d (%v), want 9: the cut batch applied once", b, err)
	}
	var _ budget.Store = c
}

// Raw protocol clients, for thousands of connections without a driver's setup cost,
// and for protocol v5, which gocql v1.7.0 does not speak.

func envelope(version byte, stream int16, op byte, body []byte) []byte {
	b := []byte{version, 0, 0, 0, op, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(stream))
	binary.BigEndian.PutUint32(b[5:], uint32(len(body)))
	return append(b, body...)
}

func startupBody() []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 1)
	for _, s := range []string{"CQL_VERSION", "3.0.0"} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b
}

// queryBody is <query><consistency ONE><flags> (v4: a byte, v5: an int).
func queryBody(version byte, stmt string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(stmt)))
	b = append(b, stmt...)
	b = binary.BigEndian.AppendUint16(b, 1)
	if version >= 5 {
		return binary.BigEndian.AppendUint32(b, 0)
	}
	return append(b, 0)
}

type frame struct {
	op     byte
	stream int16
	body   []byte
}

func readEnvelope(r io.Reader) (frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	body := make([]byte, binary.BigEndian.Uint32(h[5:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return frame{}, err
	}
	return frame{op: h[4], stream: int16(binary.BigEndian.Uint16(h[2:])), body: body}, nil
}

// rawV4 connects, runs STARTUP, and sends the counter increment as a QUERY or through
// PREPARE and EXECUTE. It returns the local address and whether the connection ended
// before the increment's reply (a fault); a reply means no fault fired.
func rawV4(addr, stmt string, prepared bool) (string, bool, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	local := c.LocalAddr().String()
	r := bufio.NewReader(c)
	if _, err := c.Write(envelope(4, 0, 0x01, startupBody())); err != nil {
		return local, false, err
	}
	if f, err := readEnvelope(r); err != nil || f.op != 0x02 {
		return local, false, fmt.Errorf("startup: op %#x %v", f.op, err)
	}
	req := envelope(4, 1, 0x07, queryBody(4, stmt))
	if prepared {
		prep := binary.BigEndian.AppendUint32(nil, uint32(len(stmt)))
		if _, err := c.Write(envelope(4, 1, 0x09, append(prep, stmt...))); err != nil {
			return local, false, err
		}
		f, err := readEnvelope(r)
		if err != nil || f.op != 0x08 || len(f.body) < 6 || binary.BigEndian.Uint32(f.body) != 4 {
			return local, false, fmt.Errorf("prepare: op %#x %v", f.op, err)
		}
		n := int(binary.BigEndian.Uint16(f.body[4:]))
		if len(f.body) < 6+n {
			return local, false, errors.New("prepare: short id")
		}
		id := f.body[6 : 6+n]
		body := binary.BigEndian.AppendUint16(nil, uint16(len(id)))
		body = append(body, id...)
		body = append(body, 0, 1, 0) // consistency ONE, no flags
		req = envelope(4, 2, 0x0A, body)
	}
	if _, err := c.Write(req); err != nil {
		return local, false, err
	}
	f, err := readEnvelope(r)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return local, true, nil
	case err != nil:
		return local, false, err
	}
	return local, false, fmt.Errorf("the increment got a reply (op %#x): no fault", f.op)
}

// TestManyCutConnections cuts or drops thousands of connections from concurrent raw
// clients, half of them through prepared statements. Every event must name a client
// that lost its connection, the counter must have grown by exactly the cuts, and no
// goroutine may outlive the proxy.
func TestManyCutConnections(t *testing.T) {
	db := direct(t)
	id := fmt.Sprintf("many-%d", time.Now().UnixNano())
	stmt := "UPDATE " + keyspace + ".hits SET n = n + 1 WHERE id = '" + id + "'"
	ignore := goleak.IgnoreCurrent()
	evs := &faultstest.Log{}
	px, err := faults.Start(faults.Options{Upstream: node.Get(t).Addr, Protocol: toxics.CQL{}, Seed: 3, Events: evs.Add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	px.Faults().Mixed.Set(1, 0)
	const conns = 2000
	start := time.Now()
	lost := faultstest.CutConnections(t, conns, func(i int) (string, error) {
		local, faulted, err := rawV4(px.Addr(), stmt, i%2 == 1)
		if err == nil && !faulted {
			err = errors.New("not faulted")
		}
		return local, err
	})
	t.Logf("%d faulted connections in %v", conns, time.Since(start).Round(time.Millisecond))
	got := evs.All()
	applied := faultstest.CountCuts(t, got, lost, conns)
	for _, e := range got {
		if e.Statement != stmt {
			t.Fatalf("event %+v: statement is not the increment", e)
		}
	}
	var n int64
	if err := db.Query("SELECT n FROM "+keyspace+".hits WHERE id = ?", id).Scan(&n); err != nil && !errors.Is(err, gocql.ErrNotFound) {
		t.Fatal(err)
	}
	if n != int64(applied) {
		t.Errorf("counter %d: the server applied %d increments, the proxy says %d", n, n, applied)
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// v5 segments, written from native_protocol_v5.spec independently of the proxy's
// framer: a 3-byte little-endian header (payload length, self-contained bit 17), its
// CRC24, the payload and its CRC32 (seeded with 4 bytes, as Cassandra does).

func crc24(v uint32) uint32 {
	crc := uint32(0x875060)
	for i := 0; i < 3; i++ {
		crc ^= (v >> (8 * i) & 0xff) << 16
		for j := 0; j < 8; j++ {
			crc <<= 1
			if crc&(1<<24) != 0 {
				crc ^= 0x1974F0B
			}
		}
	}
	return crc
}

func segment(payload []byte, self bool) []byte {
	v := uint32(len(payload))
	if self {
		v |= 1 << 17
	}
	c := crc24(v)
	b := []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(c), byte(c >> 8), byte(c >> 16)}
	b = append(b, payload...)
	sum := crc32.Update(crc32.ChecksumIEEE([]byte{0xfa, 0x2d, 0x55, 0xca}), crc32.IEEETable, payload)
	return binary.LittleEndian.AppendUint32(b, sum)
}

// segments frames one envelope: self-contained if it fits, else split.
func segments(env []byte) []byte {
	const max = 1<<17 - 1
	if len(env) <= max {
		return segment(env, true)
	}
	var out []byte
	for len(env) > 0 {
		n := min(max, len(env))
		out = append(out, segment(env[:n], false)...)
		env = env[n:]
	}
	return out
}

// readSegmentEnvelope reads segments until one envelope is whole.
func readSegmentEnvelope(r io.Reader) (frame, error) {
	var payload []byte
	for {
		var h [6]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return frame{}, err
		}
		v := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16
		if crc24(v) != uint32(h[3])|uint32(h[4])<<8|uint32(h[5])<<16 {
			return frame{}, errors.New("bad segment header crc")
		}
		p := make([]byte, v&(1<<17-1)+4)
		if _, err := io.ReadFull(r, p); err != nil {
			return frame{}, err
		}
		payload = append(payload, p[:len(p)-4]...)
		if len(payload) >= 9 && len(payload) >= 9+int(binary.BigEndian.Uint32(payload[5:])) {
			return readEnvelope(bytes.NewReader(payload))
		}
	}
}

// v5Conn is a raw protocol v5 connection past its handshake.
type v5Conn struct {
	c     net.Conn
	r     *bufio.Reader
	local string
}

func dialV5(t *testing.T, addr string) *v5Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	v := &v5Conn{c: c, r: bufio.NewReader(c), local: c.LocalAddr().String()}
	if _, err := c.Write(envelope(5, 0, 0x01, startupBody())); err != nil {
		t.Fatal(err)
	}
	f, err := readEnvelope(v.r)
	if err != nil || f.op != 0x02 {
		t.Fatalf("v5 startup: op %#x %q %v", f.op, f.body, err)
	}
	return v
}

// query sends a QUERY in segments and returns its reply, or the read error.
func (v *v5Conn) query(stream int16, stmt string) (frame, error) {
	if _, err := v.c.Write(segments(envelope(5, stream, 0x07, queryBody(5, stmt)))); err != nil {
		return frame{}, err
	}
	return readSegmentEnvelope(v.r)
}

// TestProtocolV5 speaks v5 to the real server through the proxy: reads pass with every
// fault armed; an LWT in one segment and a write long enough to span several are cut
// (applied) and dropped (not applied).
func TestProtocolV5(t *testing.T) {
	db := direct(t)
	px, evs := startProxy(t, 5)
	id := fmt.Sprintf("v5-%d", time.Now().UnixNano())
	if err := db.Query("INSERT INTO "+keyspace+".acct (id, balance) VALUES (?, 10)", id).Exec(); err != nil {
		t.Fatal(err)
	}
	px.Faults().Mixed.Set(1, 0)
	v := dialV5(t, px.Addr())
	f, err := v.query(1, "SELECT balance FROM "+keyspace+".acct WHERE id = '"+id+"'")
	if err != nil || f.op != 0x08 || f.stream != 1 {
		t.Fatalf("v5 read with faults armed: op %#x stream %d %v", f.op, f.stream, err)
	}
	px.Faults().Mixed.Disarm()

	update := func(from int64) string {
		return fmt.Sprintf("UPDATE %s.acct SET balance = %d WHERE id = '%s' IF balance = %d", keyspace, from-1, id, from)
	}
	long := func(n int) string {
		return fmt.Sprintf("UPDATE %s.acct SET note = '%s' WHERE id = '%s'", keyspace, strings.Repeat("n", n), id)
	}
	note := func() int {
		var s string
		if err := db.Query("SELECT note FROM "+keyspace+".acct WHERE id = ?", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return len(s)
	}
	tests := []struct {
		name    string
		arm     func(*toxics.Faults)
		stmt    string
		kind    toxics.Kind
		balance int64
		note    int
	}{
		{"cut lwt", func(f *toxics.Faults) { f.Cut.Set(1, 1) }, update(10), toxics.CommitCut, 9, 0},
		{"drop lwt", func(f *toxics.Faults) { f.Drop.Set(1, 1) }, update(9), toxics.CommitDrop, 9, 0},
		{"drop a write spanning segments", func(f *toxics.Faults) { f.Drop.Set(1, 1) }, long(300 << 10), toxics.CommitDrop, 9, 0},
		{"cut a write spanning segments", func(f *toxics.Faults) { f.Cut.Set(1, 1) }, long(200 << 10), toxics.CommitCut, 9, 200 << 10},
	}
	for i, tt := range tests {
		v := dialV5(t, px.Addr())
		tt.arm(px.Faults())
		f, err := v.query(2, tt.stmt)
		px.Faults().Cut.Disarm()
		px.Faults().Drop.Disarm()
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: reply op %#x %q, err %v; want the connection closed", tt.name, f.op, f.body, err)
		}
		if b := serialBalance(t, db, id); b != tt.balance {
			t.Errorf("%s: balance %d, want %d", tt.name, b, tt.balance)
		}
		if n := note(); n != tt.note {
			t.Errorf("%s: note of %d bytes, want %d", tt.name, n, tt.note)
		}
		got := evs.All()
		if len(got) != i+1 {
			t.Fatalf("%s: events %+v, want %d", tt.name, got, i+1)
		}
		if e := got[i]; e.Kind != tt.kind || e.Conn != v.local || !strings.HasPrefix(tt.stmt, strings.TrimSuffix(e.Statement, "...")) {
			t.Errorf("%s: event %+v, want %v on %s", tt.name, e, tt.kind, v.local)
		}
	}
}
