package recorders_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// pg is the server the --dsn runs share; the other runs have indoubt exec launch one.
var pg = servertest.Postgres(pgserver.Options{})

var binDir string

func TestMain(m *testing.M) {
	code := servertest.Main(m, pg)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// indoubtBinary builds the indoubt command once: exec runs the real binary, as a user
// does.
var indoubtBinary = sync.OnceValues(func() (string, error) {
	var err error
	if binDir, err = os.MkdirTemp("", "indoubt-recorders-"); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "indoubt")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/indoubt/indoubt/cmd/indoubt").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + ": " + string(out))
	}
	return bin, nil
})

// onCI reports whether CI=true, where a missing tool fails instead of skipping.
func onCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// need skips the test (or under CI fails it) unless check says what it needs is here.
func need(t *testing.T, what, hint string, check func() error) {
	t.Helper()
	if err := check(); err != nil {
		msg := fmt.Sprintf("%s is missing (%v): %s", what, err, hint)
		if onCI() {
			t.Fatalf("%s (CI=true: missing fails the run)", msg)
		}
		t.Skip(msg)
	}
}

func needPython(t *testing.T) {
	need(t, "python3 with pytest", "install python3 and pytest", func() error {
		return exec.Command("python3", "-c", "import pytest").Run()
	})
}

func needNode(t *testing.T) {
	need(t, "node", "install Node.js 18 or later", func() error { return exec.Command("node", "--version").Run() })
}

// pythonDeps is where scripts/test installs the Python client's driver.
var pythonDeps = filepath.Join("python", "examples", ".deps")

func needPsycopg(t *testing.T) {
	needPython(t)
	need(t, "psycopg", "run scripts/test, which installs it into recorders/python/examples/.deps", func() error {
		cmd := exec.Command("python3", "-c", "import psycopg")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDeps)
		return cmd.Run()
	})
}

func needPG(t *testing.T) {
	needNode(t)
	need(t, "node-postgres (pg)", "run scripts/test, which installs it into recorders/js/examples/node_modules", func() error {
		_, err := os.Stat(filepath.Join("js", "examples", "node_modules", "pg", "package.json"))
		return err
	})
}

// TestPythonRecorderOwnTests runs the Python recorder's tests under pytest.
func TestPythonRecorderOwnTests(t *testing.T) {
	needPython(t)
	out, err := exec.Command("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "python").CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("pytest: %v", err)
	}
	if !regexp.MustCompile(`\b[1-9]\d* passed\b`).Match(out) {
		t.Fatalf("pytest ran no test")
	}
}

// TestNodeRecorderOwnTests runs the Node recorder's tests under node --test.
func TestNodeRecorderOwnTests(t *testing.T) {
	needNode(t)
	out, err := exec.Command("node", "--test", filepath.Join("js", "indoubt-history.test.mjs")).CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	if !regexp.MustCompile(`(?m)^# pass [1-9]\d*$`).Match(out) || !regexp.MustCompile(`(?m)^# fail 0$`).Match(out) {
		t.Fatalf("node --test ran no test, or one failed")
	}
}

// TestRecordersWriteTheFormat: a history of every model written by each recorder
// follows the schema line by line, reads back with indoubt's reader, and gets from
// the checker the verdict its file name says.
func TestRecordersWriteTheFormat(t *testing.T) {
	for _, lang := range []struct {
		name string
		need func(*testing.T)
		cmd  []string
	}{
		{"python", needPython, []string{"python3", filepath.Join("testdata", "models.py")}},
		{"node", needNode, []string{"node", filepath.Join("testdata", "models.mjs")}},
	} {
		t.Run(lang.name, func(t *testing.T) {
			lang.need(t)
			dir := t.TempDir()
			if out, err := exec.Command(lang.cmd[0], append(lang.cmd[1:], dir)...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v: %s", lang.cmd, err, out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
			var models []string
			for _, f := range files {
				followsSchema(t, f)
				h, ops, err := histories.ReadFile(f, false)
				if err != nil {
					t.Fatal(err)
				}
				res, err := checker.Check(context.Background(), h, ops, checker.Options{})
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				want := strings.Split(filepath.Base(f), ".")[1]
				if res.Verdict.String() != want {
					t.Errorf("%s: %s (%s), want %s", filepath.Base(f), res.Verdict, res.Summary, want)
				}
				models = append(models, h.Model)
			}
			for _, m := range recorderModels {
				if !slices.Contains(models, m) {
					t.Errorf("no history of model %s written", m)
				}
			}
		})
	}
}

// recorderModels are the models whose values the recorders' helpers write. Transfer
// and exactly-once-response take the format's values as they are documented, with no
// helper of their own yet.
var recorderModels = []string{"budget", checker.RegisterModel, checker.CASRegisterModel, "counter", checker.ExactlyOnceModel, checker.BankModel,
	checker.ListAppendModel, checker.RWRegisterModel, checker.ModelsModel, checker.BudgetsModel}

// payments runs a payments client through indoubt exec on PostgreSQL, with the proxy
// cutting the reply after commit with probability 0.3, and returns exec's exit code,
// its output and the run directory. dsn "" has exec launch its own server.
func payments(t *testing.T, dsn string, client ...string) (int, string, string) {
	t.Helper()
	bin, err := indoubtBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := []string{"exec", "--quiet", "--out", out, "--fault", "commit-cut:0.3", "--seed", "3"}
	if dsn != "" {
		args = append(args, "--dsn", dsn)
	}
	if client[0] == "python3" {
		args = append(args, "--model", "exactly-once", "--final-sql", "SELECT tag, count(*) FROM payments GROUP BY tag")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append(args, "--"), client...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDeps)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("indoubt %s:\n%s", strings.Join(cmd.Args[1:], " "), buf.String())
	runs, _ := filepath.Glob(filepath.Join(out, "*-exec-postgres-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories: %v", runs)
	}
	followsSchema(t, filepath.Join(runs[0], "history.jsonl"))
	resultsFollowSchema(t, filepath.Join(runs[0], "results.json"))
	return code, buf.String(), runs[0]
}

// recheck runs indoubt check --faults on a run directory and returns its exit code.
func recheck(t *testing.T, run string) int {
	t.Helper()
	bin, _ := indoubtBinary()
	err := exec.Command(bin, "check", "--faults", filepath.Join(run, "faults.jsonl"), filepath.Join(run, "history.jsonl")).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestPaymentsThroughExec: each client, naive, applies again the payments whose reply
// the proxy cut (exit 1, the duplicates named and joined to the proxy's proof); with
// an idempotency key the same faults change nothing twice (exit 0). The Python client
// leaves the final read to --final-sql, the Node one records it itself; the naive runs
// have exec launch PostgreSQL, the idempotent ones go to a server named by --dsn.
func TestPaymentsThroughExec(t *testing.T) {
	py := []string{"python3", filepath.Join("python", "examples", "payments.py")}
	js := []string{"node", filepath.Join("js", "examples", "payments.mjs")}
	for _, c := range []struct {
		name   string
		need   func(*testing.T)
		client []string
	}{{"python-psycopg", needPsycopg, py}, {"node-pg", needPG, js}} {
		t.Run(c.name+"/naive", func(t *testing.T) {
			c.need(t)
			code, out, run := payments(t, "", append(c.client, "20")...)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (invalid)", code)
			}
			dup := regexp.MustCompile(`op id (p-\d+) is present (twice|\d+ times) in the final state`).FindStringSubmatch(out)
			if dup == nil {
				t.Fatalf("no duplicate named")
			}
			if !strings.Contains(out, "the proxy: operation "+dup[1]+" ") {
				t.Errorf("the duplicate %s is not joined to the proxy's proof", dup[1])
			}
			if got := recheck(t, run); got != 1 {
				t.Errorf("indoubt check of the run directory: exit %d, want 1", got)
			}
		})
		t.Run(c.name+"/idempotent", func(t *testing.T) {
			c.need(t)
			srv := pg.Get(t)
			code, out, run := payments(t, srv.DSN, append(c.client, "--idempotent", "20")...)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (valid)", code)
			}
			if !regexp.MustCompile(`commit faults: [1-9]\d* cut after the server committed`).MatchString(out) {
				t.Errorf("no cut fired: the test proves nothing")
			}
			if !regexp.MustCompile(`ground truth: [1-9]\d* operations? committed by a cut and retried changed nothing`).MatchString(out) {
				t.Errorf("the cut payments are not named as replays")
			}
			if strings.Contains(out, "took effect more than once") {
				t.Errorf("a payment is said to have applied more than once")
			}
			if got := recheck(t, run); got != 0 {
				t.Errorf("indoubt check of the run directory: exit %d, want 0", got)
			}
		})
	}
}

// followsSchema holds every line of a history to the published schema.
func followsSchema(t *testing.T, path string) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", "history.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err == nil {
			err = sch.Validate(v)
		}
		if err != nil {
			t.Errorf("%s line %d: %v", filepath.Base(path), i+1, err)
		}
	}
}

// resultsFollowSchema holds results.json to the published schema.
func resultsFollowSchema(t *testing.T, path string) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", "results.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	if err == nil {
		err = sch.Validate(v)
	}
	if err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// TestFormatPageExample: the whole history shown in docs/history-format.md follows the
// schema and gets the verdict the page says (invalid: p-2 is there twice).
func TestFormatPageExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "history-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := strings.SplitN(strings.SplitN(string(b), "## A whole history", 2)[1], "## The header", 2)[0]
	var lines []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	path := filepath.Join(t.TempDir(), "example.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	followsSchema(t, path)
	h, ops, err := histories.ReadFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := checker.Check(context.Background(), h, ops, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.Invalid || len(res.Anomalies) != 1 || res.Anomalies[0].Kind != "duplicate" || !strings.Contains(res.Anomalies[0].Explanation, "p-2") {
		t.Errorf("the page's example: %s %s %+v", res.Verdict, res.Summary, res.Anomalies)
	}
}
