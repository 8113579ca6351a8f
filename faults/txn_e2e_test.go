package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestGroundTruthNamesTheTransaction runs an operation made of three transactions, as
// a service with an idempotency table writes it (check the table for the request in a
// read-only transaction; insert the order; record the request), through the proxy on
// a real PostgreSQL, with commit-cut armed at probability 1 for one transaction after
// another. Each event says which of the connection's transactions was cut, whether it
// wrote, and what it ran; the server's rows agree (the cut of the read-only COMMIT
// changed nothing), and the event is a line of schemas/faults.schema.json.
func TestGroundTruthNamesTheTransaction(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	suffix := fmt.Sprint(time.Now().UnixNano())
	orders, requests := "orders_"+suffix, "requests_"+suffix
	ctx := context.Background()
	if _, err := direct.Exec(ctx, fmt.Sprintf("create table %s (id text primary key); create table %s (id text primary key)", orders, requests)); err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", "faults.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The operation's three transactions, in order.
	txns := []func(c *pgx.Conn, id string) error{
		func(c *pgx.Conn, id string) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, "select count(*) from "+requests+" where id = $1", id).Scan(&n); err != nil {
				return err
			}
			return tx.Commit(ctx)
		},
		func(c *pgx.Conn, id string) error {
			_, err := c.Exec(ctx, "insert into "+orders+" (id) values ($1)", id)
			return err
		},
		func(c *pgx.Conn, id string) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "insert into "+requests+" (id) values ($1)", id); err != nil {
				return err
			}
			return tx.Commit(ctx)
		},
	}
	for _, tt := range []struct {
		cut            int // the transaction cut, from 1
		wrote          bool
		text           string
		order, request bool // rows on the server afterwards
	}{
		{1, false, "select count(*) from " + requests + " where id = $1; commit", false, false},
		{2, true, "insert into " + orders + " (id) values ($1)", true, false},
		{3, true, "insert into " + requests + " (id) values ($1); commit", true, true},
	} {
		t.Run(fmt.Sprintf("cut of transaction %d", tt.cut), func(t *testing.T) {
			id := fmt.Sprint("op-", tt.cut)
			px, evs := startProxy(t, srv, 1)
			c := connect(t, dsnVia(t, srv, px.Addr()))
			for i, txn := range txns[:tt.cut] {
				if i == tt.cut-1 {
					px.Faults().Cut.Set(1, 0) // commit-cut:1
				}
				err := txn(c, id)
				if i < tt.cut-1 && err != nil {
					t.Fatalf("transaction %d before the cut: %v", i+1, err)
				}
				if i == tt.cut-1 && !ambiguous(err) {
					t.Fatalf("transaction %d under commit-cut:1: %v, want a cut", i+1, err)
				}
			}
			got := evs.All()
			if len(got) != 1 {
				t.Fatalf("events %+v, want one", got)
			}
			e := got[0]
			if e.Kind != toxics.CommitCut || e.Txn == nil || e.Txn.Seq != uint64(tt.cut) || e.Txn.Wrote != tt.wrote || e.Txn.Text != tt.text {
				t.Errorf("event %+v txn %+v, want a cut of transaction %d, wrote %v, text %q", e, e.Txn, tt.cut, tt.wrote, tt.text)
			}
			var order, request bool
			if err := direct.QueryRow(ctx, fmt.Sprintf("select exists (select 1 from %s where id = $1), exists (select 1 from %s where id = $1)", orders, requests), id).Scan(&order, &request); err != nil {
				t.Fatal(err)
			}
			if order != tt.order || request != tt.request {
				t.Errorf("server holds order %v, request %v; want %v, %v", order, request, tt.order, tt.request)
			}
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("event line %s does not follow schemas/faults.schema.json: %v", line, err)
			}
		})
	}
}
