package redis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// Redis persistence modes for Options.Persistence.
const (
	// NoPersistence keeps data in memory only: no RDB snapshots, no AOF.
	NoPersistence = "none"
	// EverySec appends every write to the AOF and fsyncs it once a second: an
	// acknowledged write can be lost by a crash of the machine, not of Redis.
	EverySec = "everysec"
	// Always appends every write to the AOF and fsyncs before replying.
	Always = "always"
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Persistence is NoPersistence (also ""), EverySec or Always.
	Persistence string
	// Dir is the parent of the server's temporary directory; "" means os.TempDir(). When
	// running as root, the server's user must be able to enter every directory on its path.
	Dir string
	// Settings are extra configuration directives, passed as --name value after the
	// defaults, which they override. The directives that place the server or its files
	// (port, bind, dir, unixsocket, daemonize, logfile, pidfile, include) and those of
	// persistence (save, appendonly, appendfsync; use Persistence) are refused.
	Settings map[string]string
	// Keep leaves the temporary directory in place after Stop, or after a failed start.
	Keep bool
	// LogPath, if set, is where the server log goes (appended to, never removed). ""
	// means redis.log in the temporary directory.
	LogPath string
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
	// DataFS, when set, mounts the filesystem the server's data directory (--dir: the
	// AOF) is kept on: powerloss.FS, for powerloss.Cut (it needs root and /dev/fuse,
	// and the start fails with powerfs.ErrUnavailable otherwise).
	DataFS servers.Mounter
	// Node, when set, launches the server on a node of a topology with a network of
	// its own: in the node's namespace, listening on its address at NodePort (a
	// Sentinel at SentinelPort). nil: 127.0.0.1 of the caller's namespace, a free port.
	Node *servers.Node
}

// The ports of servers on a Node: each node has its own.
const (
	NodePort     = 6379
	SentinelPort = 26379
)

// Server is a running throwaway Redis. Its fields are read-only. Stop ends it.
type Server struct {
	Addr        string // "127.0.0.1:PORT", or the node's address and NodePort (SentinelPort)
	Port        int
	DSN         string // "redis://:PASSWORD@127.0.0.1:PORT/0", as indoubt run --dsn takes it
	Password    string // the default user's password (requirepass): random per launch, hex
	Binary      string // the redis-server that runs
	Version     string // "7.0.15", from redis-server --version; "" if it could not be read
	Persistence string // NoPersistence, EverySec or Always
	Dir         string // the temporary directory: the server's working dir (AOF, RDB), and the log
	LogPath     string
	DataDir     string // the server's --dir: Dir, or the DataFS mount in Dir

	// Handle gives redis-server's Pid and Exited and the process faults. A Kill loses
	// what the AOF had not received (with persistence none, everything); Start reloads
	// the AOF; Restart is a clean shutdown (SIGTERM) and a start, which with persistence
	// none and no snapshots loses the data too: nothing was ever written to disk.
	servers.Handle

	node redisNode
	inst servers.Instance
	// on is the node the server runs on; nil for loopback.
	on *servers.Node
}

const installHint = "install Debian package redis-server, or set INDOUBT_REDIS_SERVER"

// How long a shutdown (SIGTERM: flush the AOF, exit) may take before the server is killed.
const stopGrace = 10 * time.Second

// Find returns the path of redis-server: the one named by INDOUBT_REDIS_SERVER if set
// (and nothing else then), else the one on PATH, else /usr/bin/redis-server. The error
// when none is found satisfies errors.Is(err, servers.ErrNotInstalled).
func Find() (string, error) {
	if p := os.Getenv("INDOUBT_REDIS_SERVER"); p != "" {
		if !servers.IsExecutable(p) {
			return "", &servers.NotInstalledError{Server: "redis", Program: "redis-server",
				Hint: "not at INDOUBT_REDIS_SERVER=" + p + "; install Debian package redis-server, or fix INDOUBT_REDIS_SERVER"}
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	// Debian installs it in /usr/bin, which a sparse PATH (a service, sudo) may lack.
	if p := "/usr/bin/redis-server"; servers.IsExecutable(p) {
		return p, nil
	}
	return "", &servers.NotInstalledError{Server: "redis", Program: "redis-server", Hint: installHint}
}

var redisDirective = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

var redisReserved = map[string]bool{
	"port": true, "bind": true, "dir": true, "unixsocket": true, "unixsocketperm": true,
	"daemonize": true, "logfile": true, "pidfile": true, "include": true,
	"save": true, "appendonly": true, "appendfsync": true, "tls-port": true,
	// Authentication is chosen by Start: every client must give Password.
	"requirepass": true, "user": true, "aclfile": true,
}

// redisArgs returns the command line for a server on port in dir.
func redisArgs(host string, port int, dir, persistence string, settings map[string]string) ([]string, error) {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", host,
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "", // stdout, which is the log file
		"--protected-mode", "yes",
		// No RDB snapshots in any mode: durability under test is the AOF's, and a
		// background save would fork in the middle of a measurement.
		"--save", "",
	}
	switch persistence {
	case "", NoPersistence:
		args = append(args, "--appendonly", "no")
	case EverySec, Always:
		args = append(args, "--appendonly", "yes", "--appendfsync", persistence)
	default:
		return nil, fmt.Errorf("redis: persistence %q is not none, everysec or always", persistence)
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := strings.ToLower(name)
		if !redisDirective.MatchString(n) {
			return nil, fmt.Errorf("redis: setting %q is not a directive name", name)
		}
		if redisReserved[n] {
			return nil, fmt.Errorf("redis: setting %s is chosen by redis.Start", name)
		}
		args = append(args, "--"+n, settings[name])
	}
	return args, nil
}

// Start starts redis-server on a free port of 127.0.0.1 with its working directory in a
// fresh temporary directory, as an unprivileged user when the caller is root, in its own
// process group, with the persistence opt asks for, requiring a random password
// (Server.Password, also in Server.DSN) of every client. It returns once the server
// answers PING with PONG after AUTH. ctx bounds the startup only: once started, the
// server runs until Stop. On error nothing is left running and, unless opt.Keep,
// nothing is left on disk. A missing redis-server gives an error matching
// servers.ErrNotInstalled.
func Start(ctx context.Context, opt Options) (*Server, error) {
	return startRedis(ctx, opt, redisNode{name: "redis"})
}

// redisNode is what sets a node of a replicated Redis (sentinel.go) apart from a lone
// server.
type redisNode struct {
	name     string // the instance's name: errors, and its temporary directory's
	password string // "" draws a new one
	conf     string // configuration lines after requirepass (masterauth, replicaof, sentinel ...)
	sentinel bool   // run as a Sentinel (redis-server --sentinel)
}

func startRedis(ctx context.Context, opt Options, node redisNode) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Validate the options before touching the disk.
	if _, err := redisArgs("", 0, "", opt.Persistence, opt.Settings); err != nil {
		return nil, err
	}
	if opt.Node != nil {
		if err := opt.Node.Check(); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	r := &Server{Binary: bin, LogPath: opt.LogPath, Persistence: opt.Persistence, node: node, on: opt.Node,
		inst: servers.Instance{Name: node.name, Keep: opt.Keep, StopSignal: syscall.SIGTERM, StopGrace: stopGrace}}
	r.Handle = r.inst.Handle()
	r.Password = node.password
	if r.Password == "" {
		if r.Password, err = servers.NewPassword(); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	dir, err := r.inst.MakeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	r.Dir, r.DataDir = dir, dir
	if opt.DataFS != nil {
		if err := r.mountData(opt.DataFS, acct); err != nil {
			return nil, r.inst.Abandon(err)
		}
	}
	if r.Persistence == "" {
		r.Persistence = NoPersistence
	}
	if r.LogPath == "" {
		r.LogPath = filepath.Join(dir, "redis.log")
	}
	if err := r.start(ctx, acct, opt); err != nil {
		return nil, r.inst.Abandon(err)
	}
	r.inst.SetRelaunch(func(ctx context.Context) error { return r.listen(ctx, acct, r.Port, opt) })
	return r, nil
}

func (r *Server) start(ctx context.Context, acct servers.Account, opt Options) error {
	say := r.inst.Progress(opt.Log)
	if err := acct.Own(r.Dir); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := r.inst.OpenLog(r.LogPath); err != nil {
		return err
	}
	// The password goes in a config file that only the server's account may read: on
	// the command line every local user would see it in ps.
	conf := filepath.Join(r.Dir, "redis.conf")
	if err := os.WriteFile(conf, []byte("requirepass "+r.Password+"\n"+r.node.conf), 0o600); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := acct.Own(conf); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	r.Version = redisVersion(ctx, r.Binary)

	t0 := time.Now()
	if r.on != nil {
		port := NodePort
		if r.node.sentinel {
			port = SentinelPort
		}
		if err := r.listen(ctx, acct, port, opt); err != nil {
			return err
		}
	} else if err := r.inst.ListenOnFreePort(say, func(port int) error {
		t0 = time.Now()
		return r.listen(ctx, acct, port, opt)
	}); err != nil {
		return err
	}
	say("pid %d ready on %s (persistence %s) in %v", r.inst.Process().Pid(), r.Addr, r.Persistence, time.Since(t0).Round(time.Millisecond))
	return nil
}

func (r *Server) listen(ctx context.Context, acct servers.Account, port int, opt Options) error {
	args, err := redisArgs(r.host(), port, r.DataDir, opt.Persistence, opt.Settings)
	if err != nil {
		return err
	}
	// The config file comes first: redis-server reads it, then the options after it.
	// Sentinels and replicas rewrite it (CONFIG REWRITE), so a restart keeps their role.
	head := []string{filepath.Join(r.Dir, "redis.conf")}
	if r.node.sentinel {
		head = append(head, "--sentinel")
	}
	cmd := exec.Command(r.Binary, append(head, args...)...)
	cmd.Dir = r.Dir
	cmd.Env = []string{"HOME=" + r.Dir, "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	proc, logStart, err := r.inst.Launch(r.on, "redis-server", cmd, acct)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(r.host(), strconv.Itoa(port))
	err = servers.Poll(ctx, 20*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		return probeRedis(ctx, addr, r.Password)
	})
	if err != nil {
		return r.inst.NotReady(proc, logStart, port, err, "Address already in use")
	}
	r.inst.SetProcess(proc)
	r.Port = port
	r.Addr = addr
	r.DSN = "redis://:" + r.Password + "@" + addr + "/0"
	return nil
}

// host is the address the server listens on: its node's, or 127.0.0.1.
func (r *Server) host() string {
	return servers.ListenHost(r.on)
}

// redisVersion returns the version redis-server reports ("v=7.0.15 ..."), or "".
func redisVersion(ctx context.Context, bin string) string {
	for _, f := range strings.Fields(servers.VersionOutput(ctx, bin)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

// probeRedis authenticates with password, sends an inline PING and wants +PONG. A server
// still loading its AOF answers -LOADING, which is not ready.
func probeRedis(ctx context.Context, addr, password string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "AUTH "+password+"\r\nPING\r\n"); err != nil {
		return err
	}
	br := bufio.NewReader(io.LimitReader(c, 1024))
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read reply: %w", err)
		}
		if line = strings.TrimRight(line, "\r\n"); line != want {
			return fmt.Errorf("reply %q, want %s", line, want)
		}
	}
	return nil
}

// Stop shuts the server down (SIGTERM: Redis flushes the AOF and exits; SIGKILL to its
// process group after 10 s), then removes its temporary directory unless Keep was set.
// It may be called more than once and concurrently; every call returns the first one's
// result after the server is gone. The error reports a server that had died before Stop
// or had to be killed, and a directory that could not be removed.
func (r *Server) Stop() error { return r.inst.Stop() }
