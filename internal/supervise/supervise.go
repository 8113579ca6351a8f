// Package supervise runs a user's program so that nothing it starts outlives it: under
// a supervisor that is the calling binary itself, started again with Env set.
//
// The program of `indoubt exec` runs under a supervisor: indoubt itself, started again
// with Env set, in a process group of its own, with a parent-death signal.
// The supervisor starts the program in a second group, with a parent-death signal of
// its own, tells indoubt its pid and, when it ends, how; on SIGTERM (sent by indoubt,
// or by the kernel when indoubt dies, even of SIGKILL) it kills the program's whole
// group. A parent-death signal reaches only a direct child, so without the supervisor
// the program's own children would outlive a killed indoubt.
//
// Why two groups: indoubt forwards Ctrl-C to the program's group, as a terminal would
// to a foreground job, and the supervisor must not receive it.
//
// A binary that calls Start must, when started with Env set, call Main with the
// arguments it was given after its subcommand (see SelfArgs), and nothing else.
package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Env is the variable that makes the binary a supervisor: Start sets it.
const Env = "INDOUBT_EXEC_SUPERVISE"

// SelfArgs are the arguments Start gives its own binary before the program's argv:
// indoubt's exec subcommand, which calls Main when Env is set.
var SelfArgs = []string{"exec", "--"}

// ErrReported is Main's error when it could not start or contain the program and has
// said why on the status descriptor: the binary exits 3 without a word.
var ErrReported = errors.New("supervise: reported to the parent")

// Program is the user's program, started under its supervisor.
type Program struct {
	argv       []string
	supervisor *exec.Cmd
	pid        int // the program's pid, which is also its process group
	status     *bufio.Reader
	// Started is when the program was known to run.
	Started time.Time
	// Done receives once, when the program has ended.
	Done chan Exit
}

// Exit is how the program ended.
type Exit struct {
	Code   int    `json:"exit_code"`        // its exit status; -1 when a signal ended it
	Signal string `json:"signal,omitempty"` // the signal that ended it
	// Err says why nothing is known of its end (the supervisor vanished); "" otherwise.
	Err string `json:"error,omitempty"`
}

// OK reports whether the program ended by itself with status 0.
func (e Exit) OK() bool { return e.Err == "" && e.Signal == "" && e.Code == 0 }

func (e Exit) String() string {
	switch {
	case e.Err != "":
		return "ended, how is not known (" + e.Err + ")"
	case e.Signal != "":
		return "was killed by " + e.Signal
	}
	return "exited " + strconv.Itoa(e.Code)
}

// Start starts argv under a supervisor with env, and returns once the program
// runs (or could not be started: not found, not executable). The program's standard
// output and error are indoubt's; its standard input is indoubt's unless that is a
// terminal, which a program outside the terminal's foreground group cannot read from
// (it would be stopped), so it gets /dev/null.
func Start(argv, env []string, stdout, stderr io.Writer) (*Program, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find indoubt's own binary to supervise the program: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append(slices.Clone(SelfArgs), argv...)...)
	cmd.Env = append(WithoutVars(env, "INDOUBT_CPUPROFILE", "INDOUBT_MEMPROFILE"), Env+"=1")
	cmd.Stdin = programStdin()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// A process that left the program's group (a daemon) and still holds its output
	// must not keep indoubt waiting.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start the program's supervisor: %v", err)
	}
	p := &Program{argv: argv, supervisor: cmd, status: bufio.NewReader(r), Done: make(chan Exit, 1)}
	line, err := p.status.ReadString('\n')
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch {
	case err == nil && word == "started":
		p.pid, err = strconv.Atoi(rest)
		if err == nil {
			p.Started = time.Now()
			go p.wait(r)
			return p, nil
		}
	case err == nil && word == "error":
		err = errors.New(rest)
	case err != nil:
		err = fmt.Errorf("the supervisor said nothing: %v", err)
	}
	r.Close()
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("start %s: %v", argv[0], err)
}

// programStdin is what the program reads: indoubt's standard input, unless it is a
// terminal.
func programStdin() io.Reader {
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err == nil {
		return nil // /dev/null
	}
	return os.Stdin
}

// wait reads how the program ended from its supervisor, reaps the supervisor, and kills
// whatever is left of the program's group.
func (p *Program) wait(r *os.File) {
	defer r.Close()
	line, rerr := p.status.ReadString('\n')
	serr := p.supervisor.Wait()
	syscall.Kill(-p.pid, syscall.SIGKILL)
	var e Exit
	f := strings.Fields(line)
	switch {
	case rerr == nil && len(f) >= 2 && f[0] == "exit":
		e.Code, _ = strconv.Atoi(f[1])
		if len(f) == 3 {
			e.Signal = f[2]
		}
	default:
		e = Exit{Code: -1, Err: fmt.Sprintf("its supervisor ended first: %v", errors.Join(rerr, serr))}
	}
	p.Done <- e
}

// Interrupt sends sig to the program's process group, as a terminal sends Ctrl-C to its
// foreground job: the program and the children it started.
func (p *Program) Interrupt(sig syscall.Signal) { syscall.Kill(-p.pid, sig) }

// Kill has the supervisor kill the program's group at once; Done then receives.
func (p *Program) Kill() { p.supervisor.Process.Signal(syscall.SIGTERM) }

// Main is the supervisor's side: it runs args (after "--") in a process group
// of its own and reports on descriptor 3 "started PID", then "exit CODE [SIGNAL]"; or
// "error TEXT" when it cannot start it. When ctx ends (SIGTERM: indoubt asks, or it died)
// the program's group is killed. It returns ErrReported when it said "error" on the
// descriptor.
func Main(ctx context.Context, args []string) error {
	status := os.NewFile(3, "status")
	if status == nil || len(args) < 2 || args[0] != "--" {
		return errors.New("exec: the supervisor is started by indoubt exec itself")
	}
	defer status.Close()
	argv := args[1:]
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(status, "error cannot contain the program's processes: %s\n", oneLine(err))
		return ErrReported
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = WithoutVars(os.Environ(), Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(status, "error %s\n", oneLine(err))
		return ErrReported
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(status, "started %d\n", pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-pid, syscall.SIGKILL)
		err = <-done
	}
	// The program is gone; whatever it started goes with it, in its group or not.
	syscall.Kill(-pid, syscall.SIGKILL)
	killDescendants()
	code, sig := 0, ""
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code, sig = -1, SignalName(ws.Signal())
		}
	}
	if sig != "" {
		fmt.Fprintf(status, "exit %d %s\n", code, sig)
	} else {
		fmt.Fprintf(status, "exit %d\n", code)
	}
	return nil
}

// SignalName is a signal's conventional name: SIGKILL, SIGSEGV.
func SignalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
		syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// WithoutVars returns env without the variables named.
func WithoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			if k == n {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// oneLine is err's text on one line, as the status descriptor's protocol needs.
func oneLine(err error) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(err.Error())
}
