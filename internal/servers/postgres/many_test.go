package postgres_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func TestPostgresManyPrepared(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := filepath.Join(t.TempDir(), "postgres.log")
	pgs, err := postgres.StartMany(ctx, 3, postgres.Options{MaxPreparedTransactions: 17, LogPath: logs})
	servertest.SkipOrFail(t, err)
	defer func() {
		for _, p := range pgs {
			if err := p.Stop(); err != nil {
				t.Error(err)
			}
		}
	}()
	ports := map[int]bool{}
	for i, p := range pgs {
		if ports[p.Port] {
			t.Errorf("server %d shares port %d", i, p.Port)
		}
		ports[p.Port] = true
		if want := filepath.Join(filepath.Dir(logs), "postgres-"+string(rune('0'+i))+".log"); p.LogPath != want {
			t.Errorf("server %d logs to %s, want %s", i, p.LogPath, want)
		}
		conn, err := pgx.Connect(ctx, p.DSN)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := conn.QueryRow(ctx, "SHOW max_prepared_transactions").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "17" {
			t.Errorf("server %d: max_prepared_transactions = %s, want 17", i, got)
		}
		// The setting is what makes two-phase commit possible at all.
		if _, err := conn.Exec(ctx, "BEGIN; CREATE TABLE t (x int); PREPARE TRANSACTION 'g'"); err != nil {
			t.Fatalf("server %d: prepare: %v", i, err)
		}
		if _, err := conn.Exec(ctx, "ROLLBACK PREPARED 'g'"); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
}
