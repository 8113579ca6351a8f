package cassandra

import (
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

	"github.com/indoubt/indoubt/internal/servers"
)

// Version is the Apache Cassandra release Start runs by default. It must equal the
// cassandra.version default in internal/servers/cassandra/pom.xml, which
// scripts/prepare-cassandra resolves.
const Version = "5.0.9"

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Version is the cassandra-all release to run; "" means the package's Version. Its
	// jars must have been resolved into the cache by scripts/prepare-cassandra.
	Version string
	// CacheDir holds cassandra-<version>/lib; "" means servers.CacheDir().
	CacheDir string
	// Java is the java executable; "" means INDOUBT_JAVA, else $JAVA_HOME/bin/java, else
	// java on PATH. Cassandra 5.0 runs on Java 11 or 17; the JVM options here are Java 17's.
	Java string
	// HeapMB is the JVM heap (-Xms and -Xmx) in MiB; 0 means 512.
	HeapMB int
	// Dir is the parent of the server's temporary directory; "" means os.TempDir().
	Dir string
	// Settings are extra cassandra.yaml entries, name to a YAML value written as is
	// ("cas_contention_timeout": "500ms", "paxos_variant": "v2"). They override the
	// defaults of Start; the entries that place the server (addresses, ports,
	// directories, seeds) are refused.
	Settings map[string]string
	// JVMOptions are appended to the java command line before the main class
	// ("-Dcassandra.some_property=x"), after the words of INDOUBT_CASSANDRA_JVM_OPTIONS
	// (split at spaces), which reach every node a run or a test launches
	// ("-XX:TieredStopAtLevel=1" starts a node on about half the CPU, and runs it slower).
	JVMOptions []string
	// StopGrace is how long Stop waits after SIGTERM (Cassandra drains and flushes) before
	// it kills the process group; 0 means 20 s.
	StopGrace time.Duration
	// Keep leaves the temporary directory (data, commit log, configuration, log) in place
	// after Stop, or after a failed start, for inspection.
	Keep bool
	// LogPath, if set, is where the server's output goes (appended to, never removed).
	// "" means cassandra.log in the temporary directory.
	LogPath string
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
	// Node, when set, launches the node on a node of a topology with a network of its
	// own: in the node's namespace, listening on its address at NodePort (CQL) and
	// NodeStoragePort (gossip). Seeds are the addresses of the ring's seeds (nil: the
	// node is its own); a node given seeds joins the ring without bootstrapping, as a
	// node of a ring started empty. nil Node: 127.0.0.1, free ports, a ring of one.
	Node  *servers.Node
	Seeds []string
	// Token is the node's one token (initial_token, Murmur3): each node of a ring needs
	// its own. "" means 0, a ring of one.
	Token string
	// CommitLogSync is the commit log's sync mode: CommitLogPeriodic (also ""),
	// CommitLogBatch or CommitLogGroup. Settings may not set commitlog_sync or its
	// companions itself.
	CommitLogSync string
	// DataFS, when set, mounts the filesystem the node's data directories (data,
	// commitlog, saved_caches, hints) are kept on: powerloss.FS, for powerloss.Cut. It
	// needs root and /dev/fuse. Under powerfs's POSIX rule for directory entries (its
	// default) Cassandra 5.0 keeps nothing through a power loss: it never fsyncs the
	// directories it makes for tables, nor the commit log directory after it adds a
	// segment. powerfs.Ordered is a journaling filesystem's rule (ext4, xfs), under
	// which what Cassandra fsyncs survives.
	DataFS servers.Mounter
}

// The commit log sync modes of Options.CommitLogSync: when Cassandra
// acknowledges a write against when its commit log entry is fsynced.
const (
	// CommitLogPeriodic acknowledges at once and syncs the commit log every
	// commitlog_sync_period (10000ms, Cassandra's shipped default): a power loss can
	// take up to that much acknowledged work.
	CommitLogPeriodic = "periodic"
	// CommitLogBatch acknowledges a write only once its commit log entry is synced.
	CommitLogBatch = "batch"
	// CommitLogGroup acknowledges only after a sync too, but syncs at most once per
	// commitlog_sync_group_window (GroupWindow), so that writes share a sync.
	CommitLogGroup = "group"
)

// GroupWindow is the commitlog_sync_group_window of CommitLogGroup. Cassandra
// has no default (its cassandra.yaml suggests 1000ms); a Paxos write syncs the log up to
// three times, so a short window keeps an LWT workload's operations under a second.
const GroupWindow = "15ms"

// commitLogSettings returns the cassandra.yaml entries of a sync mode. Cassandra 5.0
// refuses commitlog_sync_period beside batch or group, and wants a group window.
func commitLogSettings(mode string) (map[string]string, error) {
	switch mode {
	case "", CommitLogPeriodic:
		return map[string]string{"commitlog_sync": CommitLogPeriodic, "commitlog_sync_period": "10000ms"}, nil
	case CommitLogBatch:
		return map[string]string{"commitlog_sync": CommitLogBatch}, nil
	case CommitLogGroup:
		return map[string]string{"commitlog_sync": CommitLogGroup, "commitlog_sync_group_window": GroupWindow}, nil
	}
	return nil, fmt.Errorf("cassandra: commit log sync %q: want periodic, batch or group", mode)
}

// Server is a running throwaway single-node Apache Cassandra. Its fields are
// read-only. Stop ends it.
type Server struct {
	Addr        string // native transport (CQL), "127.0.0.1:PORT"
	Host        string // "127.0.0.1"
	Port        int    // native transport port
	StoragePort int    // internode port, bound on loopback
	Version     string // the cassandra-all release running, "5.0.9"
	Dir         string // the temporary directory: cassandra.yaml, logback.xml, the log
	// DataDir holds data, commitlog, saved_caches and hints: Dir, or the DataFS mount in
	// Dir.
	DataDir string
	// CommitLogSync is the commit log's sync mode, CommitLogPeriodic when not chosen.
	CommitLogSync string
	LogPath       string // the server's stdout and stderr (logback writes to stdout)
	// Startup is how long the JVM took from exec to accepting CQL connections.
	Startup time.Duration

	// Handle gives the JVM's Pid and Exited and the process faults. A Kill is no
	// drain, no flush of memtables: Start replays the commit log (what its sync mode had
	// written to it; the kernel keeps the rest), and the JVM's start takes seconds.
	// Restart is a clean shutdown (SIGTERM: Cassandra's shutdown hook drains the node
	// and flushes its memtables, within the stop grace) and a start.
	servers.Handle

	inst servers.Instance
}

const cassandraHint = "run scripts/prepare-cassandra (needs mvn, java 17 and Maven Central)"

// Find returns the directory of the jars of Cassandra version (cassandra-all and
// its dependencies) under cache, as scripts/prepare-cassandra leaves it. The error when
// they are missing satisfies errors.Is(err, servers.ErrNotInstalled).
func Find(cache, version string) (string, error) {
	dir := filepath.Join(cache, "cassandra-"+version)
	lib := filepath.Join(dir, "lib")
	// The script writes "complete" last, so its presence means lib is whole.
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		return "", &servers.NotInstalledError{Server: "cassandra", Program: "cassandra-all " + version + " jars in " + dir, Hint: cassandraHint}
	}
	if _, err := os.Stat(filepath.Join(lib, "cassandra-all-"+version+".jar")); err != nil {
		return "", &servers.NotInstalledError{Server: "cassandra", Program: "cassandra-all-" + version + ".jar in " + lib,
			Hint: "the cache is damaged; remove " + dir + " and " + cassandraHint}
	}
	return lib, nil
}

// findJava returns the java executable: explicit, else INDOUBT_JAVA, else
// $JAVA_HOME/bin/java, else java on PATH.
func findJava(explicit string) (string, error) {
	for _, p := range []string{explicit, os.Getenv("INDOUBT_JAVA")} {
		if p == "" {
			continue
		}
		found, err := exec.LookPath(p)
		if err != nil {
			return "", &servers.NotInstalledError{Server: "cassandra", Program: "java " + p, Hint: "fix INDOUBT_JAVA or Options.Java"}
		}
		return found, nil
	}
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p, err := exec.LookPath(filepath.Join(home, "bin", "java")); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	return "", &servers.NotInstalledError{Server: "cassandra", Program: "java", Hint: "install Debian package openjdk-17-jre-headless, or set INDOUBT_JAVA"}
}

// cassandraJVM17 are the module-system openings that Cassandra's conf/jvm17-server.options
// passes on Java 17: Cassandra reaches into JDK internals (jamm's object sizing, direct
// buffer cleaning, Netty, the attach API) and fails at startup without them.
var cassandraJVM17 = []string{
	"-Djdk.attach.allowAttachSelf=true",
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.io=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	// Netty on Java 9+ needs this to allocate direct buffers through Unsafe.
	"-Dio.netty.tryReflectionSetAccessible=true",
}

// cassandraPlacement are the cassandra.yaml entries Start chooses itself.
var cassandraPlacement = map[string]bool{
	"listen_address": true, "listen_interface": true, "rpc_address": true, "rpc_interface": true,
	"broadcast_address": true, "broadcast_rpc_address": true, "native_transport_port": true,
	"native_transport_port_ssl": true, "storage_port": true, "ssl_storage_port": true,
	"seed_provider": true, "data_file_directories": true, "commitlog_directory": true,
	"saved_caches_directory": true, "hints_directory": true, "cdc_raw_directory": true,
	"local_system_data_file_directory": true,
	// Options.CommitLogSync chooses these together.
	"commitlog_sync": true, "commitlog_sync_period": true, "commitlog_sync_group_window": true,
	"commitlog_sync_batch_window_in_ms": true, "periodic_commitlog_sync_lag_block": true,
}

var yamlKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// cassandraYAML returns the configuration of a single loopback node whose data
// directories are in dataDir and whose CDC directory is in dir: the defaults below, then
// settings, then the commit log sync mode's entries and the placement entries, one line
// each in name order.
func cassandraYAML(dir, dataDir string, nativePort, storagePort int, settings map[string]string, commitLogSync string) (string, error) {
	return cassandraYAMLAt("127.0.0.1", nil, "", dir, dataDir, nativePort, storagePort, settings, commitLogSync)
}

// cassandraYAMLAt is cassandraYAML for a node listening on host, with seeds (hosts,
// at storagePort) as the ring's seeds; nil seeds means the node itself; token is the
// node's one token ("" is 0). A node of a ring starts on an empty ring: it does not
// bootstrap (stream data it cannot have).
func cassandraYAMLAt(host string, seedHosts []string, token string, dir, dataDir string, nativePort, storagePort int, settings map[string]string, commitLogSync string) (string, error) {
	entries := map[string]string{
		"cluster_name": "indoubt",
		// One token and no bootstrap: a lone seed owns the whole ring at once, without
		// token allocation or streaming.
		"num_tokens":             "1",
		"initial_token":          "0",
		"auto_bootstrap":         "false",
		"partitioner":            "org.apache.cassandra.dht.Murmur3Partitioner",
		"endpoint_snitch":        "SimpleSnitch",
		"authenticator":          "AllowAllAuthenticator",
		"authorizer":             "AllowAllAuthorizer",
		"role_manager":           "CassandraRoleManager",
		"network_authorizer":     "AllowAllNetworkAuthorizer",
		"start_native_transport": "true",
		// A throwaway node: no snapshots on drop or truncate.
		"auto_snapshot":         "false",
		"disk_failure_policy":   "stop",
		"commit_failure_policy": "stop",
	}
	for name, value := range settings {
		if !yamlKey.MatchString(name) {
			return "", fmt.Errorf("cassandra: setting name %q is not a cassandra.yaml key", name)
		}
		if cassandraPlacement[name] {
			return "", fmt.Errorf("cassandra: setting %s is chosen by cassandra.Start", name)
		}
		if strings.ContainsAny(value, "\n\r") {
			return "", fmt.Errorf("cassandra: setting %s: value spans lines", name)
		}
		entries[name] = value
	}
	sync, err := commitLogSettings(commitLogSync)
	if err != nil {
		return "", err
	}
	for name, value := range sync {
		entries[name] = value
	}
	quote := strconv.Quote
	if token != "" {
		if _, err := strconv.ParseInt(token, 10, 64); err != nil {
			return "", fmt.Errorf("cassandra: token %q is not a Murmur3 token", token)
		}
		entries["initial_token"] = token
	}
	seeds := fmt.Sprintf("%s:%d", host, storagePort)
	if len(seedHosts) > 0 {
		var ss []string
		for _, h := range seedHosts {
			ss = append(ss, fmt.Sprintf("%s:%d", h, storagePort))
		}
		seeds = strings.Join(ss, ",")
		entries["auto_bootstrap"] = "false"
	}
	entries["listen_address"] = host
	entries["rpc_address"] = host
	entries["native_transport_port"] = strconv.Itoa(nativePort)
	entries["storage_port"] = strconv.Itoa(storagePort)
	entries["seed_provider"] = "[{class_name: org.apache.cassandra.locator.SimpleSeedProvider, parameters: [{seeds: " + quote(seeds) + "}]}]"
	entries["data_file_directories"] = "[" + quote(filepath.Join(dataDir, "data")) + "]"
	entries["commitlog_directory"] = quote(filepath.Join(dataDir, "commitlog"))
	entries["saved_caches_directory"] = quote(filepath.Join(dataDir, "saved_caches"))
	entries["hints_directory"] = quote(filepath.Join(dataDir, "hints"))
	// CDC is off; its directory stays off the DataFS mount, nothing in it is under test.
	entries["cdc_raw_directory"] = quote(filepath.Join(dir, "cdc_raw"))

	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# Written by indoubt cassandra.Start: a throwaway single loopback node.\n")
	for _, name := range names {
		fmt.Fprintf(&b, "%s: %s\n", name, entries[name])
	}
	return b.String(), nil
}

// cassandraLogback sends Cassandra's log to stdout (the server's log file) at INFO: the jar
// carries no logback configuration, and logback's fallback logs DEBUG.
const cassandraLogback = `<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
`

// Start starts a single-node Apache Cassandra from the jars that
// scripts/prepare-cassandra resolved from Maven Central: CassandraDaemon in the foreground
// under java, with a fresh temporary directory for its data, on free ports of 127.0.0.1,
// with AllowAll authentication and no JMX port, in its own process group. It returns once
// the node accepts connections on its native (CQL) port. ctx bounds the startup only: once
// started, the server runs until Stop. On error nothing is left running and, unless
// opt.Keep, nothing is left on disk. Missing jars or java give an error matching
// servers.ErrNotInstalled.
//
// It runs as the caller, root included: only Cassandra's shell launcher refuses root (its
// -R flag), the daemon itself does not.
func Start(ctx context.Context, opt Options) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	version := opt.Version
	if version == "" {
		version = Version
	}
	cache := opt.CacheDir
	if cache == "" {
		var err error
		if cache, err = servers.CacheDir(); err != nil {
			return nil, err
		}
	}
	// Validate the settings before anything else, so a bad option is reported as such.
	if _, err := cassandraYAML("/", "/", 1, 2, opt.Settings, opt.CommitLogSync); err != nil {
		return nil, err
	}
	lib, err := Find(cache, version)
	if err != nil {
		return nil, err
	}
	java, err := findJava(opt.Java)
	if err != nil {
		return nil, err
	}
	grace := opt.StopGrace
	if grace <= 0 {
		grace = 20 * time.Second
	}
	c := &Server{Host: "127.0.0.1", Version: version, LogPath: opt.LogPath, CommitLogSync: opt.CommitLogSync,
		inst: servers.Instance{Name: "cassandra", Keep: opt.Keep, StopSignal: syscall.SIGTERM, StopGrace: grace,
			// Draining flushes memtables to SSTables that the removal deletes next: a
			// node whose directory goes is killed, which takes no time.
			DiscardSignal: syscall.SIGKILL}}
	c.Handle = c.inst.Handle()
	if c.CommitLogSync == "" {
		c.CommitLogSync = CommitLogPeriodic
	}
	// The zero Account: the node runs as the caller, so there is nothing to check.
	dir, err := c.inst.MakeTempDir(opt.Dir, servers.Account{})
	if err != nil {
		return nil, err
	}
	c.Dir, c.DataDir = dir, dir
	if c.LogPath == "" {
		c.LogPath = filepath.Join(dir, "cassandra.log")
	}
	if err := c.start(ctx, java, lib, opt); err != nil {
		return nil, c.inst.Abandon(err)
	}
	c.inst.SetRelaunch(func(ctx context.Context) error {
		return c.launch(ctx, java, lib, c.Port, c.StoragePort, opt, c.inst.Progress(opt.Log))
	})
	return c, nil
}

// cassandraDataDirs are the directories of a node's data, made before it starts (on a
// DataFS, durably: Cassandra makes missing ones without syncing their parent).
var cassandraDataDirs = []string{"data", "commitlog", "saved_caches", "hints"}

// cassandraPortAttempts bounds the retries when a free port was taken between
// servers.FreePort and the JVM binding it.
const cassandraPortAttempts = 3

func (c *Server) start(ctx context.Context, java, lib string, opt Options) error {
	say := c.inst.Progress(opt.Log)
	for _, sub := range []string{"cdc_raw", "logs"} {
		if err := os.Mkdir(filepath.Join(c.Dir, sub), 0o755); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	if err := c.makeDataDirs(opt); err != nil {
		return err
	}
	logback := filepath.Join(c.Dir, "logback.xml")
	if err := os.WriteFile(logback, []byte(cassandraLogback), 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if err := c.inst.OpenLog(c.LogPath); err != nil {
		return err
	}
	if opt.Node != nil {
		return c.launch(ctx, java, lib, NodePort, NodeStoragePort, opt, say)
	}
	for attempt := 1; ; attempt++ {
		native, storage, err := twoFreePorts()
		if err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		err = c.launch(ctx, java, lib, native, storage, opt, say)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errPortTaken) || attempt == cassandraPortAttempts {
			return err
		}
		say("a port was taken before the node bound it; retrying with new ports")
		// The failed node may have written system tables; start over from empty.
		for _, p := range c.dataPaths() {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
		}
	}
}

// makeDataDirs makes the data directories, on the DataFS mount in Dir when the launch
// asked for one: made in the backing directory before the mount, they are durable, as on
// a machine set up and rebooted before the test.
func (c *Server) makeDataDirs(opt Options) error {
	root := c.Dir
	var backing, mnt string
	if opt.DataFS != nil {
		var err error
		if backing, mnt, err = servers.MountDirs(c.Dir, servers.Account{}); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		root = backing
	}
	for _, sub := range cassandraDataDirs {
		if err := os.Mkdir(filepath.Join(root, sub), 0o755); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
	}
	if opt.DataFS == nil {
		return nil
	}
	if err := c.inst.MountData(opt.DataFS, backing, mnt); err != nil {
		return err
	}
	c.DataDir = mnt
	return nil
}

// dataPaths are the directories a node writes its data in.
func (c *Server) dataPaths() []string {
	ps := []string{filepath.Join(c.Dir, "cdc_raw")}
	for _, sub := range cassandraDataDirs {
		ps = append(ps, filepath.Join(c.DataDir, sub))
	}
	return ps
}

// twoFreePorts returns two distinct free ports of 127.0.0.1.
func twoFreePorts() (native, storage int, err error) {
	if native, err = servers.FreePort(); err != nil {
		return 0, 0, err
	}
	for storage == 0 || storage == native {
		if storage, err = servers.FreePort(); err != nil {
			return 0, 0, err
		}
	}
	return native, storage, nil
}

var errPortTaken = errors.New("address already in use")

// The ports of a node on a Node: each node has its own.
const (
	NodePort        = 9042
	NodeStoragePort = 7000
)

// launch starts the JVM on the given ports and data directory and waits until it serves
// CQL: the first start, and every start after a process fault.
func (c *Server) launch(ctx context.Context, java, lib string, native, storage int, opt Options, say func(string, ...any)) error {
	host := "127.0.0.1"
	if opt.Node != nil {
		host = opt.Node.IP
	}
	conf, err := cassandraYAMLAt(host, opt.Seeds, opt.Token, c.Dir, c.DataDir, native, storage, opt.Settings, opt.CommitLogSync)
	if err != nil {
		return err
	}
	logback := filepath.Join(c.Dir, "logback.xml")
	heap := opt.HeapMB
	if heap <= 0 {
		heap = 512
	}
	confPath := filepath.Join(c.Dir, "cassandra.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	args := []string{
		fmt.Sprintf("-Xms%dm", heap), fmt.Sprintf("-Xmx%dm", heap),
		"-Xss256k",
		"-XX:+UseG1GC",
		// A node that ran out of memory must not limp on and answer wrongly.
		"-XX:+ExitOnOutOfMemoryError",
	}
	args = append(args, cassandraJVM17...)
	args = append(args,
		"-Dcassandra-foreground=yes",
		"-Dcassandra.config=file://"+confPath,
		"-Dcassandra.storagedir="+c.Dir,
		"-Dcassandra.logdir="+filepath.Join(c.Dir, "logs"),
		"-Dlogback.configurationFile=file://"+logback,
		// A lone seed has nobody to gossip with: do not wait for gossip to settle.
		"-Dcassandra.skip_wait_for_gossip_to_settle=0",
		"-Djava.io.tmpdir="+c.Dir,
		// Every address of a node is IPv4; without this the JVM's lookup of the host's
		// own name waits 5 s for an IPv6 answer on these machines, on every start.
		"-Djava.net.preferIPv4Stack=true",
		// The per-row memtable overhead Cassandra otherwise measures at startup, by
		// building 100,000 rows (4 s of CPU here), is the value it measures on Java 17.
		"-Dcassandra.memtable.row_overhead_size=180",
	)
	args = append(args, strings.Fields(os.Getenv("INDOUBT_CASSANDRA_JVM_OPTIONS"))...)
	args = append(args, opt.JVMOptions...)
	args = append(args, "-cp", filepath.Join(lib, "*"), "org.apache.cassandra.service.CassandraDaemon")

	cmd := exec.Command(java, args...)
	cmd.Dir = c.Dir
	say("starting %s on %s:%d (storage %d), log %s", c.Version, host, native, storage, c.LogPath)
	began := time.Now()
	// The log may already hold an earlier attempt: the error of this one quotes its own.
	proc, logStart, err := c.inst.Launch(opt.Node, "cassandra", cmd, servers.Account{})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(native))
	// The native port opens last in Cassandra's startup, but a SUPPORTED answer to OPTIONS
	// is what proves the CQL server is serving.
	if err := servers.Poll(ctx, 100*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		return Probe(ctx, addr)
	}); err != nil {
		_ = proc.Stop(syscall.SIGKILL, time.Second)
		tail := servers.LogTail(c.LogPath, logStart)
		// Cassandra says it either way: a socket's bind error, or its own check of the
		// storage port ("... is in use by another process").
		if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "in use by another process") {
			return fmt.Errorf("cassandra: %w: %s", errPortTaken, complaint(tail))
		}
		return fmt.Errorf("cassandra: %w: %s", err, complaint(tail))
	}
	c.inst.SetProcess(proc)
	c.Port, c.StoragePort, c.Addr, c.Host = native, storage, addr, host
	c.Startup = time.Since(began)
	say("ready on %s after %v", addr, c.Startup.Round(time.Millisecond))
	return nil
}

// Probe sends a native-protocol v4 OPTIONS request to addr and returns nil when the
// answer is a SUPPORTED frame listing a CQL_VERSION: the wire-level proof that a CQL
// server is serving there, which Start waits for.
func Probe(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(2 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	// Header: version 4 request, no flags, stream 1, opcode OPTIONS (0x05), empty body.
	if _, err := conn.Write([]byte{0x04, 0x00, 0x00, 0x01, 0x05, 0, 0, 0, 0}); err != nil {
		return fmt.Errorf("cql options: %w", err)
	}
	var hdr [9]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return fmt.Errorf("cql options: %w", err)
	}
	if hdr[0] != 0x84 || hdr[4] != 0x06 {
		return fmt.Errorf("cql options: answer is version %#x opcode %#x, want 0x84 SUPPORTED (0x06)", hdr[0], hdr[4])
	}
	n := binary.BigEndian.Uint32(hdr[5:])
	if n > 1<<16 {
		return fmt.Errorf("cql options: SUPPORTED body of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return fmt.Errorf("cql options: %w", err)
	}
	if !bytes.Contains(body, []byte("CQL_VERSION")) {
		return errors.New("cql options: SUPPORTED lists no CQL_VERSION")
	}
	return nil
}

// complaint turns a failed start's log into one line that says why: the first ERROR
// line's message with the exception and its causes that follow it (stack frames left
// out), else the last line of the log.
func complaint(log string) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "ERROR") {
			continue
		}
		if _, msg, ok := strings.Cut(l, " - "); ok {
			l = msg
		}
		parts := []string{strings.TrimSpace(l)}
		for _, next := range lines[i+1:] {
			if next == "" || strings.HasPrefix(next, "\t") || strings.HasPrefix(next, " ") {
				continue
			}
			// The next log record ends the exception.
			if strings.HasPrefix(next, "INFO") || strings.HasPrefix(next, "WARN") || strings.HasPrefix(next, "ERROR") || strings.HasPrefix(next, "DEBUG") {
				break
			}
			parts = append(parts, strings.TrimSpace(next))
		}
		msg := strings.Join(parts, "; ")
		if len(msg) > 600 {
			msg = msg[:600] + "..."
		}
		return msg
	}
	if len(lines) == 0 || lines[len(lines)-1] == "" {
		return "no output"
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// RSS returns the resident memory of the JVM in bytes, read from /proc.
func (c *Server) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.inst.Process().Pid()))
	if err != nil {
		return 0, fmt.Errorf("cassandra rss: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cassandra rss: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("cassandra rss: no VmRSS line")
}

// Stop sends SIGTERM (Cassandra drains and flushes) when Keep was set, and SIGKILL
// otherwise (the flush would only write files that are removed next), waits up to the
// stop grace, then kills the process group, and removes the temporary directory unless
// Keep was set. It may be called more than once and concurrently; every call returns
// the first call's result. It returns an error when the node had died before Stop, when
// a kept node had to be killed, and when the directory could not be removed.
func (c *Server) Stop() error { return c.inst.Stop() }
