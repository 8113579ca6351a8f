package servers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// launchers names the servers whose leftovers the tests below make, each with a start
// that returns the server's pid, its temporary directory and its Stop.
var launchers = map[string]func(ctx context.Context, dir string) (int, string, func() error, error){
	"postgres": func(ctx context.Context, dir string) (int, string, func() error, error) {
		pg, err := postgres.Start(ctx, postgres.Options{Dir: dir})
		if err != nil {
			return 0, "", nil, err
		}
		return pg.Pid(), pg.Dir, pg.Stop, nil
	},
	"redis": func(ctx context.Context, dir string) (int, string, func() error, error) {
		r, err := redis.Start(ctx, redis.Options{Dir: dir, Persistence: redis.Always})
		if err != nil {
			return 0, "", nil, err
		}
		return r.Pid(), r.Dir, r.Stop, nil
	},
	"mariadb": func(ctx context.Context, dir string) (int, string, func() error, error) {
		m, err := mariadb.Start(ctx, mariadb.Options{Dir: dir})
		if err != nil {
			return 0, "", nil, err
		}
		return m.Pid(), m.Dir, m.Stop, nil
	},
}

// TestKilledHarnessLeftoversAreReaped launches a server in a child test process, kills
// the child with SIGKILL (it cannot Stop anything), and expects the server to die with
// it, its directory to be listed as a leftover, and the next launch in the same parent
// to remove it.
func TestKilledHarnessLeftoversAreReaped(t *testing.T) {
	if kind := os.Getenv("INDOUBT_TEST_LEFTOVER_KIND"); kind != "" {
		pid, dir, _, err := launchers[kind](context.Background(), os.Getenv("INDOUBT_TEST_LEFTOVER_DIR"))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(pid, dir)
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	for _, kind := range []string{"postgres", "redis", "mariadb"} {
		t.Run(kind, func(t *testing.T) {
			parent := servertest.ReachableDir(t)
			cmd, line := servertest.Rerun(t, "TestKilledHarnessLeftoversAreReaped", "INDOUBT_TEST_LEFTOVER_KIND="+kind, "INDOUBT_TEST_LEFTOVER_DIR="+parent)
			var pid int
			var dir string
			if _, err := fmt.Sscan(line, &pid, &dir); err != nil {
				if strings.Contains(line, "not installed") || strings.Contains(line, "not found") {
					servertest.SkipOrFail(t, &servers.NotInstalledError{Server: kind, Program: kind, Hint: line})
				}
				t.Fatalf("child said %q", line)
			}
			defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }()
			if want := fmt.Sprintf("indoubt-%s-%d-", kind, cmd.Process.Pid); !strings.HasPrefix(filepath.Base(dir), want) {
				t.Errorf("dir %s: want its name to start with %s", dir, want)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(pid)) == 0 }) {
				t.Fatalf("server processes outlived the harness: %v", servertest.GroupAlive(pid))
			}
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("the killed harness's directory: %v; want it left for the test", err)
			}

			left, err := servers.FindLeftovers(parent)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 1 || left[0].Dir != dir || left[0].Owner != cmd.Process.Pid || left[0].Server != 0 || left[0].Bytes == 0 {
				t.Fatalf("FindLeftovers: %+v, want only %s of pid %d, no server", left, dir, cmd.Process.Pid)
			}

			// The next launch of any server in the same parent reaps it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, newDir, stop, err := launchers["redis"](ctx, parent)
			servertest.SkipOrFail(t, err)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s after the next launch: %v, want it removed", dir, err)
			}
			// The live server's own directory is not a leftover.
			if left, err := servers.FindLeftovers(parent); err != nil || len(left) != 0 {
				t.Errorf("FindLeftovers with a live server in %s: %+v, %v; want none", newDir, left, err)
			}
			if _, err := os.Stat(newDir); err != nil {
				t.Errorf("the live server's dir: %v", err)
			}
		})
	}
}
