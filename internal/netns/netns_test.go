package netns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// needNetwork skips (or fails under CI=true) where no Network can be made.
func needNetwork(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// listenIn opens a TCP listener on ip:0 inside n's namespace, answering each
// connection with one byte.
func listenIn(t *testing.T, n *Node) string {
	t.Helper()
	var ln net.Listener
	if err := onThreadIn(n.ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(n.IP.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte{'!'})
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Patience: a connection that must get through is given time for the kernel to resend
// a lost SYN (its first retry comes after a second; a loaded machine loses some), one
// that must not is watched for a second, in which a path that carries would have
// carried.
const (
	mustReach    = 5 * time.Second
	mustNotReach = time.Second
)

// reaches reports whether a connection dialled by dial to addr gets the listener's
// byte within mustReach.
func reaches(dial func(context.Context, string, string) (net.Conn, error), addr string) bool {
	return reach(dial, addr, mustReach) == nil
}

// cut reports whether a connection dialled by dial to addr fails to get the listener's
// byte within mustNotReach.
func cut(dial func(context.Context, string, string) (net.Conn, error), addr string) bool {
	return reach(dial, addr, mustNotReach) != nil
}

// reach dials addr and reads the listener's byte within patience; the error says why
// it did not: the dial's or the read's.
func reach(dial func(context.Context, string, string) (net.Conn, error), addr string, patience time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(patience))
	b := make([]byte, 1)
	if _, err = c.Read(b); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if b[0] != '!' {
		return fmt.Errorf("read %q, not the listener's byte", b)
	}
	return nil
}

// dialIn dials from inside n's namespace (the socket stays there once made).
func dialIn(n *Node) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := onThreadIn(n.ns, func() error {
			var err error
			var d net.Dialer // ctx bounds it
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// threeNodes is a network of n1, n2 and n3 for a test that needs root and nft, closed
// when the test ends.
func threeNodes(t *testing.T) *Network {
	t.Helper()
	needNetwork(t)
	nw, err := New([]string{"n1", "n2", "n3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	return nw
}

func TestGrudgeCutsNodesAndTheirClientsAndHeals(t *testing.T) {
	nw := threeNodes(t)
	n1, n2, n3 := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	addr1 := listenIn(t, n1)
	addr2 := listenIn(t, n2)
	check := func(what string, dial func(context.Context, string, string) (net.Conn, error), addr string, want bool) {
		t.Helper()
		if want && !reaches(dial, addr) {
			t.Errorf("%s: does not reach in %v, want it to", what, mustReach)
		}
		if !want && !cut(dial, addr) {
			t.Errorf("%s: reaches, want it cut", what)
		}
	}
	check("n2 to n1 before", dialIn(n2), addr1, true)
	check("admin to n1 before", DialFrom(nw.Admin), addr1, true)
	check("client of n3 to n1 before", DialFrom(n3.Client), addr1, true)

	g := Complete([]string{"n1"}, []string{"n2", "n3"})
	if err := nw.Apply(g); err != nil {
		t.Fatal(err)
	}
	got, err := n1.Grudge()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{n2.IP.String(), n3.IP.String(), n2.Client.String(), n3.Client.String()}
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("n1 drops %v, want %v", got, want)
	}
	check("n2 to n1 isolated", dialIn(n2), addr1, false)
	check("n1 to n2 isolated", dialIn(n1), addr2, false)
	check("n3 to n2 same side", dialIn(n3), addr2, true)
	check("client of n3 to n1 isolated", DialFrom(n3.Client), addr1, false)
	check("client of n1 to n1, beside it", DialFrom(n1.Client), addr1, true)
	check("client of n1 to n2, cut with n1", DialFrom(n1.Client), addr2, false)
	check("admin to n1, never partitioned", DialFrom(nw.Admin), addr1, true)

	if err := nw.Apply(nil); err != nil {
		t.Fatal(err)
	}
	check("n2 to n1 healed", dialIn(n2), addr1, true)
	check("client of n3 to n1 healed", DialFrom(n3.Client), addr1, true)

	// One way: n2 drops what n1 sends; n1 still hears n2, but no TCP connection works.
	if err := nw.Apply(Grudge{"n2": {"n1"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := n1.Grudge(); len(got) != 0 {
		t.Errorf("one-way: n1 drops %v, want nothing", got)
	}
	check("n1 to n2 one-way", dialIn(n1), addr2, false)
}

func TestLinkAddressIsCutWithItsNodes(t *testing.T) {
	needNetwork(t)
	nw, err := New([]string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	n1 := nw.Nodes[0]
	addr1 := listenIn(t, n1)
	lip, err := nw.AddLink("n2", "n1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := nw.Relay(lip, addr1)
	if err != nil {
		t.Fatal(err)
	}
	plain := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	if !reaches(plain, r.Addr()) {
		t.Fatal("relay does not reach n1")
	}
	if err := nw.Apply(Complete([]string{"n1"}, []string{"n2"})); err != nil {
		t.Fatal(err)
	}
	if !cut(plain, r.Addr()) {
		t.Error("the link from n2 to n1 still carries while they are partitioned")
	}
	if err := nw.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if !reaches(plain, r.Addr()) {
		t.Error("the link does not carry after the heal")
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	needNetwork(t)
	nw, err := New([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	names, link := nw.Names(), nw.RootLink()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(namedDir, n)); err != nil {
			t.Fatalf("namespace %s not made: %v", n, err)
		}
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(namedDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left: %v", n, err)
		}
	}
	// The root veth goes with the hub, once the kernel has torn the namespace down.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := netlink.LinkByName(link); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("veth %s left after Close", link)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := nw.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestShapes(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(7, 7)) }
	for _, tc := range []struct {
		shape, target string
		// check judges the grudge: who each node hears.
		check func(t *testing.T, g Grudge)
	}{
		{IsolatePrimary, "", func(t *testing.T, g Grudge) {
			comps := g.Components(nodes)
			if len(comps) != 2 || !reflect.DeepEqual(comps[0], []string{"n1"}) {
				t.Errorf("components %v, want [n1] and the rest", comps)
			}
		}},
		{Isolate, "n3", func(t *testing.T, g Grudge) {
			if g.Reach(nodes)["n3"][0] != "n3" || len(g.Reach(nodes)["n3"]) != 1 {
				t.Errorf("n3 hears %v, want itself alone", g.Reach(nodes)["n3"])
			}
		}},
		{Halves, "", func(t *testing.T, g Grudge) {
			comps := g.Components(nodes)
			if len(comps) != 2 || len(comps[0])+len(comps[1]) != 5 || min(len(comps[0]), len(comps[1])) != 2 {
				t.Errorf("components %v, want 2 and 3", comps)
			}
		}},
		{Majority, "", func(t *testing.T, g Grudge) {
			comps := g.Components(nodes)
			for _, c := range comps {
				if slices.Contains(c, "n1") && len(c) != 2 {
					t.Errorf("the primary's component %v, want a minority of 2", c)
				}
			}
			if len(comps) != 2 {
				t.Errorf("components %v", comps)
			}
		}},
		{MajoritiesRing, "", func(t *testing.T, g Grudge) {
			seen := map[string]bool{}
			for _, r := range g.Reach(nodes) {
				if len(r) != 3 {
					t.Errorf("a node hears %v, want a majority of 3", r)
				}
				k := fmtList(r)
				if seen[k] {
					t.Errorf("two nodes hear the same majority %v", r)
				}
				seen[k] = true
			}
			if g.Components(nodes) != nil {
				t.Error("a ring is not a partition into components")
			}
		}},
		{Bridge, "", func(t *testing.T, g Grudge) {
			hearsAll := 0
			for _, r := range g.Reach(nodes) {
				if len(r) == 5 {
					hearsAll++
				}
			}
			if hearsAll != 1 {
				t.Errorf("%d nodes hear everyone, want the bridge alone", hearsAll)
			}
		}},
		{OneWay, "", func(t *testing.T, g Grudge) {
			if len(g.Reach(nodes)["n1"]) != 5 {
				t.Errorf("the primary hears %v, want everyone", g.Reach(nodes)["n1"])
			}
			if g.Receives("n2", "n1") {
				t.Error("n2 hears the primary")
			}
		}},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			g, err := MakeGrudge(tc.shape, tc.target, nodes, "n1", rng())
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, g)
			again, _ := MakeGrudge(tc.shape, tc.target, nodes, "n1", rng())
			if !reflect.DeepEqual(g, again) {
				t.Errorf("same seed, another grudge: %v then %v", g, again)
			}
		})
	}
	for _, tc := range []struct{ shape, target string }{
		{MajoritiesRing, ""}, {Bridge, ""}, {Majority, ""}, {Isolate, "n9"}, {"square", ""},
	} {
		if _, err := MakeGrudge(tc.shape, tc.target, []string{"n1", "n2"}, "n1", rng()); err == nil {
			t.Errorf("%s %s on two nodes: no error", tc.shape, tc.target)
		}
	}
}

func fmtList(xs []string) string {
	s := ""
	for _, x := range xs {
		s += x + ","
	}
	return s
}

// A redirect sends what a node's own processes dial to another node through the
// harness: n2's connection to n1's address lands on a listener of the harness, which
// dialled n1 itself (as a link proxy does), and one from n3 still goes straight to n1.
func TestRedirectPutsTheHarnessOnTheNodesPath(t *testing.T) {
	nw := threeNodes(t)
	n1, n2, n3 := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	addr1 := listenIn(t, n1)
	lip, err := nw.AddLink("n2", "n1")
	if err != nil {
		t.Fatal(err)
	}
	via, err := net.Listen("tcp4", net.JoinHostPort(lip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	var through atomic.Int32
	go func() {
		for {
			c, err := via.Accept()
			if err != nil {
				return
			}
			through.Add(1)
			c.Write([]byte{'!'})
			c.Close()
		}
	}()
	if err := n2.Redirect(addr1, via.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := reach(dialIn(n2), addr1, mustReach); err != nil || through.Load() != 1 {
		t.Fatalf("n2's dial of n1 (%s): %d through the harness (%v), want it redirected there", addr1, through.Load(), err)
	}
	if !reaches(dialIn(n3), addr1) || through.Load() != 1 {
		t.Errorf("n3's dial of n1 went through the harness: only n2's is redirected")
	}
	// The link's address is cut with its nodes: partitioned, n2 cannot reach n1 even
	// through the harness.
	if err := nw.Apply(Complete([]string{"n1"}, []string{"n2"})); err != nil {
		t.Fatal(err)
	}
	if !cut(dialIn(n2), addr1) {
		t.Error("n2 reaches n1 through the redirect while they are partitioned")
	}
	for _, bad := range [][2]string{{"n1", via.Addr().String()}, {addr1, "[::1]:5"}, {addr1, "10.0.0.1:0"}} {
		if err := n2.Redirect(bad[0], bad[1]); err == nil {
			t.Errorf("Redirect(%q, %q): no error", bad[0], bad[1])
		}
	}
}
