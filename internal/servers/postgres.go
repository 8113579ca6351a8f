package servers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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
)

// PostgresUser is the superuser, and PostgresDatabase the database, of every launched
// PostgreSQL. Every connection, over TCP or the unix socket, must authenticate with
// SCRAM-SHA-256 and the launch's random password (Postgres.Password): another local user
// must not become the superuser of a server that runs programs as the server's account.
const (
	PostgresUser     = "indoubt"
	PostgresDatabase = "indoubt"
)

// PostgresOptions configures StartPostgres. The zero value is ready to use.
type PostgresOptions struct {
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
	// Version chooses the binaries (see PostgresBin): a major version ("15", "18") or a
	// directory holding initdb and postgres. "" means INDOUBT_PG_VERSION if set, else
	// FindPostgres.
	Version string
	// DataFS, when set, mounts the filesystem the data directory is kept on:
	// powerloss.FS, for powerloss.Cut (it needs root and /dev/fuse, and the start fails
	// with powerfs.ErrUnavailable otherwise). nil keeps it in the temporary directory.
	DataFS Mounter
}

// Postgres is a running throwaway PostgreSQL. Its fields are read-only. Stop ends it.
type Postgres struct {
	Addr      string // "127.0.0.1:PORT"
	Port      int
	DSN       string // "postgres://indoubt:PASSWORD@127.0.0.1:PORT/indoubt?sslmode=disable"
	Password  string // PostgresUser's password: random per launch, URL-safe (hex)
	BinDir    string // the directory of initdb and postgres, usually also of psql and pgbench
	Version   string // the major version, as in the data directory's PG_VERSION: "15"
	Dir       string // the temporary directory holding DataDir, SocketDir and by default the log
	DataDir   string
	SocketDir string // unix socket directory, for psql -h; in Dir unless that path is too long
	LogPath   string // the server log

	inst Instance
	// mountBacking and mountPoint are the DataFS's directories when the launch asked
	// for one, set before initdb.
	mountBacking, mountPoint string
}

// How long a fast shutdown may take before the server is killed.
const postgresStopGrace = 15 * time.Second

// pgLibGlob is where Debian installs PostgreSQL, one directory per major version.
var pgLibGlob = "/usr/lib/postgresql/*/bin"

const pgHint = "install Debian package postgresql, or set INDOUBT_PG_BIN"

// FindPostgres returns the directory holding PostgreSQL's initdb and postgres: the one
// named by INDOUBT_PG_BIN if set (and nothing else then), else the one of initdb on PATH,
// else the highest version under /usr/lib/postgresql/*/bin. The error when none is found
// satisfies errors.Is(err, ErrNotInstalled).
func FindPostgres() (string, error) {
	return findPostgres(os.Getenv("INDOUBT_PG_BIN"), pgLibGlob)
}

func findPostgres(envDir, libGlob string) (string, error) {
	if envDir != "" {
		if missing := missingPrograms(envDir); missing != "" {
			return "", &NotInstalledError{Server: "postgres", Program: missing,
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
	return "", &NotInstalledError{Server: "postgres", Program: "initdb", Hint: pgHint}
}

// PostgresBin returns the directory of the binaries of the PostgreSQL that version names:
//
//	""          INDOUBT_PG_VERSION if set, else FindPostgres (INDOUBT_PG_BIN, PATH, the
//	            highest version Debian installed)
//	"15", "18"  Debian's /usr/lib/postgresql/<version>/bin, else the tree
//	            scripts/prepare-postgres18 unpacks into the cache,
//	            <cache>/postgres-<version>.<minor>.<patch>/bin (highest first)
//	a path      that directory (anything with a slash)
//
// The error when nothing is found satisfies errors.Is(err, ErrNotInstalled) and says how
// to get the version.
func PostgresBin(version string) (string, error) {
	if version == "" {
		version = os.Getenv("INDOUBT_PG_VERSION")
	}
	if version == "" {
		return FindPostgres()
	}
	if strings.Contains(version, "/") {
		if missing := missingPrograms(version); missing != "" {
			return "", &NotInstalledError{Server: "postgres", Program: missing, Hint: "not in " + version + ", the directory given as the version"}
		}
		return version, nil
	}
	if _, err := strconv.Atoi(version); err != nil {
		return "", fmt.Errorf("postgres: version %q is neither a major version (15, 18) nor a directory", version)
	}
	cache, err := CacheDir()
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
	return "", &NotInstalledError{Server: "postgres", Program: "initdb",
		Hint: "no PostgreSQL " + version + " in " + lib + " or the cache " + cache + " (run scripts/prepare-postgres18 for 18; install Debian package postgresql-" + version + " otherwise)"}
}

// reachableBin returns bin when acct can reach it, else a copy of its tree (bin's parent,
// with lib and share) that it can: scripts/prepare-postgres18 unpacks into root's cache,
// which the unprivileged server account cannot enter. The copy is made once, under the
// system's temporary directory, owned by the caller and written by it alone, and is
// trusted only when it still is.
func reachableBin(bin string, acct Account) (string, error) {
	if acct.CheckReach(bin) == nil {
		return bin, nil
	}
	tree := filepath.Dir(bin)
	dest := filepath.Join(os.TempDir(), fmt.Sprintf("indoubt-%s-uid%d", filepath.Base(tree), os.Geteuid()))
	if err := trustedCopy(dest); err == nil {
		return filepath.Join(dest, "bin"), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("postgres: copy of %s: %w", tree, err)
	}
	tmp, err := os.MkdirTemp(os.TempDir(), ".indoubt-pgbin-")
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("cp", "-a", tree, filepath.Join(tmp, "tree")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("postgres: copy %s where %s can reach it: %v: %s", tree, acct.Name, err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("chmod", "-R", "go-w,a+rX", filepath.Join(tmp, "tree")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("postgres: chmod copy of %s: %v: %s", tree, err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(filepath.Join(tmp, "tree", "complete"), []byte(tree+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "tree"), dest); err != nil && trustedCopy(dest) != nil {
		return "", fmt.Errorf("postgres: place copy of %s: %w", tree, err)
	}
	if err := acct.CheckReach(dest); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return filepath.Join(dest, "bin"), nil
}

// trustedCopy returns nil when dest is a complete copy that only the caller could have
// written, os.ErrNotExist when there is none, and an error when something else is there.
func trustedCopy(dest string) error {
	fi, err := os.Lstat(dest)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s exists and is not a directory written only by uid %d: remove it", dest, os.Geteuid())
	}
	if _, err := os.Stat(filepath.Join(dest, "complete")); err != nil {
		return fmt.Errorf("%s is incomplete: remove it", dest)
	}
	return nil
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
			return nil, fmt.Errorf("postgres: setting %s is chosen by StartPostgres", name)
		}
		args = append(args, "-c", name+"="+settings[name])
	}
	return args, nil
}

// StartPostgres creates a fresh PostgreSQL cluster in a temporary directory and starts it
// on a free port of 127.0.0.1, as an unprivileged user when the caller is root, in its own
// process group. Every client must log in with SCRAM-SHA-256 and a random password
// (Postgres.Password, also in Postgres.DSN). It returns once the server has answered a
// query over TCP as PostgresUser on PostgresDatabase. ctx bounds the startup only: once started, the server
// runs until Stop. On error nothing is left running and, unless opt.Keep, nothing is left
// on disk. Missing binaries give an error matching ErrNotInstalled.
func StartPostgres(ctx context.Context, opt PostgresOptions) (*Postgres, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	extra, err := settingArgs(withPrepared(opt.Settings, opt.MaxPreparedTransactions))
	if err != nil {
		return nil, err
	}
	bin, err := PostgresBin(opt.Version)
	if err != nil {
		return nil, err
	}
	acct, err := ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if bin, err = reachableBin(bin, acct); err != nil {
		return nil, err
	}
	p := &Postgres{
		BinDir:   bin,
		LogPath:  opt.LogPath,
		inst: Instance{Name: "postgres", Keep: opt.Keep, StopSignal: syscall.SIGINT, StopGrace: postgresStopGrace},
	}
	if p.Password, err = NewPassword(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	dir, err := p.inst.MakeTempDir(opt.Dir, acct)
	if err != nil {
		return nil, err
	}
	p.Dir, p.DataDir, p.SocketDir = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if opt.DataFS != nil {
		if p.mountBacking, p.mountPoint, err = MountDirs(dir, acct); err != nil {
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

func (p *Postgres) start(ctx context.Context, acct Account, extra []string, opt PostgresOptions) error {
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
	err := p.run(ctx, acct, nil, "initdb", "-D", p.DataDir, "-U", PostgresUser,
		"--auth=scram-sha-256", "--pwfile="+pwfile,
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if rerr := os.Remove(pwfile); err == nil && rerr != nil {
		err = fmt.Errorf("postgres: %w", rerr)
	}
	if err != nil {
		return err
	}
	// Single-user mode creates the database before the server listens, without a client.
	if err := p.run(ctx, acct, strings.NewReader("CREATE DATABASE "+PostgresDatabase+"\n"),
		"postgres", "--single", "-D", p.DataDir, "postgres"); err != nil {
		return err
	}
	if v, err := os.ReadFile(filepath.Join(p.DataDir, "PG_VERSION")); err == nil {
		p.Version = strings.TrimSpace(string(v))
	}
	say("initdb %s in %v", p.DataDir, time.Since(t0).Round(time.Millisecond))
	if err := p.mountData(opt.DataFS); err != nil {
		return err
	}

	var t1 time.Time
	if err := p.inst.ListenOnFreePort(say, func(port int) error {
		t1 = time.Now()
		return p.listen(ctx, acct, port, extra)
	}); err != nil {
		return err
	}
	say("pid %d ready on %s in %v", p.inst.Process().Pid(), p.Addr, time.Since(t1).Round(time.Millisecond))
	return nil
}

// A unix socket path is limited to 107 bytes, which a Dir such as t.TempDir() can exceed.
const maxSocketPath = 107

// makeSocketDir makes SocketDir: "sock" in Dir, or if that path is too long for a socket,
// a directory of its own under the system's temporary directory, removed by cleanup with
// Dir.
func (p *Postgres) makeSocketDir() error {
	socketPath := func(dir string) string { return filepath.Join(dir, ".s.PGSQL.65535") }
	if len(socketPath(p.SocketDir)) <= maxSocketPath {
		if err := os.Mkdir(p.SocketDir, 0o700); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	}
	for _, parent := range []string{os.TempDir(), "/tmp"} {
		if len(socketPath(filepath.Join(parent, TempDirPattern("pgsock")+"1234567890"))) > maxSocketPath {
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
func (p *Postgres) listen(ctx context.Context, acct Account, port int, extra []string) error {
	args := []string{"-D", p.DataDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + p.SocketDir}
	args = append(args, extra...)
	cmd := p.command(acct, nil, "postgres", args...)
	logStart, _ := p.inst.Log().Seek(0, io.SeekEnd)
	proc, err := StartProcess("postgres", cmd, acct)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	// Recorded before the wait for readiness: a harness killed during the wait leaves
	// a server that the next launch must find.
	if err := p.inst.Track(proc); err != nil {
		_ = proc.Stop(syscall.SIGQUIT, 5*time.Second)
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	err = Poll(ctx, 25*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		return probePostgres(ctx, addr, PostgresUser, p.Password, PostgresDatabase)
	})
	if err != nil {
		_ = proc.Stop(syscall.SIGQUIT, 5*time.Second)
		tail := postgresLogTail(p.LogPath, logStart)
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "already in use") {
			return fmt.Errorf("postgres: port %d: %w: %s", port, ErrAddrInUse, tail)
		}
		return fmt.Errorf("postgres: start: %w: %s", err, tail)
	}
	p.inst.SetProcess(proc)
	p.Port = port
	p.Addr = addr
	p.DSN = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", PostgresUser, p.Password, addr, PostgresDatabase)
	return nil
}

// run runs one of the cluster's short-lived programs to completion.
func (p *Postgres) run(ctx context.Context, acct Account, stdin io.Reader, prog string, args ...string) error {
	logStart, _ := p.inst.Log().Seek(0, io.SeekEnd)
	proc, err := StartProcess(prog, p.command(acct, stdin, prog, args...), acct)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := proc.Wait(ctx); err != nil {
		return fmt.Errorf("postgres: %w: %s", err, postgresLogTail(p.LogPath, logStart))
	}
	return nil
}

func (p *Postgres) command(acct Account, stdin io.Reader, prog string, args ...string) *exec.Cmd {
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

// postgresLogTail returns the last lines of the log written since offset, on one line.
func postgresLogTail(path string, offset int64) string {
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

// Pid returns the process id of the postmaster.
func (p *Postgres) Pid() int { return p.inst.Process().Pid() }

// Exited is closed when the postmaster has exited, whether by Stop or not.
func (p *Postgres) Exited() <-chan struct{} { return p.inst.Process().Exited() }

// Stop shuts the server down (fast shutdown: SIGINT, then SIGKILL to its process group
// after 15 s), then removes its temporary directory unless Keep was set. It may be called
// more than once and concurrently, also from a signal handler's goroutine; every call
// returns the first one's result after the server is gone. The error reports a server
// that had died before Stop or had to be killed, and a directory that could not be
// removed.
func (p *Postgres) Stop() error { return p.inst.Stop() }

// probePostgres logs in over the PostgreSQL v3 protocol as user on db with password
// (SCRAM-SHA-256), runs "select 1" and says goodbye. A nil error means the server accepts
// clients for real: it is not merely listening, not starting up or recovering.
func probePostgres(ctx context.Context, addr, user, password, db string) error {
	_, err := queryPostgres(ctx, 2*time.Second, addr, user, password, db, "select 1")
	return err
}

// queryPostgres logs in like probePostgres, runs query (one statement, simple protocol)
// within timeout and returns the text of the first column of its first row: "" when
// there is no row or the value is NULL.
func queryPostgres(ctx context.Context, timeout time.Duration, addr, user, password, db, query string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))

	var params bytes.Buffer
	for _, s := range []string{"user", user, "database", db, ""} {
		params.WriteString(s)
		params.WriteByte(0)
	}
	startup := binary.BigEndian.AppendUint32(nil, uint32(8+params.Len()))
	startup = binary.BigEndian.AppendUint32(startup, 3<<16)
	startup = append(startup, params.Bytes()...)
	if _, err := c.Write(startup); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if err := readUntilReady(r, c, password, nil); err != nil {
		return "", err
	}
	if _, err := c.Write(pgMessage('Q', append([]byte(query), 0))); err != nil {
		return "", err
	}
	var first string
	seen := false
	err = readUntilReady(r, c, password, func(row []byte) {
		if !seen {
			first, seen = firstField(row), true
		}
	})
	if err != nil {
		return "", err
	}
	_, _ = c.Write([]byte{'X', 0, 0, 0, 4})
	return first, nil
}

// firstField returns the text of the first column of a DataRow body ("" for NULL or a
// malformed row).
func firstField(row []byte) string {
	if len(row) < 6 || binary.BigEndian.Uint16(row) == 0 {
		return ""
	}
	n := int32(binary.BigEndian.Uint32(row[2:]))
	if n < 0 || int(n) > len(row)-6 {
		return ""
	}
	return string(row[6 : 6+n])
}

// pgMessage frames a typed frontend message.
func pgMessage(typ byte, body []byte) []byte {
	m := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))...)
	return append(m, body...)
}

// readUntilReady reads backend messages up to ReadyForQuery, failing on an ErrorResponse,
// and hands the body of each DataRow to row when it is not nil. It answers a SCRAM-SHA-256 exchange on w with password, and refuses any other
// authentication (a server that asks for none, or for a cleartext password, is not the
// one launched).
func readUntilReady(r *bufio.Reader, w io.Writer, password string, row func([]byte)) error {
	var hdr [5]byte
	var sc *scramClient
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n < 4 || n > 1<<20 {
			return fmt.Errorf("bad message length %d", n)
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		switch hdr[0] {
		case 'Z':
			return nil
		case 'D':
			if row != nil {
				row(body)
			}
		case 'E':
			return errors.New(pgErrorText(body))
		case 'R':
			if len(body) < 4 {
				return errors.New("short authentication request")
			}
			var reply []byte
			var err error
			switch code := binary.BigEndian.Uint32(body); {
			case code == 0:
				if sc == nil || !sc.verified {
					return errors.New("server let us in without SCRAM authentication")
				}
			case code == 10 && sc == nil:
				if !bytes.Contains(body[4:], []byte("SCRAM-SHA-256\x00")) {
					return fmt.Errorf("server offers %q, not SCRAM-SHA-256", body[4:])
				}
				if sc, err = newSCRAMClient(password); err != nil {
					return err
				}
				first := sc.first()
				reply = append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
				reply = pgMessage('p', append(reply, first...))
			case code == 11 && sc != nil:
				final, err := sc.final(body[4:])
				if err != nil {
					return err
				}
				reply = pgMessage('p', final)
			case code == 12 && sc != nil:
				if err := sc.verify(body[4:]); err != nil {
					return err
				}
			default:
				return fmt.Errorf("unexpected authentication request %d", code)
			}
			if reply != nil {
				if _, err := w.Write(reply); err != nil {
					return err
				}
			}
		}
	}
}

// pgErrorText renders an ErrorResponse's SQLSTATE and message fields.
func pgErrorText(body []byte) string {
	var code, msg string
	for _, f := range bytes.Split(body, []byte{0}) {
		if len(f) < 1 {
			continue
		}
		switch f[0] {
		case 'C':
			code = string(f[1:])
		case 'M':
			msg = string(f[1:])
		}
	}
	return fmt.Sprintf("server error %s: %s", code, msg)
}
