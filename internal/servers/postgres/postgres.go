package postgres

import (
	"bufio"
	"context"
	"errors"
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

// User is the superuser, and Database the database, of every launched PostgreSQL.
// Every connection, over TCP or the unix socket, must authenticate with SCRAM-SHA-256
// and the launch's random password (Server.Password): another local user must not
// become the superuser of a server that runs programs as the server's account.
const (
	User     = "indoubt"
	Database = "indoubt"
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Dir is the parent of the server's temporary directory; "" means os.TempDir(). When
	// running as root, the server's user must be able to enter every directory on its path.
	Dir string
	// Settings are extra server settings, passed as -c name=value after the defaults
	// (max_connections=200), which they override. The settings that place the server
	// (port, listen_addresses, unix_socket_directories, data_directory, config_file,
	// hba_file, ident_file) are refused. fsync and synchronous_commit stay at
	// PostgreSQL's defaults (on) unless set here.
	Settings map[string]string
	// MaxPreparedTransactions, when positive, sets max_prepared_transactions: the
	// number of transactions prepared for two-phase commit the server may hold at
	// once. PostgreSQL's default, 0, refuses PREPARE TRANSACTION. A value in Settings
	// wins.
	MaxPreparedTransactions int
	// Keep leaves the temporary directory (data, socket, log) in place after Stop, or
	// after a failed start, for inspection.
	Keep bool
	// LogPath, if set, is where the server log goes (appended to, never removed), for
	// example a file in the run directory. "" means postgres.log in the temporary
	// directory.
	LogPath string
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
	// Version chooses the binaries (see Bin): a major version ("15", "18") or a
	// directory holding initdb and postgres. "" means INDOUBT_PG_VERSION if set, else
	// Find.
	Version string
	// DataFS, when set, mounts the filesystem the data directory is kept on:
	// powerloss.FS, for powerloss.Cut (it needs root and /dev/fuse, and the start fails
	// with powerfs.ErrUnavailable otherwise). nil keeps it in the temporary directory.
	DataFS servers.Mounter
	// Node, when set, launches the server on a node of a topology with a network of
	// its own: in the node's namespace, listening on its address at port 5432
	// (NodePort), with pg_hba.conf letting in SCRAM-SHA-256 logins and replication
	// from the node's subnet. nil: 127.0.0.1 of the caller's namespace, a free port.
	Node *servers.Node
}

// NodePort is the port a server on a Node listens on: each node has its own.
const NodePort = 5432

// Server is a running throwaway PostgreSQL. Its fields are read-only. Stop ends it.
type Server struct {
	Addr      string // "127.0.0.1:PORT", or the node's address and NodePort
	Port      int
	DSN       string // "postgres://indoubt:PASSWORD@127.0.0.1:PORT/indoubt?sslmode=disable"
	Password  string // User's password: random per launch, URL-safe (hex)
	BinDir    string // the directory of initdb and postgres, usually also of psql and pgbench
	Version   string // the major version, as in the data directory's PG_VERSION: "15"
	Dir       string // the temporary directory holding DataDir, SocketDir and by default the log
	DataDir   string
	SocketDir string // unix socket directory, for psql -h; in Dir unless that path is too long
	LogPath   string // the server log

	// Handle gives the postmaster's Pid and Exited and the process faults. A Kill takes
	// the postmaster and its backends at once, as a crash of PostgreSQL does (the page
	// cache survives, unlike a power loss); Start recovers from the WAL; Restart is a
	// fast shutdown (SIGINT) and a start.
	servers.Handle

	inst servers.Instance
	// node is the node the server runs on; nil for loopback.
	node *servers.Node
	// mountBacking and mountPoint are the DataFS's directories when the launch asked
	// for one, set before initdb.
	mountBacking, mountPoint string
}

// How long a fast shutdown may take before the server is killed.
const stopGrace = 15 * time.Second

// pgLibGlob is where Debian installs PostgreSQL, one directory per major version.
var pgLibGlob = "/usr/lib/postgresql/*/bin"

const pgHint = "install Debian package postgresql, or set INDOUBT_PG_BIN"

// Find returns the directory holding PostgreSQL's initdb and postgres: the one
// named by INDOUBT_PG_BIN if set (and nothing else then), else the one of initdb on PATH,
// else the highest version under /usr/lib/postgresql/*/bin. The error when none is found
// satisfies errors.Is(err, servers.ErrNotInstalled).
func Find() (string, error) {
	return findPostgres(os.Getenv("INDOUBT_PG_BIN"), pgLibGlob)
}

func findPostgres(envDir, libGlob string) (string, error) {
	if envDir != "" {
		if missing := missingPrograms(envDir); missing != "" {
			return "", &servers.NotInstalledError{Server: "postgres", Program: missing,
				Hint: "not in INDOUBT_PG_BIN=" + envDir + "; install Debian package postgresql, or fix INDOUBT_PG_BIN"}
		}
		return envDir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// Resolve links so that BinDir is the real one, with postgres and pgbench beside.
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if dir := filepath.Dir(p); missingPrograms(dir) == "" {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(libGlob)
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if missingPrograms(dir) == "" {
			return dir, nil
		}
	}
	return "", &servers.NotInstalledError{Server: "postgres", Program: "initdb", Hint: pgHint}
}

// Bin returns the directory of the binaries of the PostgreSQL that version names:
//
//	""          INDOUBT_PG_VERSION if set, else Find (INDOUBT_PG_BIN, PATH, the
//	            highest version Debian installed)
//	"15", "18"  Debian's /usr/lib/postgresql/<version>/bin, else the tree
//	            scripts/prepare-postgres18 unpacks into the cache,
//	            <cache>/postgres-<version>.<minor>.<patch>/bin (highest first)
//	a path      that directory (anything with a slash)
//
// The error when nothing is found satisfies errors.Is(err, servers.ErrNotInstalled) and
// says how to get the version.
func Bin(version string) (string, error) {
	if version == "" {
		version = os.Getenv("INDOUBT_PG_VERSION")
	}
	if version == "" {
		return Find()
	}
	if strings.Contains(version, "/") {
		if missing := missingPrograms(version); missing != "" {
			return "", &servers.NotInstalledError{Server: "postgres", Program: missing, Hint: "not in " + version + ", the directory given as the version"}
		}
		return version, nil
	}
	if _, err := strconv.Atoi(version); err != nil {
		return "", fmt.Errorf("postgres: version %q is neither a major version (15, 18) nor a directory", version)
	}
	cache, err := servers.CacheDir()
	if err != nil {
		cache = ""
	}
	return findPostgresVersion(version, strings.Replace(pgLibGlob, "*", version, 1), cache)
}

// findPostgresVersion looks for major version in Debian's directory lib, then in the
// prepared trees under cache.
func findPostgresVersion(version, lib, cache string) (string, error) {
	if missingPrograms(lib) == "" {
		return lib, nil
	}
	if cache != "" {
		dirs, _ := filepath.Glob(filepath.Join(cache, "postgres-"+version+".*"))
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			// The script writes "complete" last: without it the tree may be half there.
			if _, err := os.Stat(filepath.Join(d, "complete")); err != nil {
				continue
			}
			if bin := filepath.Join(d, "bin"); missingPrograms(bin) == "" {
				return bin, nil
			}
		}
	}
	return "", &servers.NotInstalledError{Server: "postgres", Program: "initdb",
		Hint: "no PostgreSQL " + version + " in " + lib + " or the cache " + cache + " (run scripts/prepare-postgres18 for 18; install Debian package postgresql-" + version + " otherwise)"}
}

// reachableBin returns bin when acct can reach it, else a copy of its tree (bin's parent,
// with lib and share) that it can (servers.ReachableCopy): scripts/prepare-postgres18
// unpacks into root's cache, which the unprivileged server account cannot enter.
func reachableBin(bin string, acct servers.Account) (string, error) {
	if acct.CheckReach(bin) == nil {
		return bin, nil
	}
	tree := filepath.Dir(bin)
	c, err := servers.ReachableCopy(tree, "pgtree-"+filepath.Base(tree), acct)
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return filepath.Join(c, "bin"), nil
}

func missingPrograms(dir string) string {
	for _, prog := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, prog))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return prog
		}
	}
	return ""
}

// versionLess orders .../postgresql/<version>/bin paths by version, numerically
// ("9.6" < "15"), falling back to text for names that are not numbers.
func versionLess(a, b string) bool {
	va, vb := filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b))
	pa, pb := strings.Split(va, "."), strings.Split(vb, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea != nil || eb != nil {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(pa) < len(pb)
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

var placementSettings = map[string]bool{
	"port": true, "listen_addresses": true, "unix_socket_directories": true,
	"data_directory": true, "config_file": true, "hba_file": true, "ident_file": true,
}

// settingArgs returns -c arguments in name order, the defaults first so that the
// caller's settings win (PostgreSQL keeps the last -c for a name).
func settingArgs(settings map[string]string) ([]string, error) {
	args := []string{"-c", "max_connections=200"}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !settingName.MatchString(name) {
			return nil, fmt.Errorf("postgres: setting name %q is not a parameter name", name)
		}
		if placementSettings[strings.ToLower(name)] {
			return nil, fmt.Errorf("postgres: setting %s is chosen by postgres.Start", name)
		}
		args = append(args, "-c", name+"="+settings[name])
	}
	return args, nil
}

// Start creates a fresh PostgreSQL cluster in a temporary directory and starts it on a
// free port of 127.0.0.1, as an unprivileged user when the caller is root, in its own
// process group. Every client must log in with SCRAM-SHA-256 and a random password
// (Server.Password, also in Server.DSN). It returns once the server has answered a
// query over TCP as User on Database. ctx bounds the startup only: once started, the
// server runs until Stop. On error nothing is left running and, unless opt.Keep,
// nothing is left on disk. Missing binaries give an error matching
// servers.ErrNotInstalled.
func Start(ctx context.Context, opt Options) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	extra, err := settingArgs(withPrepared(opt.Settings, opt.MaxPreparedTransactions))
	if err != nil {
		return nil, err
	}
	bin, err := Bin(opt.Version)
	if err != nil {
		return nil, err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if bin, err = reachableBin(bin, acct); err != nil {
		return nil, err
	}
	if opt.Node != nil {
		if err := opt.Node.Check(); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	p := &Server{
		BinDir:  bin,
		LogPath: opt.LogPath,
		node:    opt.Node,
		inst:    servers.Instance{Name: "postgres", Keep: opt.Keep, StopSignal: syscall.SIGINT, StopGrace: stopGrace},
	}
	p.Handle = p.inst.Handle()
	if p.Password, err = servers.NewPassword(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	dir, err := p.inst.MakeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	p.Dir, p.DataDir, p.SocketDir = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if opt.DataFS != nil {
		if p.mountBacking, p.mountPoint, err = servers.MountDirs(dir, acct); err != nil {
			return nil, p.inst.Abandon(fmt.Errorf("postgres: %w", err))
		}
		p.DataDir = filepath.Join(p.mountBacking, "data") // until initdb is done (mount.go)
	}
	if p.LogPath == "" {
		p.LogPath = filepath.Join(dir, "postgres.log")
	}
	if err := p.start(ctx, acct, extra, opt); err != nil {
		return nil, p.inst.Abandon(err)
	}
	p.inst.SetRelaunch(func(ctx context.Context) error { return p.listen(ctx, acct, p.Port, extra) })
	return p, nil
}

func (p *Server) start(ctx context.Context, acct servers.Account, extra []string, opt Options) error {
	say := p.inst.Progress(opt.Log)
	if err := p.makeSocketDir(); err != nil {
		return err
	}
	if err := acct.Own(p.Dir, p.SocketDir); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := p.inst.OpenLog(p.LogPath); err != nil {
		return err
	}

	t0 := time.Now()
	how := "initdb"
	tmpl, err := sharedTemplate(ctx, p.BinDir, acct)
	if err != nil {
		return err
	}
	if tmpl != nil {
		how = "copy of the template cluster"
		err = tmpl.copyTo(ctx, p, acct)
		tmpl.copying.RUnlock()
	} else {
		err = p.initCluster(ctx, acct)
	}
	if err != nil {
		return err
	}
	if v, err := os.ReadFile(filepath.Join(p.DataDir, "PG_VERSION")); err == nil {
		p.Version = strings.TrimSpace(string(v))
	}
	say("%s %s in %v", how, p.DataDir, time.Since(t0).Round(time.Millisecond))
	if err := p.allowSubnet(); err != nil {
		return err
	}
	if err := p.mountData(opt.DataFS); err != nil {
		return err
	}

	t1 := time.Now()
	if err := p.listenSomewhere(ctx, acct, extra, say); err != nil {
		return err
	}
	say("pid %d ready on %s in %v", p.inst.Process().Pid(), p.Addr, time.Since(t1).Round(time.Millisecond))
	return nil
}

// initCluster makes a fresh cluster in p.DataDir: initdb with p.Password for User,
// then Database.
func (p *Server) initCluster(ctx context.Context, acct servers.Account) error {
	// initdb reads the password from a file (an argument would show in ps) that only the
	// server's account may read, and that goes as soon as initdb has hashed it.
	pwfile := filepath.Join(p.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := acct.Own(pwfile); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	// --no-sync skips only initdb's final flush of the files it wrote: the cluster is
	// thrown away with its directory, and the server itself keeps fsync on. --auth sets
	// both the local (socket) and host lines of pg_hba.conf: no trust anywhere.
	err := p.run(ctx, acct, nil, "initdb", "-D", p.DataDir, "-U", User,
		"--auth=scram-sha-256", "--pwfile="+pwfile,
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if rerr := os.Remove(pwfile); err == nil && rerr != nil {
		err = fmt.Errorf("postgres: %w", rerr)
	}
	if err != nil {
		return err
	}
	// Single-user mode creates the database before the server listens, without a client.
	return p.run(ctx, acct, strings.NewReader("CREATE DATABASE "+Database+"\n"),
		"postgres", "--single", "-D", p.DataDir, "postgres")
}

// listenSomewhere starts the server on its node's port, or on a free loopback port.
func (p *Server) listenSomewhere(ctx context.Context, acct servers.Account, extra []string, say func(string, ...any)) error {
	if p.node != nil {
		return p.listen(ctx, acct, NodePort, extra)
	}
	return p.inst.ListenOnFreePort(say, func(port int) error { return p.listen(ctx, acct, port, extra) })
}

// allowSubnet lets the node's subnet in, with a password, for queries and
// replication (initdb's lines name loopback only).
func (p *Server) allowSubnet() error {
	if p.node == nil {
		return nil
	}
	lines := fmt.Sprintf("host all all %[1]s scram-sha-256\nhost replication all %[1]s scram-sha-256\n", p.node.Subnet)
	f, err := os.OpenFile(filepath.Join(p.DataDir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(lines)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("postgres: pg_hba.conf: %w", err)
	}
	return nil
}

// host is the address the server listens on: its node's, or 127.0.0.1.
func (p *Server) host() string {
	return servers.ListenHost(p.node)
}

// A unix socket path is limited to 107 bytes, which a Dir such as t.TempDir() can exceed.
const maxSocketPath = 107

// makeSocketDir makes SocketDir: "sock" in Dir, or if that path is too long for a socket,
// a directory of its own under the system's temporary directory, removed by cleanup with
// Dir.
func (p *Server) makeSocketDir() error {
	socketPath := func(dir string) string { return filepath.Join(dir, ".s.PGSQL.65535") }
	if len(socketPath(p.SocketDir)) <= maxSocketPath {
		if err := os.Mkdir(p.SocketDir, 0o700); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	}
	for _, parent := range []string{os.TempDir(), "/tmp"} {
		if len(socketPath(filepath.Join(parent, servers.TempDirPattern("pgsock")+"1234567890"))) > maxSocketPath {
			continue
		}
		dir, err := p.inst.MakeOwnedDir(parent, "pgsock")
		if err != nil {
			return err
		}
		p.SocketDir = dir
		return nil
	}
	return fmt.Errorf("postgres: no directory short enough for a unix socket (%d bytes at most)", maxSocketPath)
}

// listen starts the server on port and waits until it answers a query.
func (p *Server) listen(ctx context.Context, acct servers.Account, port int, extra []string) error {
	args := []string{"-D", p.DataDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + p.host(),
		"-c", "unix_socket_directories=" + p.SocketDir}
	args = append(args, extra...)
	proc, logStart, err := p.inst.Launch(p.node, "postgres", p.command(acct, nil, "postgres", args...), acct)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(p.host(), strconv.Itoa(port))
	err = servers.Poll(ctx, 25*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		return probe(ctx, addr, User, p.Password, Database)
	})
	if err != nil {
		_ = proc.Stop(syscall.SIGQUIT, 5*time.Second)
		tail := logTail(p.LogPath, logStart)
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "already in use") {
			return fmt.Errorf("postgres: port %d: %w: %s", port, servers.ErrAddrInUse, tail)
		}
		return fmt.Errorf("postgres: start: %w: %s", err, tail)
	}
	p.inst.SetProcess(proc)
	p.Port = port
	p.Addr = addr
	p.DSN = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", User, p.Password, addr, Database)
	return nil
}

// run runs one of the cluster's short-lived programs to completion.
func (p *Server) run(ctx context.Context, acct servers.Account, stdin io.Reader, prog string, args ...string) error {
	logStart, _ := p.inst.Log().Seek(0, io.SeekEnd)
	proc, err := servers.StartProcessOn(p.node, prog, p.command(acct, stdin, prog, args...), acct)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := proc.Wait(ctx); err != nil {
		return fmt.Errorf("postgres: %w: %s", err, logTail(p.LogPath, logStart))
	}
	return nil
}

func (p *Server) command(acct servers.Account, stdin io.Reader, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.BinDir, prog), args...)
	cmd.Dir = p.Dir
	cmd.Stdin = stdin
	cmd.Stdout = p.inst.Log()
	cmd.Stderr = p.inst.Log()
	// PG* variables of the caller (PGDATA, PGPORT, PGOPTIONS ...) must not leak into the
	// throwaway cluster, and the server's user may not read the caller's HOME.
	env := []string{"HOME=" + p.Dir, "LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// logTail returns the last lines of the log written since offset, on one line.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "no log: " + err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "no log: " + err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && l != "backend>" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	if len(lines) == 0 {
		return "log " + path + " is empty"
	}
	return strings.Join(lines, " | ")
}

// Stop shuts the server down (fast shutdown: SIGINT, then SIGKILL to its process group
// after 15 s), then removes its temporary directory unless Keep was set. It may be called
// more than once and concurrently, also from a signal handler's goroutine; every call
// returns the first one's result after the server is gone. The error reports a server
// that had died before Stop or had to be killed, and a directory that could not be
// removed.
func (p *Server) Stop() error { return p.inst.Stop() }
