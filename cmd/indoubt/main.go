// Command indoubt makes ambiguous commits happen on demand and proves what a database
// and its clients did about them.
//
//	indoubt run        run a workload against a database (launched locally or --dsn)
//	indoubt check      re-check a recorded history (indoubt JSONL, Jepsen EDN or log)
//	indoubt exec       run any program through the proxy and judge the history it writes
//	indoubt proxy      the commit-aware fault proxy in front of any application
//	indoubt server     a throwaway local server until Ctrl-C, for scripts and benchmarks
//	indoubt suite      run a suite file's cases with their expectations (CI: JUnit, annotations)
//	indoubt report     re-render report.html and summary.html from recorded runs
//	indoubt compare    two recorded runs' figures side by side
//	indoubt clean      remove what killed launches left behind (temporary directories)
//	indoubt shrink     reduce a failing run to the smallest that still fails, with its command
//	indoubt isolation  Hermitage's table measured on PostgreSQL, with each level's cost
//	indoubt chaos-mesh the fault schedule as Chaos Mesh objects for a cluster on Kubernetes
//
// Exit codes: 0 valid, 1 invalid, 2 unknown (also: interrupted), 3 could not run (also:
// no command given). The first SIGINT or SIGTERM stops a command cleanly; a second stops
// it at once (exit 2).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/supervise"
)

func main() {
	// The harness shares the machine with the server it measures, and a run's live heap
	// is small while it allocates for every call: collect at 4× the live heap rather
	// than 2×, unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if os.Getenv(supervise.Env) == "" {
		// exec's supervisor may be sent SIGTERM twice as indoubt dies (the
		// parent-death signal, and indoubt's own): it must not stop before it has
		// killed what the program started.
		go stopOnSecondSignal(ctx)
	}
	stopProfile := startProfile(os.Getenv("INDOUBT_CPUPROFILE"), os.Getenv("INDOUBT_MEMPROFILE"))
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	code := exitCode(err, os.Stderr)
	beforeExit()
	os.Exit(code)
}

// beforeExit runs as the process exits; the tests' binary sets it to report its own
// peak memory, which the rusage its parent reads cannot give (see check_test.go).
var beforeExit = func() {}

// stopOnSecondSignal exits at once, code 2, on a signal that follows the one that ended
// ctx. The first SIGINT or SIGTERM lets a command wind down (an interrupted run is still
// checked and published, its server stopped); a command blocked where no context
// reaches (opening a FIFO that has no writer) or a user who will not wait stops on the
// second, and a launched server dies with the process (servers.StartProcess sets Pdeathsig)
// while its temporary directory is left for the next start to reap.
func stopOnSecondSignal(ctx context.Context) {
	<-ctx.Done()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	<-again
	fmt.Fprintln(os.Stderr, "indoubt: interrupted again: stopping at once")
	os.Exit(exitUnknown)
}

// startProfile writes a CPU profile of the whole command to path when path is set
// (INDOUBT_CPUPROFILE), and the allocations of the whole command to mem when mem is
// set (INDOUBT_MEMPROFILE), for looking at the harness's own cost with go tool pprof.
func startProfile(path, mem string) func() {
	stopCPU := startCPUProfile(path)
	if mem == "" {
		return stopCPU
	}
	return func() {
		stopCPU()
		f, err := os.Create(mem)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "indoubt: memory profile: %v\n", err)
		}
	}
}

func startCPUProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "indoubt: cpu profile: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "indoubt: cpu profile: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// Exit codes of every subcommand.
const (
	exitValid    = 0
	exitInvalid  = 1
	exitUnknown  = 2
	exitCouldNot = 3
)

// verdictExit carries a verdict's exit code out of a subcommand that already printed
// its result.
type verdictExit struct{ code int }

func (v verdictExit) Error() string { return fmt.Sprintf("exit %d", v.code) }

// interrupted is the error of a command that SIGINT or SIGTERM stopped before it had a
// result (a server still launching, a suite between its cases): exit 2, as an
// interrupted command exits, with the error that ended it in one line.
type interrupted struct{ err error }

func (i interrupted) Error() string { return "interrupted: " + i.err.Error() }
func (i interrupted) Unwrap() error { return i.err }

func exitCode(err error, stderr io.Writer) int {
	var v verdictExit
	var intr interrupted
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitValid
	case errors.As(err, &v):
		return v.code
	case errors.As(err, &intr):
		console.Fprintf(stderr, "indoubt: %s\n", oneLine(err.Error()))
		return exitUnknown
	}
	// A decoding error says the field and the JSON it holds, never a Go type.
	console.Fprintf(stderr, "indoubt: %s\n", oneLine(results.JSONErrorText(err.Error())))
	return exitCouldNot
}

// oneLine folds a multi-line error into one line.
func oneLine(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run a workload against a database and check its history", runCommand},
		{"check", "re-check a recorded history file", checkCommand},
		{"proxy", "the commit-aware fault proxy in front of any application", proxyCommand},
		{"server", "launch a throwaway local server until Ctrl-C", serverCommand},
		{"clean", "remove temporary directories left by killed launches", cleanCommand},
		{"suite", "run a suite file's cases and check their expectations (CI)", suiteCommand},
		{"report", "re-render report.html (and summary.html) from recorded runs", reportCommand},
		{"compare", "print two recorded runs' figures side by side with ratios", compareCommand},
		{"chaos-mesh", "the fault schedule as Chaos Mesh objects for a cluster on Kubernetes", chaosMeshCommand},
		{"exec", "run any program under commit faults and check the history it records", execCommand},
		{"shrink", "reduce a failing run to the smallest run that still fails", shrinkCommand},
		{"isolation", "measure Hermitage's table of anomalies per isolation level on PostgreSQL", isolationCommand},
	}
}

const usage = `indoubt makes ambiguous commits happen on demand and proves what a database and
its clients did about them.

Usage: indoubt COMMAND [flags]

Commands:
%s
Run 'indoubt COMMAND --help' for a command's flags.

Example:
  indoubt run                                     # the budget scenario on every local store
  indoubt run --store postgres --fault commit-cut:0.2 --retry naive
  indoubt check runs/<run>/history.jsonl

Exit codes: 0 valid, 1 invalid, 2 unknown (checker ran out of time) or interrupted,
3 could not run (also: no command given).
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var list string
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		list += fmt.Sprintf("  %-*s %s\n", width, c.name, c.summary)
	}
	if len(args) == 0 {
		// Asked for nothing: the usage, and exit 3, so that a script that lost its
		// arguments does not pass.
		fmt.Fprintf(stdout, usage, list)
		return errors.New("no command given (see indoubt --help)")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stdout, usage, list)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			var v verdictExit
			if err != nil && ctx.Err() != nil && !errors.As(err, &v) && !errors.Is(err, flag.ErrHelp) {
				// Whatever failed, the signal came first: the command was stopped,
				// not refused.
				return interrupted{err}
			}
			return err
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return fmt.Errorf("unknown command %q (want one of %s; see indoubt --help)", args[0], strings.Join(names, ", "))
}

// newFlags returns a flag set that reports errors as values and prints its help, with
// the command's description and example, to stdout on --help.
func newFlags(name, description string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The flag package calls Usage on every parse error too; help is printed only
	// when asked for, by parseFlags.
	fs.Usage = func() {}
	helps.Store(fs, func() {
		fmt.Fprint(stdout, description)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	})
	return fs
}

// helps holds each flag set's help printer (*flag.FlagSet to func()). A sync.Map, for
// the tests run commands in parallel, each in a goroutine of its own.
var helps sync.Map

// parseFlags parses args, turning flag errors into one-line errors and --help into
// flag.ErrHelp after printing the help.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		if h, ok := helps.Load(fs); ok {
			h.(func())()
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Name(), err)
	}
	return nil
}
