package pgpay_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/examples/payments/internal/paytest"
	"github.com/indoubt/indoubt/examples/payments/pgpay"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

func open(tb testing.TB, srv *indoubttest.Server, idempotent bool) (svc, direct payments.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := func(dsn string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.ConnConfig.Tracer = connTracer{}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(p.Close)
		return p
	}
	dp := pool(srv.DirectDSN)
	if err := pgpay.Setup(ctx, dp, paytest.Credits); err != nil {
		tb.Fatal(err)
	}
	pp := pool(srv.DSN)
	if idempotent {
		return &pgpay.Idempotent{Pool: pp}, &pgpay.Idempotent{Pool: dp}
	}
	return &pgpay.Naive{Pool: pp}, &pgpay.Naive{Pool: dp}
}

// connTracer names, on the charge's operation, the connection each statement uses.
type connTracer struct{}

func (connTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if op := paytest.OpOf(ctx); op != nil {
		op.Conn(c.PgConn().Conn().LocalAddr().String())
	}
	return ctx
}

func (connTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestPayments(t *testing.T) {
	paytest.Run(t, paytest.Store{Server: func(tb testing.TB) *indoubttest.Server { return pgtest.Postgres(tb) }, Open: open})
}
