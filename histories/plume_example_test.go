package histories_test

import (
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// A history in Plume's text format, as AWDIT reads it too: session 0 writes keys 1
// and 2 in transaction 0; session 1 reads them in transaction 1, key 2 still at its
// initial value 0; an aborted transaction (-1) wrote key 1.
func ExampleReadPlume() {
	text := "w(1,1,0,0)\nw(2,1,0,0)\nr(1,1,1,1)\nr(2,0,1,1)\nw(1,9,0,-1)\n"
	ops, err := histories.ReadPlume(strings.NewReader(text), "h.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		fmt.Println(op.Process, op.Type, string(op.Value))
	}
	// Output:
	// 0 ok [["w",1,1],["w",2,1]]
	// 1 ok [["r",1,1],["r",2,null]]
	// 2 fail [["w",1,9]]
}
