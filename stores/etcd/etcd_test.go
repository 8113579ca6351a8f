package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	etcdserver "github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
	"github.com/indoubt/indoubt/workloads/txn"
)

var srv = servertest.New("etcd", func(ctx context.Context) (*etcdserver.Cluster, error) {
	return etcdserver.Start(ctx, etcdserver.Options{})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, srv)) }

func open(t testing.TB, cfg Config) *Client {
	t.Helper()
	cfg.Endpoints = srv.Get(t).Endpoints
	return storetest.Open(t, func(ctx context.Context) (*Client, error) { return Open(ctx, cfg) })
}

func TestBudget(t *testing.T) {
	storetest.Budget(t, func(t *testing.T) budget.Store { return open(t, Config{}) })
}

// The conformance suite holds linearizable reads to read-your-writes across sessions.
// Serializable reads keep it only on one member: a member acknowledges a write once it
// has applied it itself, while another member may not have yet (a read there missed a
// write just acknowledged in a run of this test), which is what serializable means;
// the register runs of internal/runner show it.
func TestRegister(t *testing.T) {
	t.Run("linearizable", func(t *testing.T) {
		storetest.Register(t, func(t *testing.T) register.Store { return open(t, Config{Reads: Linearizable}).Register() })
	})
	t.Run("serializable on one member", func(t *testing.T) {
		storetest.Register(t, func(t *testing.T) register.Store {
			c := open(t, Config{Reads: Serializable})
			c.cfg.Endpoints = c.cfg.Endpoints[:1]
			return c.Register()
		})
	})
}

func TestParseDSN(t *testing.T) {
	c, err := ParseDSN("etcd://127.0.0.1:2379/p?addr=127.0.0.1:2479&addr=127.0.0.1:2579&reads=serializable")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Endpoints) != 3 || c.Endpoints[2] != "127.0.0.1:2579" || c.Reads != Serializable || c.Prefix != "p" {
		t.Errorf("ParseDSN = %+v", c)
	}
	back, err := ParseDSN(DSN(c.Endpoints, c.Reads))
	if err != nil || len(back.Endpoints) != 3 || back.Reads != Serializable {
		t.Errorf("ParseDSN(DSN(...)) = %+v, %v", back, err)
	}
	for _, bad := range []string{"http://127.0.0.1:2379", "etcd://127.0.0.1:2379/?reads=stale", "etcd://127.0.0.1:2379/?addr=nohost", "etcd://127.0.0.1:2379/?x=1", "etcd:///"} {
		if _, err := ParseDSN(bad); err == nil {
			t.Errorf("ParseDSN(%q) accepted", bad)
		}
	}
}

// Failures met for real, each with its class: a request whose context ended before it
// was sent is definite, one to no member at all is not a success or a conflict, and
// decrements racing on one balance (compares lost, read again) each take one or
// nothing.
func TestClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := open(t, Config{})
	r := c.Register()

	t.Run("ended context before sending is definite", func(t *testing.T) {
		s, err := r.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		done, stop := context.WithCancel(ctx)
		stop()
		err = s.Write(done, workloads.Request{}, "k", 1)
		storetest.CheckClass(t, err, workloads.ClassDefinite, workloads.ReasonNotSent)
	})
	t.Run("no member answering is unknown", func(t *testing.T) {
		// A port nothing listens on: the write waits for a connection that never
		// comes, and the client cannot tell whether it was sent.
		dead, err := Open(ctx, Config{Endpoints: srv.Get(t).Endpoints})
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		dead.cfg.Endpoints = []string{"127.0.0.1:1"}
		dead.cfg.Timeout = 500 * time.Millisecond
		s, err := dead.Register().Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.Write(ctx, workloads.Request{}, "k", 1)
		if workloads.Classify(err) == workloads.ClassNone || workloads.Classify(err) == workloads.ClassConflict {
			t.Errorf("write with no member: %v (class %v), want unknown or definite", err, workloads.Classify(err))
		}
		t.Logf("write with no member: %v: class %v, reason %s", err, workloads.Classify(err), workloads.ReasonOf(err))
	})
	t.Run("racing decrements each take one or nothing", func(t *testing.T) {
		if err := c.Reset(ctx, 10); err != nil {
			t.Fatal(err)
		}
		// Many sessions at once on a budget of 10: every success takes exactly one,
		// every conflict takes none; the balance tells.
		const n = 8
		sessions := make([]budget.Session, n)
		for i := range sessions {
			s, err := c.Session(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sessions[i] = s
		}
		applied, conflicts := 0, 0
		type result struct {
			o   budget.Outcome
			err error
		}
		results := make(chan result, n)
		for _, s := range sessions {
			go func() {
				o, err := s.Decrement(ctx, workloads.Request{})
				results <- result{o, err}
			}()
		}
		for range n {
			res := <-results
			o, err := res.o, res.err
			switch {
			case err == nil && o.Applied:
				applied++
			case errors.Is(err, workloads.ErrConflict):
				conflicts++
			case err != nil:
				t.Errorf("decrement: %v", err)
			}
		}
		bal, err := c.Balance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bal != int64(10-applied) {
			t.Errorf("balance %d after %d applied decrements (and %d conflicts) of 10", bal, applied, conflicts)
		}
		t.Logf("%d applied, %d conflicts", applied, conflicts)
	})
}

// A transaction reads its own appends and writes, and the next sees what it committed.
func TestTxns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := open(t, Config{})
	la, err := c.Txns(workloads.ListAppend)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := la.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done, _, err := s.Txn(ctx, workloads.Request{}, txn.Txn{{F: txn.Append, Key: 1, Value: 1}, {F: txn.Append, Key: 1, Value: 2}, {F: txn.Read, Key: 1}, {F: txn.Read, Key: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(done[2].List, done[3].List); got != "[1 2] []" {
		t.Errorf("reads %s, want [1 2] []", got)
	}
	done, _, err = s.Txn(ctx, workloads.Request{}, txn.Txn{{F: txn.Read, Key: 1}})
	if err != nil || fmt.Sprint(done[0].List) != "[1 2]" {
		t.Errorf("next read %v, %v; want [1 2]", done, err)
	}
	rw, err := c.Txns(workloads.RWRegister)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done, _, err = r.Txn(ctx, workloads.Request{}, txn.Txn{{F: txn.Read, Key: 5}, {F: txn.Write, Key: 5, Value: 9}, {F: txn.Read, Key: 5}})
	if err != nil || done[0].Found || !done[2].Found || done[2].Value != 9 {
		t.Errorf("register txn %v, %v; want absent then 9", done, err)
	}
	if _, err := c.Txns("budget"); err == nil {
		t.Error("Txns(budget) accepted")
	}
}
