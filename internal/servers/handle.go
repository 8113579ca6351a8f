package servers

import (
	"context"
	"syscall"
)

// Handle is what every launched server offers of its process: its pid, its exit, and
// the process faults (process_faults.go). A launcher's server type embeds the one its
// Instance returns (Instance.Handle), so that postgres.Server, redis.Server,
// etcd.Member ... have the same methods with the same contract; what a fault means for
// that server's data (what a kill loses, what a start again recovers from) is said in
// the server type's doc comment.
//
// The methods are safe for concurrent use once the server is started, and with Stop.
type Handle struct{ inst *Instance }

// Handle returns the Handle of the server s runs. s must not move afterwards: a
// launcher calls it on the Instance inside its server type, once that is allocated.
func (s *Instance) Handle() Handle { return Handle{s} }

// Pid returns the process id of the server process, the leader of its process group.
func (h Handle) Pid() int { return h.inst.Process().Pid() }

// Exited is closed when the server process has exited, whether by Stop or not.
func (h Handle) Exited() <-chan struct{} { return h.inst.Process().Exited() }

// Kill sends SIGKILL to every process of the server at once (Instance.Kill): no
// shutdown, no flush; the data directory stays for Start.
func (h Handle) Kill() error { return h.inst.Kill() }

// Pause stops every process of the server (SIGSTOP): connections stay open, nothing
// answers until Resume.
func (h Handle) Pause() error { return h.inst.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (h Handle) Resume() error { return h.inst.Signal(syscall.SIGCONT) }

// Start starts a killed server again on its data and its port, with the same password,
// and returns once it is ready (its crash recovery done).
func (h Handle) Start(ctx context.Context) error { return h.inst.StartAgain(ctx) }

// Restart shuts the server down cleanly (its graceful signal, within its stop grace)
// and starts it again on its data and its port.
func (h Handle) Restart(ctx context.Context) error { return h.inst.Restart(ctx) }
