package redis_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers/redis"
)

// TestRedisProcessFaults checks that a killed Redis keeps an acknowledged write with
// persistence always and loses it with persistence none, on the same port and password.
func TestRedisProcessFaults(t *testing.T) {
	for _, tc := range []struct {
		persistence string
		kept        bool
	}{{redis.Always, true}, {redis.NoPersistence, false}} {
		t.Run(tc.persistence, func(t *testing.T) {
			r := startRedis(t, redis.Options{Persistence: tc.persistence})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if got := redisCLI(t, r, "SET", "k", "v1"); got != "OK" {
				t.Fatalf("SET: %q", got)
			}
			port := r.Port
			if err := r.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if r.Port != port {
				t.Errorf("port %d after Start, was %d", r.Port, port)
			}
			got := redisCLI(t, r, "GET", "k")
			if kept := got == "v1"; kept != tc.kept {
				t.Errorf("GET after kill: %q; want kept=%v", got, tc.kept)
			}
			if err := r.Pause(); err != nil {
				t.Fatal(err)
			}
			c, err := net.DialTimeout("tcp", r.Addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			if n, err := c.Read(buf); err == nil {
				t.Errorf("a paused Redis answered %q", buf[:n])
			}
			c.Close()
			if err := r.Resume(); err != nil {
				t.Fatal(err)
			}
			if got := redisCLI(t, r, "SET", "k", "v2"); got != "OK" {
				t.Fatalf("SET after resume: %q", got)
			}
			if err := r.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			got = redisCLI(t, r, "GET", "k")
			if kept := got == "v2"; kept != tc.kept {
				t.Errorf("GET after restart: %q; want kept=%v", got, tc.kept)
			}
			if !tc.kept && strings.TrimSpace(got) != "" {
				t.Errorf("GET after restart without persistence: %q, want nothing", got)
			}
		})
	}
}
