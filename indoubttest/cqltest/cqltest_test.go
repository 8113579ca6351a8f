package cqltest_test

import (
	"os"
	"testing"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/cqltest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

// A write that is its own commit, cut after Cassandra applied it: the recorder makes the
// lost reply info, and the check of an exactly-once ledger, read around the proxy,
// passes because nothing was retried.
func TestCassandra(t *testing.T) {
	srv := cqltest.Cassandra(t)
	session := func(addr string) *gocql.Session {
		cl := gocql.NewCluster(addr)
		cl.Keyspace = srv.Database
		cl.DisableInitialHostLookup = true
		s, err := cl.CreateSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	direct := session(srv.DirectAddr)
	if err := direct.Query(`CREATE TABLE effects (tag text PRIMARY KEY)`).Exec(); err != nil {
		t.Fatal(err)
	}
	proxied := session(srv.Addr)
	srv.Arm("commit-cut:1,max=1")
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	for range 3 {
		op := w.Invoke("apply", nil)
		op.Done(nil, proxied.Query(`INSERT INTO effects (tag) VALUES (?)`, op.ID()).Exec())
	}
	srv.Disarm()
	if n := len(srv.Events()); n != 1 {
		t.Fatalf("%d faults fired, want 1", n)
	}
	state := checker.ExactlyOnceState{}
	iter := direct.Query(`SELECT tag FROM effects`).Iter()
	var tag string
	for iter.Scan(&tag) {
		state[tag]++
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	rec.Read("read", state)
	if res := indoubttest.Check(t, rec, indoubttest.ExactlyOnce()); res.Verdict != checker.Valid {
		t.Fatalf("verdict %v", res.Verdict)
	}
}
