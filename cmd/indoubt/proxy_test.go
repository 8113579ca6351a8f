package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/servers"
	"github.com/indoubt/indoubt/servers/servertest"
)

// lockedBuffer is a bytes.Buffer safe for the proxy's goroutines and the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProxyHelp(t *testing.T) {
	var out, errb bytes.Buffer
	err := proxyCommand(context.Background(), []string{"--help"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Example", "-upstream", "-cut-after-commit", "-drop-commit", "-events", "-api", "-fault", "-match"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestProxyBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--upstream", "127.0.0.1:5432", "--cut-after-commit", "2"},
		{"--upstream", "127.0.0.1:5432", "--drop-commit", "-0.1"},
		{"--upstream", "127.0.0.1:5432", "--drop-commit", "NaN"},
		{"--upstream", "127.0.0.1:5432", "--cut-after-commit", "0.7", "--drop-commit", "0.7"},
		{"--upstream", "127.0.0.1:5432", "--protocol", "mysql"},
		{"--upstream", "127.0.0.1:5432", "--protocol", "tcp", "--cut-after-commit", "1"},
		{"--upstream", "127.0.0.1:5432", "--fault", "commit-cut:3"},
		{"--upstream", "127.0.0.1:5432", "--fault", "commit-cut:0.1", "--cut-after-commit", "0.1"},
		{"--upstream", "127.0.0.1:5432", "--match", "(unclosed"},
		{"--upstream", "127.0.0.1:5432", "--listen", "256.1.1.1:0"},
		{"--upstream", "127.0.0.1:5432", "--listen", "127.0.0.1:0", "--api", "nonsense"},
		{"--upstream", "127.0.0.1:5432", "--events", "/no/such/dir/faults.jsonl"},
		{"--upstream", "127.0.0.1:5432", "--no-such-flag"},
		{"--upstream", "127.0.0.1:5432", "extra"},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := proxyCommand(ctx, args, &out, &errb)
		cancel()
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") || out.Len() > 0 {
			t.Errorf("%q: error %q, stdout %q: want one line and nothing on stdout", args, err, out.String())
		}
	}
}

func startPostgres(t *testing.T) *servers.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := servers.StartPostgres(ctx, servers.PostgresOptions{})
	if err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// TestProxyPsql runs psql through `indoubt proxy` with each commit fault at
// probability 1: psql's COMMIT fails either way; the proxy's event says whether it
// applied, and the server agrees.
func TestProxyPsql(t *testing.T) {
	srv := startPostgres(t)
	psql := filepath.Join(srv.BinDir, "psql")
	if _, err := os.Stat(psql); err != nil {
		servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "postgres", Program: "psql", Hint: "install Debian package postgresql-client"})
	}
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "create table account (id int primary key, balance int not null)"); err != nil {
		t.Fatal(err)
	}
	for i, tt := range []struct {
		flag    string
		kind    toxics.Kind
		applied bool
	}{
		{"--cut-after-commit", toxics.CommitCut, true},
		{"--drop-commit", toxics.CommitDrop, false},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			if _, err := direct.Exec(ctx, "insert into account values ($1, 100)", i); err != nil {
				t.Fatal(err)
			}
			events := filepath.Join(t.TempDir(), "faults.jsonl")
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			var out, errb lockedBuffer
			done := make(chan error, 1)
			go func() {
				done <- proxyCommand(pctx, []string{"--upstream", srv.Addr, "--listen", "127.0.0.1:0", tt.flag, "1", "--events", events, "--seed", "5"}, &out, &errb)
			}()
			addr := waitListening(t, &errb, done)
			host, port, _ := strings.Cut(addr, ":")
			cmd := exec.Command(psql, "-X", "-h", host, "-p", port, "-U", servers.PostgresUser, "-d", servers.PostgresDatabase,
				"-v", "ON_ERROR_STOP=1",
				"-c", "begin",
				"-c", "update account set balance = balance - 1 where id = "+string(rune('0'+i)),
				"-c", "commit")
			cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5", "PGPASSWORD="+srv.Password)
			psqlOut, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("psql succeeded through the proxy:\n%s", psqlOut)
			}
			if !strings.Contains(string(psqlOut), "server closed the connection unexpectedly") {
				t.Errorf("psql output %q, want a lost connection", psqlOut)
			}
			var bal int
			if err := direct.QueryRow(ctx, "select balance from account where id = $1", i).Scan(&bal); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 99, false: 100}[tt.applied]; bal != want {
				t.Errorf("balance %d after the %v, want %d", bal, tt.kind, want)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("proxy: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 || !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} `+tt.kind.String()+` (applied|not-applied) 127\.0\.0\.1:\d+ "commit"`).MatchString(lines[0]) {
				t.Errorf("stdout %q, want one %v line", out.String(), tt.kind)
			}
			b, err := os.ReadFile(events)
			if err != nil {
				t.Fatal(err)
			}
			var e toxics.Event
			if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil {
				t.Fatalf("events file %q: %v", b, err)
			}
			wantTruth := toxics.NotApplied
			if tt.applied {
				wantTruth = toxics.Applied
			}
			if e.Kind != tt.kind || e.Truth != wantTruth || e.Statement != "commit" || e.Protocol != "postgres" {
				t.Errorf("event %+v, want %v %v on commit", e, tt.kind, wantTruth)
			}
		})
	}
}

var listeningRE = regexp.MustCompile(`listening on (\S+),`)

// waitListening returns the proxy's address from its status line on stderr.
func waitListening(t *testing.T, errb *lockedBuffer, done chan error) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(errb.String()))
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				return m[1]
			}
		}
		select {
		case err := <-done:
			t.Fatalf("proxy ended before listening: %v (stderr %q)", err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("proxy did not report its address: stderr %q", errb.String())
	return ""
}
