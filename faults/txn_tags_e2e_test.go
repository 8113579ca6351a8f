package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestGroundTruthReadsTheStatementTags runs, through the proxy on a real PostgreSQL
// with commit-cut:1, a transfer in an explicit transaction (two UPDATEs and an INSERT
// into a transfer log, as pgx sends them with the extended protocol) and then its
// replay (INSERT ... ON CONFLICT DO NOTHING, which meets the row the first commit
// wrote). The first cut's event carries the tags the server answered and says the
// commit changed rows; the replay's says it changed nothing and did not write, and the
// server agrees: one transfer, balances moved once.
func TestGroundTruthReadsTheStatementTags(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	suffix := fmt.Sprint(time.Now().UnixNano())
	accounts, transfers := "accounts_"+suffix, "transfers_"+suffix
	ctx := context.Background()
	if _, err := direct.Exec(ctx, fmt.Sprintf(`create table %s (id int primary key, balance int);
		insert into %[1]s values (1, 100), (2, 100);
		create table %s (id text primary key)`, accounts, transfers)); err != nil {
		t.Fatal(err)
	}
	transfer := func(c *pgx.Conn, id string) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		tag, err := tx.Exec(ctx, "insert into "+transfers+" (id) values ($1) on conflict do nothing", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			for _, q := range []string{"update " + accounts + " set balance = balance - 5 where id = 1", "update " + accounts + " set balance = balance + 5 where id = 2"} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
		return tx.Commit(ctx)
	}
	px, evs := startProxy(t, srv, 1)
	px.Faults().Cut.Set(1, 0)
	for attempt := range 2 {
		c := connect(t, dsnVia(t, srv, px.Addr()))
		if err := transfer(c, "t1"); !ambiguous(err) {
			t.Fatalf("attempt %d under commit-cut:1: %v, want a cut", attempt+1, err)
		}
	}
	got := evs.All()
	if len(got) != 2 || got[0].Txn == nil || got[1].Txn == nil {
		t.Fatalf("events %+v, want two cuts with their transactions", got)
	}
	first, replay := got[0].Txn, got[1].Txn
	if want := []string{"INSERT 0 1", "UPDATE 1", "UPDATE 1"}; !slices.Equal(first.Tags, want) || first.Changed == nil || !*first.Changed || !first.Wrote {
		t.Errorf("first cut: tags %q changed %v wrote %v; want %q, changed, wrote", first.Tags, first.Changed, first.Wrote, want)
	}
	if want := []string{"INSERT 0 0"}; !slices.Equal(replay.Tags, want) || replay.Changed == nil || *replay.Changed || replay.Wrote {
		t.Errorf("replay's cut: tags %q changed %v wrote %v; want %q, changed nothing, did not write", replay.Tags, replay.Changed, replay.Wrote, want)
	}
	var n, b1 int
	if err := direct.QueryRow(ctx, fmt.Sprintf("select (select count(*) from %s), (select balance from %s where id = 1)", transfers, accounts)).Scan(&n, &b1); err != nil {
		t.Fatal(err)
	}
	if n != 1 || b1 != 95 {
		t.Errorf("server holds %d transfers and balance %d, want 1 and 95", n, b1)
	}
}
