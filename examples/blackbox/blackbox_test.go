package blackbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var pg = servertest.Postgres(postgres.Options{})

// binDir holds the indoubt binary the tests build.
var binDir string

func TestMain(m *testing.M) {
	code := servertest.Main(m, pg)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// indoubtBinary builds the indoubt command once for the package's tests: the README's
// example runs the real binary.
var indoubtBinary = sync.OnceValues(func() (string, error) {
	var err error
	if binDir, err = os.MkdirTemp("", "indoubt-blackbox-"); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "indoubt")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/indoubt/indoubt/cmd/indoubt").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + ": " + string(out))
	}
	return bin, nil
})

// needTools skips (or, under CI, fails) when the example's tools are missing.
func needTools(t *testing.T, srv *postgres.Server) string {
	t.Helper()
	for _, tool := range []struct{ name, hint string }{
		{"psql", "install Debian package postgresql-client"},
		{"ss", "install Debian package iproute2"},
		{"bash", "install bash"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "postgres", Program: tool.name, Hint: tool.hint})
		}
	}
	bin, err := indoubtBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var listeningRE = regexp.MustCompile(`listening on ([0-9a-f.:\[\]]+)`)

// startProxy runs `indoubt proxy` in front of srv with args and returns its address;
// the proxy is stopped with SIGINT when the test ends.
func startProxy(t *testing.T, bin string, srv *postgres.Server, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"proxy", "--protocol", "postgres", "--upstream", srv.Addr, "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("indoubt proxy did not say where it listens")
	}
	return ""
}

// through returns srv's DSN with its address replaced by addr: the launcher's user,
// database and password (when it sets one) stay as they are.
func through(t *testing.T, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// runExample runs payments.sh with n payments through a fresh proxy cutting the reply
// after commit with probability 0.5, then `indoubt check --faults` on what it wrote,
// and returns check's exit code and output.
func runExample(t *testing.T, n string, idempotent bool) (int, string) {
	srv := pg.Get(t)
	bin := needTools(t, srv)
	dir := t.TempDir()
	events := filepath.Join(dir, "faults.jsonl")
	history := filepath.Join(dir, "history.jsonl")
	addr := startProxy(t, bin, srv, "--cut-after-commit", "0.5", "--seed", "7", "--events", events)

	args := []string{n, history}
	if idempotent {
		args = append([]string{"--idempotent"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := exec.CommandContext(ctx, "bash", append([]string{"payments.sh"}, args...)...)
	script.Env = append(os.Environ(), "DSN="+through(t, srv.DSN, addr), "FINAL_DSN="+srv.DSN)
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("payments.sh: %v: %s", err, out)
	}
	followsSchema(t, history)
	check := exec.Command(bin, "check", "--faults", events, history)
	out, err := check.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("indoubt check --faults:\n%s", out)
	return code, string(out)
}

// TestNaiveRetryUnderCutIsInvalid, by hand: the naive client inserts a payment again
// after the proxy cut the reply to its committed INSERT; the final read finds it twice,
// and the proxy's events prove it. (The idempotent client is held to exit 0 under
// indoubt exec below.)
func TestNaiveRetryUnderCutIsInvalid(t *testing.T) {
	code, out := runExample(t, "20", false)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (invalid)", code)
	}
	dup := regexp.MustCompile(`duplicate: op id (p-\d+) is present`).FindStringSubmatch(out)
	if dup == nil {
		t.Fatalf("no duplicate named")
	}
	if !strings.Contains(out, "the proxy: operation "+dup[1]+" (invoked at history event") || !strings.Contains(out, "applied more than once:") {
		t.Errorf("the duplicate %s is not joined to the proxy's proof", dup[1])
	}
}

// runUnderExec runs payments.sh with n payments under `indoubt exec`, in front of the
// launched server, the proxy cutting the reply after commit with probability 0.5, and
// returns exec's exit code and output, as the README's section does.
func runUnderExec(t *testing.T, n string, idempotent bool) (int, string) {
	srv := pg.Get(t)
	bin := needTools(t, srv)
	out := t.TempDir()
	args := []string{"exec", "--quiet", "--out", out, "--dsn", srv.DSN, "--fault", "commit-cut:0.5", "--seed", "7", "--", "bash", "payments.sh"}
	if idempotent {
		args = append(args, "--idempotent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, n)...)
	b, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("indoubt exec:\n%s", b)
	runs, _ := filepath.Glob(filepath.Join(out, "*-exec-postgres-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories: %v", runs)
	}
	followsSchema(t, filepath.Join(runs[0], "history.jsonl"))
	return code, string(b)
}

// TestExecNaiveRetryIsInvalid: the same client under indoubt exec, which launches
// nothing here (--dsn) but does the rest: the proxy, the environment, the check.
func TestExecNaiveRetryIsInvalid(t *testing.T) {
	code, out := runUnderExec(t, "20", false)
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
}

// TestExecIdempotencyKeyIsValid: with the idempotency key, exit 0 under the same cuts.
func TestExecIdempotencyKeyIsValid(t *testing.T) {
	code, out := runUnderExec(t, "20", true)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (valid)", code)
	}
	if !regexp.MustCompile(`commit faults: [1-9]\d* cut after the server committed`).MatchString(out) {
		t.Errorf("no cut fired: the test proves nothing")
	}
	if strings.Contains(out, "took effect more than once") {
		t.Errorf("the proxy proves a payment applied more than once")
	}
}

// followsSchema holds every line the script wrote to the published history schema.
func followsSchema(t *testing.T, path string) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "schemas", "history.schema.json"))
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
			t.Errorf("%s line %d: %v", path, i+1, err)
		}
	}
}
