package twopc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"

	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// pair is the package's two PostgreSQL servers, prepared transactions on.
type pair []*pgserver.Server

func (p pair) Stop() error {
	var errs []error
	for _, s := range p {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}

var pgs = servertest.New("postgres x2", func(ctx context.Context) (pair, error) {
	return pgserver.StartMany(ctx, 2, pgserver.Options{MaxPreparedTransactions: 16})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pgs)) }

// openPair opens a cluster of mode over the package's servers with 4 rows (0 and 2 on
// server 0, 1 and 3 on server 1).
func openPair(t *testing.T, mode Mode) (*Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var dsns []string
	for _, p := range pgs.Get(t) {
		dsns = append(dsns, p.DSN)
	}
	c, err := Open(ctx, Options{DSNs: dsns, Mode: mode, LogPath: filepath.Join(t.TempDir(), "decisions.jsonl"), Conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Reset(ctx, 4); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

// prepare leaves gid prepared on server with row's counter raised by 1.
func prepare(t *testing.T, ctx context.Context, c *Cluster, server, row int, gid string) {
	t.Helper()
	conn, err := c.pools[server].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{"BEGIN", "UPDATE simplecount SET counter = counter + 1 WHERE id = $1", "PREPARE TRANSACTION '" + gid + "'"} {
		var args []any
		if q[0] == 'U' {
			args = []any{row}
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoverFollowsTheLog: a gid whose commit the log holds is committed on every
// participant; one prepared on a participant without a decision is rolled back
// (presumed abort). The naive coordinator commits both, breaking the second's
// atomicity. Before recovery, Settle after a crash finds the rows the prepared
// transactions hold and times a writer blocked on each.
func TestRecoverFollowsTheLog(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		want map[int]int64 // row -> counter after recovery
	}{
		{Logged, map[int]int64{0: 101, 1: 101, 2: 100}},
		{Naive, map[int]int64{0: 101, 1: 101, 2: 101}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			c, ctx := openPair(t, tc.mode)
			decided, undecided := GIDPrefix+"a", GIDPrefix+"b"
			prepare(t, ctx, c, 0, 0, decided)
			prepare(t, ctx, c, 1, 1, decided)
			prepare(t, ctx, c, 0, 2, undecided)
			if c.log != nil {
				if err := c.log.Write(Record{GID: decided, Participants: []int{0, 1}, Decision: Commit}); err != nil {
					t.Fatal(err)
				}
			}
			c.Crash()
			rep, res, err := c.Settle(ctx, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if rep == nil || len(rep.InDoubt) != 3 || len(rep.Probes) != 3 || len(res) != 3 {
				t.Fatalf("report %+v, resolutions %+v: want 3 in doubt, probed and resolved", rep, res)
			}
			for _, p := range rep.Probes {
				if p.Err != "" || p.Timeouts == 0 || p.Blocked < 250*time.Millisecond {
					t.Errorf("probe %+v: want a writer blocked until recovery", p)
				}
			}
			for _, r := range res {
				want := Commit
				if r.GID == undecided && tc.mode == Logged {
					want = Abort
				}
				if r.Decision != want || r.Err != "" || r.Logged != (tc.mode == Logged && r.GID == decided) {
					t.Errorf("resolution %+v, want %s", r, want)
				}
			}
			rows, err := c.Rows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for row, want := range tc.want {
				if rows[row] != want {
					t.Errorf("row %d = %d, want %d", row, rows[row], want)
				}
			}
			if left, err := c.Prepared(ctx); err != nil || len(left) != 0 {
				t.Errorf("left prepared %v (%v)", left, err)
			}
		})
	}
}

// TestTransferMarksBothSides: a distributed and a local transfer each leave a marker
// beside each side's update, and a read of two rows sees them.
func TestTransferMarksBothSides(t *testing.T) {
	c, ctx := openPair(t, Logged)
	if err := c.Transfer(ctx, "0-0", 0, 1); err != nil { // two servers
		t.Fatal(err)
	}
	if err := c.Transfer(ctx, "0-1", 2, 0); err != nil { // one server
		t.Fatal(err)
	}
	va, vb, err := c.ReadRows(ctx, "0-2", 0, 1)
	if err != nil || va != transfer.Initial || vb != transfer.Initial+1 {
		t.Fatalf("rows 0, 1 = %d, %d (%v); want %d, %d", va, vb, err, transfer.Initial, transfer.Initial+1)
	}
	m0, err := c.Markers(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := c.Markers(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m0["0-0"]) != 1 || len(m1["0-0"]) != 1 || len(m0["0-1"]) != 2 || len(m1["0-1"]) != 0 {
		t.Errorf("markers %v on server 0, %v on server 1", m0, m1)
	}
	if total, err := c.ReadTotal(ctx); err != nil || total != 4*transfer.Initial {
		t.Errorf("total %d (%v)", total, err)
	}
}
