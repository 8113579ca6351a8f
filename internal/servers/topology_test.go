package servers_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// A replicated PostgreSQL streams to its standby; after a failover the standby takes
// writes through the two-host DSN and holds what the primary committed (synchronous
// replication: every acknowledged commit).
func TestReplicatedPostgresFailover(t *testing.T) {
	for _, mode := range []string{servers.ReplicationSync, servers.ReplicationAsync} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rp, err := servers.StartReplicatedPostgres(ctx, servers.ReplicatedPostgresOptions{Replication: mode})
			servertest.SkipOrFail(t, err)
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Stop()
			c, err := pgx.Connect(ctx, rp.DSN)
			if err != nil {
				t.Fatal(err)
			}
			var addr string
			if err := c.QueryRow(ctx, "select inet_server_port()::text").Scan(&addr); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, "create table t (v int); insert into t values (1)"); err != nil {
				t.Fatal(err)
			}
			var standbys int
			if err := c.QueryRow(ctx, "select count(*) from pg_stat_replication where state = 'streaming'").Scan(&standbys); err != nil || standbys != 1 {
				t.Fatalf("streaming standbys: %d, %v", standbys, err)
			}
			var syncState string
			_ = c.QueryRow(ctx, "select sync_state from pg_stat_replication").Scan(&syncState)
			if want := map[string]string{"sync": "sync", "async": "async"}[mode]; syncState != want {
				t.Errorf("sync_state %q, want %q", syncState, want)
			}
			c.Close(ctx)
			if mode == servers.ReplicationAsync {
				time.Sleep(500 * time.Millisecond) // let the standby replay the row
			}
			if err := rp.Failover(ctx); err != nil {
				t.Fatal(err)
			}
			c, err = pgx.Connect(ctx, rp.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := c.Exec(ctx, "insert into t values (2)"); err != nil {
				t.Fatalf("write on the promoted standby: %v", err)
			}
			var n int
			if err := c.QueryRow(ctx, "select count(*) from t").Scan(&n); err != nil || n != 2 {
				t.Errorf("rows on the new primary: %d, %v; want 2", n, err)
			}
		})
	}
}
