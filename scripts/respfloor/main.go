// Command respfloor is the floor scripts/bench-budget-redis reads indoubt's Redis figure
// against: the budget's EVALSHA from N goroutines for a fixed time, with nothing of the
// harness around it (no history, no retry policy, no progress, no report).
//
// With -client goredis each goroutine owns a go-redis client set up as indoubt's Redis
// sessions are (one connection, context timeouts, no driver retries, no identity
// handshake): what go-redis and Go's network stack cost before indoubt adds anything.
// With -client raw each goroutine writes the command's RESP bytes on its own TCP
// connection and reads the one-line reply: what any Go client costs at least on this
// machine, the same request on the same number of connections.
//
// It prints one line: the calls completed and the seconds they took.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/indoubt/indoubt/scripts/internal/floor"
)

func main() {
	client := flag.String("client", "goredis", "goredis or raw")
	addr := flag.String("addr", "", "Redis address host:port")
	password := flag.String("password", "", "Redis password")
	clients := flag.Int("clients", 16, "goroutines, each with its own connection")
	d := flag.Duration("time", 10*time.Second, "how long to call")
	sha := flag.String("sha", "", "SHA1 of the loaded budget script")
	balance := flag.String("balance-key", "", "the budget's balance key")
	ops := flag.String("ops-key", "", "the budget's applied-operations key")
	protocol := flag.Int("protocol", 3, "RESP version go-redis speaks: 3 (its default, and indoubt's) or 2")
	flag.Parse()
	if *addr == "" || *sha == "" || *balance == "" || *ops == "" || *clients < 1 || *d <= 0 ||
		*client != "goredis" && *client != "raw" || *protocol != 2 && *protocol != 3 {
		fmt.Fprintln(os.Stderr, "usage: respfloor -client goredis|raw -addr HOST:PORT -password PW -sha SHA -balance-key K -ops-key K [-clients N] [-time D] [-protocol 2|3]")
		os.Exit(3)
	}
	n, took, err := run(*clients, *d, func() (func() error, func(), error) {
		if *client == "raw" {
			return rawCall(*addr, *password, *sha, *balance, *ops)
		}
		return goredisCall(*addr, *password, *sha, *balance, *ops, *protocol)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "respfloor:", err)
		os.Exit(1)
	}
	fmt.Printf("%d calls in %.3f s\n", n, took.Seconds())
}

// run connects clients callers, then has each call until d has passed, and returns the
// calls completed and the time from the first to the last.
func run(clients int, d time.Duration, connect func() (func() error, func(), error)) (int64, time.Duration, error) {
	calls := make([]func() error, 0, clients)
	for range clients {
		call, closer, err := connect()
		if err != nil {
			return 0, 0, err
		}
		defer closer()
		// One call before the clock starts, so every connection is dialed outside it.
		if err := call(); err != nil {
			return 0, 0, err
		}
		calls = append(calls, call)
	}
	return floor.Run(calls, d)
}

func goredisCall(addr, password, sha, balance, ops string, protocol int) (func() error, func(), error) {
	c := goredis.NewClient(&goredis.Options{
		Addr: addr, Password: password, Protocol: protocol,
		ContextTimeoutEnabled: true, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1, DialerRetries: 1,
		PoolSize: 1, MaxActiveConns: 1, PipelinePoolSize: -1,
	})
	ctx := context.Background()
	keys := []string{balance, ops}
	return func() error { return c.EvalSha(ctx, sha, keys, "").Err() }, func() { c.Close() }, nil
}

func rawCall(addr, password, sha, balance, ops string) (func() error, func(), error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	if password != "" {
		w.Write(command("AUTH", password))
		if err := w.Flush(); err != nil {
			conn.Close()
			return nil, nil, err
		}
		if err := reply(r); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	req := command("EVALSHA", sha, "2", balance, ops, "")
	return func() error {
		if _, err := w.Write(req); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return reply(r)
	}, func() { conn.Close() }, nil
}

// command encodes args as a RESP array of bulk strings.
func command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// reply reads one reply made of lines only (simple string, error, integer, or an array
// of those: all that AUTH and the budget script answer), or returns why it could not.
func reply(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	switch {
	case len(line) < 3:
		return fmt.Errorf("short reply %q", line)
	case line[0] == '-':
		return errors.New(string(line[1 : len(line)-2]))
	case line[0] == '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return fmt.Errorf("bad array header %q", line)
		}
		for range n {
			if err := reply(r); err != nil {
				return err
			}
		}
	case line[0] != '+' && line[0] != ':':
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}
