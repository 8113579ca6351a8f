package shrink

import (
	"regexp"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
)

// Command is the one-line `indoubt run` command that makes the run cfg describes: its
// flags are runner.Args (every setting that differs from what the run would take
// anyway, the counts, the seed, each fault as a --fault). A DSN is written with its
// secrets masked (redact.DSN): the command is printed and stored, so its reader puts the
// password back. The output directory is left out.
func Command(cfg runner.Config) string {
	args := append([]string{"indoubt", "run"}, runner.Args(cfg)...)
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// dur writes a duration as Go parses it: 1.5s, 250ms, 0s.
func dur(d time.Duration) string { return d.String() }

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./~-]+$`)

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
