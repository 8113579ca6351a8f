package mongopay_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/examples/payments/internal/paytest"
	"github.com/indoubt/indoubt/examples/payments/mongopay"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/mongotest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

func open(tb testing.TB, srv *indoubttest.Server, idempotent bool) (svc, direct payments.Service) {
	ledger := func(dsn string) mongopay.Ledger {
		c, err := mongopay.Open(dsn)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.Disconnect(ctx)
		})
		return mongopay.Ledger{Credits: paytest.Credits, Charges: c.Database(srv.Database).Collection("charges")}
	}
	p, d := ledger(srv.DSN), ledger(srv.DirectDSN)
	if idempotent {
		return &mongopay.Idempotent{Ledger: p}, &mongopay.Idempotent{Ledger: d}
	}
	return &mongopay.Naive{Ledger: p}, &mongopay.Naive{Ledger: d}
}

func TestPayments(t *testing.T) {
	// This client names no connection on its charges (pgpay's does, with a tracer):
	// its faults join them by time, one charge at a time.
	paytest.Run(t, paytest.Store{Server: func(tb testing.TB) *indoubttest.Server { return mongotest.Mongo(tb) }, Open: open, Sequential: true})
}
