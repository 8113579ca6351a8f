package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asBinary runs the real main (signal handling, exit code) inside the test binary when
// INDOUBT_TEST_ARGS is set, so that tests can start indoubt as a process of its own and
// signal it.
func asBinary() {
	args := os.Getenv("INDOUBT_TEST_ARGS")
	if args == "" {
		return
	}
	os.Args = append([]string{"indoubt"}, strings.Split(args, "\x1f")...)
	main()
}

// startBinary starts indoubt with args as a child process.
func startBinary(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunAsBinary$")
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_ARGS="+strings.Join(args, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &errb
}

// TestRunAsBinary is the entry point of the child processes of startBinary; on its
// own it does nothing.
func TestRunAsBinary(t *testing.T) { asBinary() }

// hardRegisterHistory writes a cas-register history whose search runs for minutes:
// writers writes left open, concurrent with a read of a value none of them wrote, so
// that every order of every subset of the writes is tried before it is refused.
func hardRegisterHistory(t *testing.T, writers int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"header":{"format":"indoubt-history/1","workload":"register","model":"cas-register","seed":1,"params":{"initial":0}}}` + "\n")
	i := 0
	ev := func(format string, a ...any) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,`+format+"}\n", append([]any{i, i}, a...)...)
		i++
	}
	for w := range writers {
		ev(`"process":%d,"type":"invoke","f":"write","value":%d`, w, w+1)
	}
	for w := range writers {
		ev(`"process":%d,"type":"info","f":"write","error":"conn closed"`, w)
	}
	ev(`"process":%d,"type":"invoke","f":"read"`, writers)
	ev(`"process":%d,"type":"ok","f":"read","value":-5`, writers)
	path := filepath.Join(t.TempDir(), "hard.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckStopsOnSignal: a check with no --timeout of a history that takes minutes
// stops within a second of SIGINT or SIGTERM, exit 2, saying it was interrupted.
func TestCheckStopsOnSignal(t *testing.T) {
	path := hardRegisterHistory(t, 24)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, out, errb := startBinary(t, "check", path)
			time.Sleep(time.Second) // well into the search
			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 5s after %v", sig)
			}
			if took := time.Since(sent); took > time.Second {
				t.Errorf("stopped %v after %v, want within a second", took, sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Errorf("exit %d, want 2 (stdout %q, stderr %q)", code, out, errb)
			}
			if !strings.Contains(out.String(), "unknown") || !strings.Contains(out.String(), "interrupted") {
				t.Errorf("stdout %q does not say unknown, interrupted", out)
			}
		})
	}
}
