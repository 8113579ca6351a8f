package mariadb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Dir is the parent of the server's temporary directory; "" means os.TempDir(). When
	// running as root, the server's user must be able to enter every directory on its path.
	Dir string
	// Settings are extra server options, passed as --name=value after the defaults,
	// which they override ("innodb-flush-log-at-trx-commit": "2"). Those that place the
	// server or its files (port, bind-address, socket, datadir, pid-file, user,
	// init-file, defaults files) are refused.
	Settings map[string]string
	// Keep leaves the temporary directory in place after Stop, or after a failed start.
	Keep bool
	// LogPath, if set, is where the server log goes (appended to, never removed). ""
	// means mariadb.log in the temporary directory.
	LogPath string
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
	// Node, when set, launches the server on a node of a topology with a network of
	// its own: in the node's namespace, listening on its address at NodePort. nil:
	// 127.0.0.1 of the caller's namespace, a free port.
	Node *servers.Node
	// Galera, when set, makes the server a node of a Galera cluster (wsrep); it needs
	// Node, since every node of a cluster uses Galera's own ports on its address.
	Galera *Galera
}

// Galera configures a node of a Galera cluster: Galera 4 (Debian's galera-4), state
// transfers by rsync.
type Galera struct {
	// Name is the cluster's name (wsrep_cluster_name).
	Name string
	// Peers are the addresses of every node of the cluster, this one's included.
	Peers []string
	// Bootstrap starts a new cluster (the first node); the others join it and receive
	// its state.
	Bootstrap bool
	// Password is the user's password on every node: the nodes of a cluster share
	// their grant tables. "" makes one (give the first node's to the others).
	Password string
}

// The ports of a server on a Node: every node has its own.
const (
	NodePort   = 3306
	galeraPort = 4567 // group communication; IST 4568 and SST 4444 are Galera's defaults too
)

// GaleraProvider is Debian's galera-4 library.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// FindGalera reports what a Galera node needs and this machine lacks: the galera-4
// library and rsync (the state transfers). The error satisfies
// errors.Is(err, servers.ErrNotInstalled).
func FindGalera() error {
	if _, err := os.Stat(GaleraProvider); err != nil {
		return &servers.NotInstalledError{Server: "galera", Program: GaleraProvider, Hint: "install Debian package galera-4"}
	}
	if _, err := exec.LookPath("rsync"); err != nil {
		if !servers.IsExecutable("/usr/bin/rsync") {
			return &servers.NotInstalledError{Server: "galera", Program: "rsync", Hint: "install Debian package rsync"}
		}
	}
	return nil
}

// Server is a running throwaway MariaDB. Its fields are read-only. Stop ends it.
type Server struct {
	Addr     string // "127.0.0.1:PORT"
	Port     int
	DSN      string // "mysql://indoubt:PASSWORD@127.0.0.1:PORT/indoubt", as indoubt run --dsn takes it
	User     string // "indoubt"
	Password string // random per launch, hex
	Database string // "indoubt"
	Binary   string // the mariadbd that runs
	Version  string // "10.11.19-MariaDB-0+deb12u1", from the server's handshake
	Dir      string // the temporary directory: data, socket, log
	DataDir  string
	LogPath  string

	// Handle gives mariadbd's Pid and Exited and the process faults. After a Kill, Start
	// recovers from InnoDB's redo log, which holds every commit acknowledged
	// (innodb_flush_log_at_trx_commit=1, the default); Restart is a clean shutdown
	// (SIGTERM) and a start.
	servers.Handle

	inst servers.Instance
	// on is the node the server runs on; nil for loopback.
	on *servers.Node
}

// The user and database every launch makes.
const (
	User     = "indoubt"
	Database = "indoubt"
)

const installHint = "install Debian package mariadb-server, or set INDOUBT_MARIADB_BIN"

// How long a shutdown (SIGTERM: InnoDB flushes and exits) may take before the server is killed.
const stopGrace = 30 * time.Second

// Find returns the paths of mariadbd and mariadb-install-db: in the directory named by
// INDOUBT_MARIADB_BIN if set (both there, and nothing else then), else Debian's
// /usr/sbin/mariadbd and /usr/bin/mariadb-install-db, else whatever PATH holds. The
// error when one is missing satisfies errors.Is(err, servers.ErrNotInstalled).
func Find() (server, installDB string, err error) {
	if d := os.Getenv("INDOUBT_MARIADB_BIN"); d != "" {
		for _, p := range []string{"mariadbd", "mariadb-install-db"} {
			if !servers.IsExecutable(filepath.Join(d, p)) {
				return "", "", &servers.NotInstalledError{Server: "mariadb", Program: p,
					Hint: "not in INDOUBT_MARIADB_BIN=" + d + "; install Debian package mariadb-server, or fix INDOUBT_MARIADB_BIN"}
			}
		}
		return filepath.Join(d, "mariadbd"), filepath.Join(d, "mariadb-install-db"), nil
	}
	find := func(name, debian string) (string, error) {
		if servers.IsExecutable(debian) {
			return debian, nil
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		return "", &servers.NotInstalledError{Server: "mariadb", Program: name, Hint: installHint}
	}
	if server, err = find("mariadbd", "/usr/sbin/mariadbd"); err != nil {
		return "", "", err
	}
	if installDB, err = find("mariadb-install-db", "/usr/bin/mariadb-install-db"); err != nil {
		return "", "", err
	}
	return server, installDB, nil
}

// reserved are the options Start chooses itself.
var reserved = map[string]bool{
	"port": true, "bind-address": true, "socket": true, "datadir": true, "pid-file": true,
	"user": true, "init-file": true, "defaults-file": true, "defaults-extra-file": true,
	"no-defaults": true, "basedir": true, "log-error": true, "skip-networking": true,
	"skip-grant-tables": true, "wsrep-on": true, "wsrep-provider": true,
	"wsrep-cluster-address": true, "wsrep-node-address": true, "wsrep-new-cluster": true,
}

// serverArgs returns mariadbd's command line for a server on host:port with its files
// in dir, a node of g's cluster when g is set.
func serverArgs(dir, host string, port int, settings map[string]string, g *Galera, first bool) ([]string, error) {
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(dir, "data"),
		"--socket=" + filepath.Join(dir, "mariadb.sock"),
		"--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--init-file=" + filepath.Join(dir, "init.sql"),
		"--port=" + strconv.Itoa(port),
		"--bind-address=" + host,
		// Clients are named by address: no DNS look-up on connect.
		"--skip-name-resolve",
		// Small enough for several servers on one machine, large enough for the workloads.
		"--innodb-buffer-pool-size=64M",
		"--max-connections=500",
	}
	if g != nil {
		var peers []string
		for _, p := range g.Peers {
			peers = append(peers, net.JoinHostPort(p, strconv.Itoa(galeraPort)))
		}
		args = append(args,
			"--wsrep-on=ON",
			"--wsrep-provider="+GaleraProvider,
			"--wsrep-cluster-name="+g.Name,
			"--wsrep-cluster-address=gcomm://"+strings.Join(peers, ","),
			"--wsrep-node-address="+host,
			"--wsrep-sst-method=rsync",
			"--wsrep-provider-options=gcache.size=32M",
			// What Galera needs of InnoDB and the binary log.
			"--binlog-format=ROW",
			"--innodb-autoinc-lock-mode=2",
		)
		if g.Bootstrap && first {
			// Only the first start: started again, the node rejoins its cluster.
			args = append(args, "--wsrep-new-cluster")
		}
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	// Sorted so that the same settings give the same command line.
	sort.Strings(names)
	for _, name := range names {
		n := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "--")), "_", "-")
		if n == "" || strings.ContainsAny(n, "= \t\n") {
			return nil, fmt.Errorf("mariadb: setting %q is not an option name", name)
		}
		if reserved[n] {
			return nil, fmt.Errorf("mariadb: setting %s is chosen by mariadb.Start", name)
		}
		args = append(args, "--"+n+"="+settings[name])
	}
	return args, nil
}

// Start makes a data directory with mariadb-install-db, starts mariadbd on a free
// loopback port and returns when it sends its handshake, with the user indoubt and the
// database indoubt made. The error of a missing installation satisfies
// errors.Is(err, servers.ErrNotInstalled). A failed start leaves nothing behind (unless
// Keep).
func Start(ctx context.Context, opt Options) (*Server, error) {
	if _, err := serverArgs("", "", 0, opt.Settings, nil, false); err != nil {
		return nil, err
	}
	if opt.Galera != nil && opt.Node == nil {
		return nil, errors.New("mariadb: a Galera node needs a Node: the nodes of a cluster share Galera's ports, one address each")
	}
	if opt.Galera != nil {
		if err := FindGalera(); err != nil {
			return nil, err
		}
	}
	if opt.Node != nil {
		if err := opt.Node.Check(); err != nil {
			return nil, fmt.Errorf("mariadb: %w", err)
		}
	}
	bin, installDB, err := Find()
	if err != nil {
		return nil, err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	m := &Server{Binary: bin, LogPath: opt.LogPath, User: User, Database: Database, on: opt.Node,
		inst: servers.Instance{Name: "mariadb", Keep: opt.Keep, StopSignal: syscall.SIGTERM, StopGrace: stopGrace}}
	m.Handle = m.inst.Handle()
	if opt.Galera != nil {
		m.Password = opt.Galera.Password
	}
	if m.Password == "" {
		if m.Password, err = servers.NewPassword(); err != nil {
			return nil, fmt.Errorf("mariadb: %w", err)
		}
	}
	dir, err := m.inst.MakeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	m.Dir, m.DataDir = dir, filepath.Join(dir, "data")
	if m.LogPath == "" {
		m.LogPath = filepath.Join(dir, "mariadb.log")
	}
	if err := m.start(ctx, acct, installDB, opt); err != nil {
		return nil, m.inst.Abandon(err)
	}
	m.inst.SetRelaunch(func(ctx context.Context) error { return m.listen(ctx, acct, m.Port, opt, false) })
	return m, nil
}

func (m *Server) start(ctx context.Context, acct servers.Account, installDB string, opt Options) error {
	say := m.inst.Progress(opt.Log)
	// The directory holds the socket through which root logs in without a password:
	// only the server's account may enter it.
	if err := os.Chmod(m.Dir, 0o700); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	if err := acct.Own(m.Dir); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	if err := m.inst.OpenLog(m.LogPath); err != nil {
		return err
	}
	// The password goes in a file only the server's account may read: on the command
	// line every local user would see it in ps. mariadbd runs it at every start, so
	// the statements must hold when run again.
	init := fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%';\n"+
		"CREATE DATABASE IF NOT EXISTS %s;\n", User, m.Password, User, Database)
	initPath := filepath.Join(m.Dir, "init.sql")
	if err := os.WriteFile(initPath, []byte(init), 0o600); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	if err := acct.Own(initPath); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	t0 := time.Now()
	if err := m.installDB(ctx, acct, installDB); err != nil {
		return err
	}
	say("data directory made in %v", time.Since(t0).Round(time.Millisecond))
	if m.on != nil {
		t0 = time.Now()
		if err := m.listen(ctx, acct, NodePort, opt, true); err != nil {
			return err
		}
	} else if err := m.inst.ListenOnFreePort(say, func(port int) error {
		t0 = time.Now()
		return m.listen(ctx, acct, port, opt, true)
	}); err != nil {
		return err
	}
	say("pid %d ready on %s in %v", m.inst.Process().Pid(), m.Addr, time.Since(t0).Round(time.Millisecond))
	return nil
}

// installDB runs mariadb-install-db into DataDir as the server's account.
func (m *Server) installDB(ctx context.Context, acct servers.Account, installDB string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.Command(installDB, "--no-defaults", "--datadir="+m.DataDir,
		"--auth-root-authentication-method=socket", "--skip-test-db")
	cmd.Dir = m.Dir
	cmd.Stdout = m.inst.Log()
	cmd.Stderr = m.inst.Log()
	cmd.Env = []string{"HOME=" + m.Dir, "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	logStart, _ := m.inst.Log().Seek(0, io.SeekEnd)
	proc, err := servers.StartProcess("mariadb-install-db", cmd, acct)
	if err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	if err := proc.Wait(ctx); err != nil {
		_ = proc.Stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("mariadb: mariadb-install-db: %w: %s", err, servers.LogTail(m.LogPath, logStart))
	}
	return nil
}

func (m *Server) listen(ctx context.Context, acct servers.Account, port int, opt Options, first bool) error {
	args, err := serverArgs(m.Dir, m.host(), port, opt.Settings, opt.Galera, first)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.Binary, args...)
	cmd.Dir = m.Dir
	cmd.Env = []string{"HOME=" + m.Dir, "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	proc, logStart, err := m.inst.Launch(m.on, "mariadbd", cmd, acct)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(m.host(), strconv.Itoa(port))
	var version string
	// A joining Galera node opens its port once it has received the cluster's state.
	ready, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err = servers.Poll(ready, 20*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		v, err := probe(ctx, addr)
		version = v
		return err
	})
	if err != nil {
		return m.inst.NotReady(proc, logStart, port, err, "Address already in use")
	}
	m.inst.SetProcess(proc)
	m.Port, m.Addr, m.Version = port, addr, version
	m.DSN = "mysql://" + User + ":" + m.Password + "@" + addr + "/" + Database
	return nil
}

// host is the address the server listens on: its node's, or 127.0.0.1.
func (m *Server) host() string {
	return servers.ListenHost(m.on)
}

// probe reads the server's first packet and returns the version of a handshake
// (protocol 10). A server still starting accepts no connection; one that refuses
// sends an error packet (0xff), which is not ready.
func probe(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.SetDeadline(deadline); err != nil {
		return "", err
	}
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return "", fmt.Errorf("read handshake: %w", err)
	}
	n := int(binary.LittleEndian.Uint32(append(h[:3:3], 0)))
	if n == 0 || n > 1<<16 {
		return "", fmt.Errorf("handshake of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return "", fmt.Errorf("read handshake: %w", err)
	}
	if body[0] != 10 {
		return "", fmt.Errorf("first packet 0x%02x, not a handshake", body[0])
	}
	v, _, _ := strings.Cut(string(body[1:]), "\x00")
	// MariaDB prefixes its version with 5.5.5- for clients that read the major
	// version from the first digits.
	return strings.TrimPrefix(v, "5.5.5-"), nil
}

// Stop shuts the server down (SIGTERM: InnoDB flushes and mariadbd exits; SIGKILL to
// its process group after 30 s), then removes its temporary directory unless Keep was
// set. It may be called more than once and concurrently; every call returns the first
// one's result after the server is gone.
func (m *Server) Stop() error { return m.inst.Stop() }
