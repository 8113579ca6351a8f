package main

import (
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
)

// TestExecFinalCmdIsBounded: a --final-cmd that prints more than a history line may
// hold (200 MB used to be taken, and then the run directory's own history.jsonl could
// not be read back) is refused with one line, and one that never ends is stopped at
// its bound, the children of its shell with it.
func TestExecFinalCmdIsBounded(t *testing.T) {
	prog := script(t, "ev invoke apply 0 p-1\nev ok apply 0 p-1\n")
	out := t.TempDir()
	code, stdout, stderr := invoke(t, execArgsFor(out, "--final-cmd", `printf '"'; head -c 200000000 /dev/zero | tr '\0' a; printf '"'`, "--", prog)...)
	if code != 3 || !strings.Contains(stderr, "--final-cmd printed more than") {
		t.Errorf("200 MB --final-cmd: exit %d, stdout %q, stderr %q; want exit 3 saying it printed too much", code, stdout, cut(stderr, 300))
	}
	defer func(d time.Duration) { runner.FinalCmdTimeout = d }(runner.FinalCmdTimeout)
	runner.FinalCmdTimeout = 2 * time.Second
	code, stdout, stderr = invoke(t, execArgsFor(t.TempDir(), "--final-cmd", `sleep 600 & sleep 600`, "--", prog)...)
	if code != 3 || !strings.Contains(stderr, "--final-cmd did not end within 2s") {
		t.Errorf("endless --final-cmd: exit %d, stdout %q, stderr %q; want exit 3 saying it did not end", code, stdout, cut(stderr, 300))
	}
}

// TestExecRefusesAHistoryThatIsNotAFile: a program that replaces its history by a
// FIFO (or a link to /dev/zero) is refused with one line, not read forever.
func TestExecRefusesAHistoryThatIsNotAFile(t *testing.T) {
	for _, swap := range []string{`rm -f "$INDOUBT_HISTORY"; mkfifo "$INDOUBT_HISTORY"`, `rm -f "$INDOUBT_HISTORY"; ln -s /dev/zero "$INDOUBT_HISTORY"`} {
		prog := script(t, "ev invoke apply 0 p-1\nev ok apply 0 p-1\n"+swap+"\n")
		code, stdout, stderr := invoke(t, execArgsFor(t.TempDir(), "--final-cmd", `echo '{"p-1":1}'`, "--", prog)...)
		if code != 3 || !strings.Contains(stderr, "INDOUBT_HISTORY is a") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 3, the history not a regular file", swap, code, stdout, stderr)
		}
	}
}
