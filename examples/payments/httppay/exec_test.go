package httppay_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments/httppay"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// indoubtBinary builds the indoubt command once: exec runs the real binary, as a user
// does.
var indoubtBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "indoubt-httppay-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "indoubt")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/indoubt/indoubt/cmd/indoubt").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + ": " + string(out))
	}
	return bin, nil
})

// TestExecPythonClient runs a Python client (testdata/client.py, standard library
// only) against the payments API under `indoubt exec --store http --upstream`, with
// response-cut at 0.3 and the final state read from the API's own GET /paid: the
// naive API exits 1 (a retried payment paid twice), the idempotent one 0.
func TestExecPythonClient(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is missing (CI=true: missing fails the run)")
		}
		t.Skip("python3 is missing: install python3")
	}
	bin, err := indoubtBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	_, here, _, _ := runtime.Caller(0)
	recorders := filepath.Join(filepath.Dir(here), "..", "..", "..", "recorders", "python")
	for _, tt := range []struct {
		idempotent bool
		exit       int
	}{{false, 1}, {true, 0}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		db := pgtest.Postgres(t)
		pool, err := pgxpool.New(ctx, db.DirectDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if err := httppay.Setup(ctx, pool); err != nil {
			t.Fatal(err)
		}
		svc := httptest.NewServer(&httppay.Handler{Pool: pool, Idempotent: tt.idempotent})
		defer svc.Close()
		out := t.TempDir()
		final := `python3 -c 'import urllib.request, os; print(urllib.request.urlopen(os.environ["PAID_URL"]).read().decode())'`
		cmd := exec.CommandContext(ctx, bin, "exec", "--quiet", "--out", out, "--store", "http", "--upstream", svc.Listener.Addr().String(),
			"--fault", "response-cut:0.3", "--seed", "5", "--model", "exactly-once", "--final-cmd", final,
			"--", "python3", filepath.Join("testdata", "client.py"), "20")
		cmd.Env = append(os.Environ(), "INDOUBT_RECORDERS="+recorders, "PAID_URL="+svc.URL+"/paid")
		b, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.exit {
			t.Fatalf("idempotent %v: exit %d, want %d:\n%s", tt.idempotent, code, tt.exit, b)
		}
		if tt.exit == 1 && !strings.Contains(string(b), "duplicate") {
			t.Errorf("naive: the output names no duplicate:\n%s", b)
		}
		t.Logf("idempotent %v: exit %d\n%s", tt.idempotent, code, b)
	}
}
