package etcdcounter_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/examples/etcdcounter"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/apitest"
	"github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

// etcdBinary finds etcd as indoubt's launcher does (etcd.Find: INDOUBT_ETCD_BIN, else
// the cache scripts/prepare-etcd builds into); without one the test skips, or fails
// under CI=true.
func etcdBinary(t *testing.T) string {
	t.Helper()
	p, err := etcd.Find("")
	if err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	return p
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEtcd launches one etcd member on loopback for the test and returns its client
// address; it is killed when the test ends.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin := etcdBinary(t)
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	cmd := exec.Command(bin, "--name", "n1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "n1=http://"+peer, "--log-outputs", filepath.Join(dir, "etcd.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c, err := etcdcounter.Dial(client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _, err := c.Get(ctx, "ready")
		cancel()
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd at %s not ready: %v", client, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const txn = "^POST /etcdserverpb.KV/Txn$"

// drive raises the counter workers×each times through the proxy, one logical increment
// per op (the op id is the request id of IncrementOnce), then reads it directly.
func drive(t *testing.T, api *indoubttest.Server, once bool, workers, each int) *indoubttest.Recorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := indoubttest.NewRecorder(t, api)
	var wg sync.WaitGroup
	for range workers {
		w := rec.Worker()
		c, err := etcdcounter.Dial(api.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			for range each {
				op := w.Invoke("increment", nil)
				c.OnRetry, c.OnConn = op.Retried, op.Conn
				var wrote int64
				var err error
				if once {
					wrote, _, err = c.IncrementOnce(ctx, "counter", op.ID())
				} else {
					wrote, err = c.IncrementNaive(ctx, "counter")
				}
				if errors.Is(err, etcdcounter.ErrMoved) {
					op.Fail(err) // never applied: the Txn compared false every time
					continue
				}
				op.Done(indoubttest.Incremented(wrote), err)
			}
		})
	}
	wg.Wait()
	api.Disarm()
	direct, err := etcdcounter.Dial(api.DirectAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	n, _, err := direct.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	rec.Read("read", indoubttest.Count(n))
	return rec
}

// TestCutTxnIsRecorded: a response-cut of a Txn names the gRPC method, its stream and
// the :status 200 etcd sent; the counter was raised although the client got an error.
func TestCutTxnIsRecorded(t *testing.T) {
	api := apitest.GRPC(t, startEtcd(t))
	api.Arm("response-cut:1,max=1,match=" + txn)
	c, err := etcdcounter.Dial(api.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var retried []error
	c.OnRetry = func(err error) { retried = append(retried, err) }
	wrote, err := c.IncrementNaive(context.Background(), "counter")
	evs := api.Events()
	if err != nil || len(evs) != 1 || len(retried) != 1 {
		t.Fatalf("increment %d, %v; retried %v; events %+v: want one cut, retried once", wrote, err, retried, evs)
	}
	r := evs[0].Request
	if r == nil || r.Path != "/etcdserverpb.KV/Txn" || r.Stream == 0 || r.Status != 200 || evs[0].Protocol != "http2" {
		t.Fatalf("event %+v request %+v: want the Txn's stream and its 200", evs[0], r)
	}
	// The naive retry raised it again: 2 for one increment.
	if wrote != 2 {
		t.Fatalf("the naive increment wrote %d, want 2 (the cut Txn applied, then the retry)", wrote)
	}
}

// TestNaiveOverCounts: under response-cut of the Txns, the naive retry raises the
// counter more times than increments were acknowledged; the counter check fails.
func TestNaiveOverCounts(t *testing.T) {
	api := apitest.GRPC(t, startEtcd(t))
	api.Arm("response-cut:0.2,match=" + txn)
	rep := indoubttest.Evaluate(t, drive(t, api, false, 3, 15), indoubttest.Counter(0))
	if rep.Verdict != checker.Invalid || !rep.Found("unexplained-increments") {
		t.Fatalf("verdict %v, anomalies %v: want increments no operation accounts for", rep.Verdict, rep.Anomalies)
	}
	if len(api.Events()) == 0 {
		t.Fatal("no Txn was cut")
	}
}

// TestOnceIsValid: with the request id compared in the Txn, every increment counts
// once whatever the cuts.
func TestOnceIsValid(t *testing.T) {
	api := apitest.GRPC(t, startEtcd(t))
	api.Arm("response-cut:0.2,match=" + txn)
	indoubttest.Check(t, drive(t, api, true, 3, 15), indoubttest.Counter(0))
	if len(api.Events()) == 0 {
		t.Fatal("no Txn was cut")
	}
}
