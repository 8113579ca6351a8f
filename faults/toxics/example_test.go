package toxics_test

import (
	"fmt"

	"github.com/indoubt/indoubt/faults/toxics"
)

// A relay of one's own passes each direction of a connection through its Session.
// Here a Redis client's SET goes to the server, whose +OK proves the commit: with the
// cut armed, the proof never reaches the client, the connection ends, and the event
// says the write was applied.
func ExampleSession() {
	commits, err := toxics.NewCommits(toxics.Config{
		Protocol: toxics.Resp{},
		Events: func(e toxics.Event) {
			fmt.Println("event:", e.Kind, e.Truth, e.Conn, e.Statement)
		},
	})
	if err != nil {
		panic(err)
	}
	commits.Faults.Cut.Set(1, 0) // cut every commit from now on
	s := commits.Open("127.0.0.1:50000")
	toServer := func(b []byte) error { fmt.Printf("to server: %q\n", b); return nil }
	toClient := func(b []byte) error { fmt.Printf("to client: %q\n", b); return nil }

	fmt.Println("open:", s.Requests([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"), toServer))
	fmt.Println("open:", s.Replies([]byte("+OK\r\n"), toClient))
	// Output:
	// to server: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
	// open: true
	// event: commit-cut applied 127.0.0.1:50000 SET k v
	// open: false
}
