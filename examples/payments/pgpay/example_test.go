package pgpay_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments/pgpay"
)

// The idempotent service: the caller's key makes a retry return the first receipt.
func ExampleIdempotent_Charge() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/shop?sslmode=disable")
	if err != nil {
		return
	}
	defer pool.Close()
	if err := pgpay.Setup(ctx, pool, 100); err != nil {
		return
	}
	svc := &pgpay.Idempotent{Pool: pool}
	r, err := svc.Charge(ctx, "order-1234")
	fmt.Println(r.Applied, r.Balance, err)
}
