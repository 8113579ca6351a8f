package httppay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments/httppay"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
)

// binDir holds the indoubt binary the exec tests share; TestMain removes it.
var binDir string

// indoubtBinary builds the indoubt command once: exec runs the real binary, as a user
// does.
var indoubtBinary = sync.OnceValues(func() (string, error) {
	var err error
	if binDir, err = os.MkdirTemp("", "indoubt-httppay-"); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "indoubt")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/indoubt/indoubt/cmd/indoubt").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + ": " + string(out))
	}
	return bin, nil
})

// TestExecPythonClient runs a Python client (testdata/client.py, standard library
// only) against the payments API under `indoubt exec --store http --upstream`, with
// response-cut at 0.3 and the final state read from the API's own GET /paid: the
// naive API exits 1 (a retried payment paid twice), the idempotent one 0. The run
// directory's results.json, its judgement again from its files alone and indoubt check
// of it name each payment made twice (naive) and each replay (idempotent).
func TestExecPythonClient(t *testing.T) {
	needTool(t, "python3")
	runExecClient(t, "python3", filepath.Join("testdata", "client.py"), "python")
}

// TestExecNodeClient is TestExecPythonClient with a Node client (testdata/client.mjs,
// its http module only).
func TestExecNodeClient(t *testing.T) {
	needTool(t, "node")
	runExecClient(t, "node", filepath.Join("testdata", "client.mjs"), "js")
}

// needTool skips the test without the program (fails it under CI=true).
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (CI=true: missing fails the run)", name)
		}
		t.Skipf("%s is missing: install it", name)
	}
}

// runExecClient runs the client (interpreter and script; recorders names its
// directory under recorders/) under indoubt exec against the naive and the
// idempotent API.
func runExecClient(t *testing.T, interpreter, script, recorders string) {
	bin, err := indoubtBinary()
	if err != nil {
		t.Fatal(err)
	}
	_, here, _, _ := runtime.Caller(0)
	recDir := filepath.Join(filepath.Dir(here), "..", "..", "..", "recorders", recorders)
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
		if interpreter == "node" {
			final = `node -e 'fetch(process.env.PAID_URL).then((r) => r.text()).then((s) => console.log(s))'`
		}
		cmd := exec.CommandContext(ctx, bin, "exec", "--quiet", "--out", out, "--store", "http", "--upstream", svc.Listener.Addr().String(),
			"--fault", "response-cut:0.3", "--seed", "5", "--model", "exactly-once", "--final-cmd", final,
			"--", interpreter, script, "20")
		cmd.Env = append(os.Environ(), "INDOUBT_RECORDERS="+recDir, "PAID_URL="+svc.URL+"/paid")
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
		// The run directory's results.json names each duplicated payment (naive) or each
		// replay (idempotent), and so do its judgement from its files alone and indoubt
		// check of it.
		runs, _ := filepath.Glob(filepath.Join(out, "*"))
		if len(runs) != 1 {
			t.Fatalf("run directories under --out: %v", runs)
		}
		paid, err := httppay.Paid(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		want := replays(runDirCuts(t, runs[0]))
		if !tt.idempotent {
			want = duplicated(t, paid, runDirCuts(t, runs[0]))
		}
		holdRequests(t, runs[0], want)
		// The console of exec shows the first of them, and indoubt check RUNDIR all.
		for _, w := range want[:min(len(want), report.ConsoleExamples)] {
			if !strings.Contains(string(b), w) {
				t.Errorf("indoubt exec does not say %q:\n%s", w, b)
			}
		}
		text, _ := exec.CommandContext(ctx, bin, "check", runs[0]).Output()
		for _, w := range want {
			if !strings.Contains(string(text), w) {
				t.Errorf("indoubt check %s does not say %q:\n%s", runs[0], w, text)
			}
		}
		ck := exec.CommandContext(ctx, bin, "check", "--json", runs[0])
		cb, err := ck.Output()
		ccode := 0
		if errors.As(err, &exit) {
			ccode = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if ccode != tt.exit {
			t.Fatalf("indoubt check --json %s: exit %d, the run's %d", runs[0], ccode, tt.exit)
		}
		var again results.Results
		if err := json.Unmarshal(cb, &again); err != nil {
			t.Fatalf("indoubt check --json: %v\n%s", err, cb)
		}
		if got := requestsOf(again.Evidence); !slices.Equal(got, want) {
			t.Errorf("indoubt check %s: evidence.requests\n %q\nwant\n %q", runs[0], got, want)
		}
	}
}
