package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/redact"
)

// Two runs against one DSN share its tables (or keys): each reads the other's writes,
// and both said "invalid" with a hundred premature rejections and no fault. A run on a
// DSN therefore holds a lock on the database while it runs, and a second run is
// refused with one line:
//
//   - PostgreSQL: a session advisory lock (pg_try_advisory_lock) of a key of
//     indoubt's own, held by a connection of its own; the server releases it when
//     the session ends, a killed run's included.
//   - Redis: the key indoubt:run-lock, set only if absent, to a token of the run's,
//     with an expiry renewed while the run lasts (a killed run's lapses in
//     redisLockTTL).
//
// A store's row names its lock (backend.lock); other stores (MongoDB, Cassandra) take
// none: docs/stores.md says so. indoubt run and indoubt exec take it (LockDSN).

// PGRunLockKey is the advisory lock key of a run: "indoubt" in ASCII.
const PGRunLockKey = 0x696e646f75627400

// pgLockWait is how long a run waits for the PostgreSQL lock before it is refused.
const pgLockWait = 5 * time.Second

// redisRunLockKey and redisLockTTL are the Redis lock's key and expiry.
const (
	redisRunLockKey = "indoubt:run-lock"
	redisLockTTL    = 30 * time.Second
)

// errDSNInUse is the error of a DSN another run holds.
var errDSNInUse = errors.New("another indoubt run is using this database: two runs on one database share its tables, and each would read the other's writes as anomalies; wait for it to end, or give another database")

// LockDSN takes the run lock of store's database at dsn, and returns its release. A
// store that takes no lock, and no DSN (a launched server), return a release that does
// nothing.
func LockDSN(ctx context.Context, store StoreName, dsn string) (func(), error) {
	if b, ok := lookupBackend(store); ok && b.lock != nil && dsn != "" {
		unlock, err := b.lock(ctx, dsn)
		if err != nil && strings.ContainsAny(err.Error(), "\r\n") {
			// A driver's dial error may list each address tried on a line of its own.
			return nil, errors.New(strings.Join(strings.Fields(err.Error()), " "))
		}
		if err != nil {
			return nil, err
		}
		return unlock, nil
	}
	return func() {}, nil
}

func lockPostgres(ctx context.Context, dsn string) (func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: take the run's lock: %v", redact.DSN(dsn), err)
	}
	// A run killed a moment ago holds the lock until the server has seen its connection
	// close and ended its session: tried again for pgLockWait before refusing, so that a
	// run started right after a killed one is not refused for the server's lag.
	var got bool
	for deadline := time.Now().Add(pgLockWait); ; {
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(PGRunLockKey)).Scan(&got); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("%s: take the run's lock: %v", redact.DSN(dsn), err)
		}
		if got || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			conn.Close(context.Background())
			return nil, fmt.Errorf("%s: take the run's lock: %v", redact.DSN(dsn), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !got {
		conn.Close(context.Background())
		return nil, fmt.Errorf("%s: %w (its advisory lock %d was held for %v)", redact.DSN(dsn), errDSNInUse, int64(PGRunLockKey), pgLockWait)
	}
	return func() {
		// Unlocked before the connection closes: the server releases a closed
		// session's locks only once its backend has ended, after Close returns, and a
		// run started next (the next in a sweep, a test's next) would find it held.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", int64(PGRunLockKey))
		conn.Close(uctx)
	}, nil
}

// quietLog is go-redis's package-level logger, silenced: the lock's dial failures reach
// the caller as its error, and a run refused is one line (stores/redis silences it too,
// but only once a client opens, after the lock).
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func lockRedis(ctx context.Context, dsn string) (func(), error) {
	redis.SetLogger(quietLog{})
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: take the run's lock: %v", redact.DSN(dsn), err)
	}
	c := redis.NewClient(opt)
	b := make([]byte, 16)
	rand.Read(b)
	token := hex.EncodeToString(b)
	ok, err := c.SetNX(ctx, redisRunLockKey, token, redisLockTTL).Result()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: take the run's lock: %v", redact.DSN(dsn), err)
	}
	if !ok {
		c.Close()
		return nil, fmt.Errorf("%s: %w (its key %s is set)", redact.DSN(dsn), errDSNInUse, redisRunLockKey)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(redisLockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.Expire(context.Background(), redisRunLockKey, redisLockTTL)
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		// Deleted only if still the run's own token.
		c.Eval(context.Background(), `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`, []string{redisRunLockKey}, token)
		c.Close()
	}, nil
}
