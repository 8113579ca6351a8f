package redispay_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/examples/payments/internal/paytest"
	"github.com/indoubt/indoubt/examples/payments/redispay"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/redistest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

func open(tb testing.TB, srv *indoubttest.Server, idempotent bool) (svc, direct payments.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := redispay.Open(srv.DirectDSN)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dc.Close() })
	if err := redispay.Setup(ctx, dc, paytest.Credits); err != nil {
		tb.Fatal(err)
	}
	pc, err := redispay.Open(srv.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pc.Close() })
	if idempotent {
		return &redispay.Idempotent{Client: pc}, &redispay.Idempotent{Client: dc}
	}
	return &redispay.Naive{Client: pc}, &redispay.Naive{Client: dc}
}

func TestPayments(t *testing.T) {
	// This client names no connection on its charges (pgpay's does, with a tracer):
	// its faults join them by time, one charge at a time.
	paytest.Run(t, paytest.Store{Server: func(tb testing.TB) *indoubttest.Server { return redistest.Redis(tb) }, Open: open, Sequential: true})
}
