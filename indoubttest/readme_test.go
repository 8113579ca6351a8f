package indoubttest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlocks returns the go.mod and the Go file that the README's section "Validate
// your own retry logic" shows.
func readmeBlocks(t *testing.T) (gomod, code string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Validate your own retry logic\n")
	if i < 0 {
		t.Fatal("README.md has no section \"Validate your own retry logic\"")
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	block := func(lang string) string {
		k := strings.Index(s, "\n```"+lang+"\n")
		if k < 0 {
			t.Fatalf("the section has no ```%s block", lang)
		}
		rest := s[k+len("\n```"+lang+"\n"):]
		end := strings.Index(rest, "\n```")
		if end < 0 {
			t.Fatalf("the ```%s block does not end", lang)
		}
		return rest[:end+1]
	}
	return block("go.mod"), block("go")
}

// The README's example works in a new module made from the go.mod lines it shows, with
// the replace line pointed at this clone: it builds, runs against a launched
// PostgreSQL, and fails the way the README says. It needs no network when the module
// cache holds the modules (go.sum is this module's): where it would, it skips.
func TestReadmeExampleInANewModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own (-short)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	gomod, code := readmeBlocks(t)
	if !strings.Contains(gomod, "replace github.com/indoubt/indoubt => /path/to/indoubt\n") {
		t.Fatalf("the README's go.mod has no replace line for a clone:\n%s", gomod)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"go.mod":         strings.Replace(gomod, "/path/to/indoubt", root, 1),
		"go.sum":         string(sum),
		"charge_test.go": code,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-run", "TestCharge", ".")
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INDOUBT_") && !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if m := regexp.MustCompile(`run directory: (\S+)`).FindStringSubmatch(text); m != nil {
		os.RemoveAll(m[1]) // the example's failure keeps it
	}
	switch {
	case regexp.MustCompile(`dial tcp|no such host|proxy\.golang\.org|GOPROXY=off|module lookup disabled|missing go\.sum entry`).MatchString(text):
		t.Skipf("the module needs what the module cache lacks (network):\n%s", text)
	case strings.Contains(text, "--- SKIP") || strings.Contains(text, "indoubttest: ") && strings.Contains(text, "not installed"):
		t.Skipf("the example skipped:\n%s", text)
	case err == nil:
		t.Fatalf("the README's example passed; it shows a naive retry caught:\n%s", text)
	}
	for _, want := range []string{"--- FAIL: TestCharge", "indoubttest: budget check failed\n", "verdict: invalid: ", "checker: 1 impossible-read", "fault seed ", "run directory: "} {
		if !strings.Contains(text, want) {
			t.Errorf("the example's output lacks %q:\n%s", want, text)
		}
	}
}
