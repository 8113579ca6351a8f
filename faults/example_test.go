package faults_test

import (
	"fmt"
	"io"
	"net"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
)

// Start a proxy for the Redis protocol in front of a TCP upstream, drop every commit
// point, and read the event that says what happened. The upstream here only echoes:
// a dropped commit never reaches it, which is the point.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	events := make(chan toxics.Event, 1)
	px, err := faults.Start(faults.Options{
		Upstream: ln.Addr().String(),
		Protocol: toxics.Resp{},
		Seed:     1,
		Events:   func(e toxics.Event) { events <- e },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer px.Close()
	px.Faults().Drop.Set(1, 0) // every commit point, no cap

	c, err := net.Dial("tcp", px.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Fprint(c, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
	_, err = c.Read(make([]byte, 64))
	fmt.Println("client:", err)

	e := <-events
	fmt.Println(e.Kind, e.Truth, e.Statement)
	var t faults.Totals
	t.Add(e)
	fmt.Println(t.Drop, "dropped")
	// Output:
	// client: EOF
	// commit-drop not-applied SET k v
	// 1 dropped
}
