package bank_test

import (
	"fmt"

	"github.com/indoubt/indoubt/workloads/bank"
)

// The history header's params a bank run records: every account at its initial
// balance, which the checker holds every read's total to.
func ExampleWorkload_Params() {
	w := bank.New(nil) // the store is needed only to run
	w.Accounts = 3
	fmt.Println(w.Name(), w.Model(), string(w.Params()["accounts"]))
	// Output: bank bank {"0":10,"1":10,"2":10}
}
