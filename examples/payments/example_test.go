package payments_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/indoubt/indoubt/examples/payments"
)

// Retry is the naive wrapper: it retries any error, telling the hook about each one.
// After a lost reply to a commit that applied, the retry applies it again.
func ExampleRetry() {
	ctx := payments.OnRetry(context.Background(), func(err error) { fmt.Println("retrying after:", err) })
	balance := 10
	attempts := 0
	got, err := payments.Retry(ctx, func(context.Context) (int, error) {
		attempts++
		balance-- // the charge commits on the server...
		if attempts == 1 {
			return 0, errors.New("conn closed") // ...and the reply is lost
		}
		return balance, nil
	})
	fmt.Println(got, err, "after", attempts, "attempts")
	// Output:
	// retrying after: conn closed
	// 8 <nil> after 2 attempts
}
