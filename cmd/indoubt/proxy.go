package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
)

const proxyHelp = `indoubt proxy: the commit-aware fault proxy, standalone, in front of any application.

It forwards connections from --listen to --upstream, understands the database's wire
protocol, and at the moment of commit either cuts the connection after the server
committed (--cut-after-commit: the change is applied, the client gets an error) or
drops the commit before it reaches the server (--drop-commit: not applied, the same
error). Each fault is printed to stdout as it fires, one line, and written to --events
as JSON (one object per line, schemas/faults.schema.json) with its ground truth: what
the fault did, and which of the connection's transactions it hit, with its statements
and whether it wrote (the cut of a read-only transaction changed nothing); the file
starts empty unless --append. It runs until Ctrl-C or SIGTERM, then prints the totals on stderr: commits
cut (proven applied, committed without a visible effect such as UPDATE 0, or committed
with a reply that does not say what changed) and commits dropped.

It listens on loopback only, and so does --api, unless --allow-remote lets them bind
another address (it then prints a warning): ":6432" means 127.0.0.1:6432.

The toxiproxy API (--api) speaks to toxiproxy's own clients. Besides its toxics it
has three commit toxics, at most one of each per proxy, whose attributes are
probability (0 to 1, default 1) and max (fires, 0: no cap): commit_cut, commit_drop
and commit_mixed (a fair seeded coin picks cut or drop). Toxicity stays 1. The API
answers only requests addressed to a loopback host with JSON bodies, and opens no
listener off loopback unless --allow-remote.

Commit points (postgres): COMMIT/END of a transaction block, and autocommit writes
(INSERT, UPDATE, DELETE, ...), as simple queries or prepared statements. --match
replaces the default choice of statements with a regular expression on their SQL (for a
COMMIT, the SQL of the whole transaction). The proxy cannot see inside TLS: clients
must connect without it (sslmode=disable), or their connections pass unfaulted.

Commit points (resp): write commands outside MULTI (SET, INCR, EVAL, EVALSHA, FCALL,
...) and EXEC; an error reply is never cut. (mongo): insert, update, delete,
findAndModify and bulkWrite outside a transaction, and commitTransaction; --match sees
the command's name and body. (cql): QUERY and EXECUTE of writes, and BATCH; an LWT
whose [applied] is false, and errors, are never cut.

` + apiProtocolHelp + `

Usage: indoubt proxy --upstream HOST:PORT [flags]

Example:
  indoubt proxy --upstream 127.0.0.1:5432 --listen 127.0.0.1:6432 --cut-after-commit 0.1 --events faults.jsonl
  psql -h 127.0.0.1 -p 6432 ...                        # the application connects here
  indoubt proxy --upstream db:5432 --fault commit-mixed:0.2@10s-40s --fault latency:5ms --seed 7
  indoubt proxy --upstream 127.0.0.1:5432 --api :8474     # then, from any toxiproxy client:
  curl -H 'Content-Type: application/json' -d '{"type":"commit_cut","attributes":{"probability":0.2}}' \
       localhost:8474/proxies/indoubt/toxics

--fault takes the commit faults, the standard toxics and partitions; process faults
(kill, pause, restart, failover, power-loss) need a server indoubt launched, which
indoubt proxy has not: they are refused.

Exit codes: 0 stopped by Ctrl-C or SIGTERM, 3 could not run (bad flags, an upstream
that does not resolve or holds user:password@, a non-loopback address without
--allow-remote, address in use), and 3 when a client of --api deleted the proxy
(DELETE /proxies/indoubt): it prints the totals and one line saying so, then exits.
`

func proxyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseProxyFlags(args, stdout)
	if err != nil {
		return err
	}
	sink := &proxySink{stdout: stdout, stderr: stderr}
	cfg.opt.Events = sink.event
	px, err := faults.Start(cfg.opt)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	defer px.Close()
	// Opened once the proxy runs, so that a refused start leaves an old file whole.
	if err := sink.open(cfg.events, cfg.appendEvents); err != nil {
		return err
	}
	defer sink.close()
	if f := px.Faults(); f != nil {
		f.Cut.Set(cfg.cut, 0)
		f.Drop.Set(cfg.drop, 0)
	}
	fmt.Fprintln(stderr, proxyStatus(cfg, px))
	warnRemote(stderr, px)
	// The proxy the command exists for may be deleted through its API: then there is
	// nothing left to serve, and the command ends as one that could not run.
	served, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-px.Done():
			stop()
		case <-served.Done():
		}
	}()
	err = runProxySchedule(served, cfg.schedule, px, sink)
	if cfg.opt.Protocol != nil {
		sink.mu.Lock()
		fmt.Fprintf(stderr, "indoubt proxy: stopped; commit faults: %v\n", sink.totals)
		sink.mu.Unlock()
	}
	if err == nil && ctx.Err() == nil {
		select {
		case <-px.Done():
			return fmt.Errorf("proxy: %q was deleted through the toxiproxy API (DELETE /proxies/%s): nothing left to serve", proxyName, proxyName)
		default:
		}
	}
	return err
}

// proxyName is the proxy's name in the toxiproxy API.
const proxyName = "indoubt"

// proxyConfig is the proxy command's flags, parsed and checked.
type proxyConfig struct {
	opt          faults.Options // without Events
	protocol     string
	cut, drop    float64
	schedule     schedule.Schedule
	events       string
	appendEvents bool
}

func parseProxyFlags(args []string, stdout io.Writer) (proxyConfig, error) {
	fs := newFlags("proxy", proxyHelp, stdout)
	var (
		protocol = fs.String("protocol", "postgres", "wire protocol: postgres, resp (Redis), mongo (OP_MSG), cql (native protocol v3-v5), mysql (MySQL, MariaDB), http (an API over HTTP/1.1), grpc (HTTP/2 without TLS), or tcp (no commit faults)")
		listen   = fs.String("listen", "127.0.0.1:6432", "address to accept clients on; loopback unless --allow-remote (\":6432\" is loopback)")
		upstream = fs.String("upstream", "", "the server's address, host:port (required; checked at start)")
		cut      = fs.Float64("cut-after-commit", 0, "probability per commit point of cutting the connection after the server committed")
		drop     = fs.Float64("drop-commit", 0, "probability per commit point of dropping the commit before the server sees it")
		seed     = fs.Int64("seed", 1, "seed of the fault decisions: the same seed and message order give the same faults")
		events   = fs.String("events", "", "write each fault as a JSON line to this file, which starts empty unless --append")
		appendEv = fs.Bool("append", false, "append to the --events file instead of starting it anew")
		api      = fs.String("api", "", "serve toxiproxy's HTTP API on this address, loopback unless --allow-remote (e.g. :8474); off by default")
		remote   = fs.Bool("allow-remote", false, "let --listen, --api and proxies created through the API bind addresses other than loopback (prints a warning)")
		match    = fs.String("match", "", "regular expression: only statements whose SQL matches count as commit points")
		sched    multiFlag
	)
	fs.Var(&sched, "fault", "scheduled fault NAME[:P][@START-END], repeatable: commit-cut:0.2@5s-15s, latency:50ms~10ms, partition@5s-7s, ...")
	if err := parseFlags(fs, args); err != nil {
		return proxyConfig{}, err
	}
	if fs.NArg() > 0 {
		return proxyConfig{}, fmt.Errorf("proxy: unexpected argument %q", fs.Arg(0))
	}
	if *upstream == "" {
		return proxyConfig{}, fmt.Errorf("proxy: --upstream is required (the server's host:port)")
	}
	if *appendEv && *events == "" {
		return proxyConfig{}, fmt.Errorf("proxy: --append needs --events FILE")
	}
	cfg := proxyConfig{
		opt: faults.Options{
			Upstream: *upstream, Listen: *listen, Seed: *seed, API: *api, AllowRemote: *remote, Name: proxyName,
		},
		protocol: *protocol, cut: *cut, drop: *drop, events: *events, appendEvents: *appendEv,
	}
	if err := cfg.checkProbabilities(); err != nil {
		return proxyConfig{}, err
	}
	proto, err := proxyProtocol(*protocol)
	if err != nil {
		return proxyConfig{}, err
	}
	if proto == nil && (*cut > 0 || *drop > 0 || *match != "") {
		return proxyConfig{}, fmt.Errorf("proxy: commit faults need a protocol: --protocol postgres, resp, mongo, cql or mysql")
	}
	cfg.opt.Protocol = proto
	if cfg.schedule, err = cfg.parseSchedule(sched); err != nil {
		return proxyConfig{}, err
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return proxyConfig{}, fmt.Errorf("proxy: --match: %w", err)
		}
		cfg.opt.Match = re.MatchString
	}
	return cfg, nil
}

func (cfg proxyConfig) checkProbabilities() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"--cut-after-commit", cfg.cut}, {"--drop-commit", cfg.drop}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("proxy: %s %v: want a probability from 0 to 1", p.name, p.v)
		}
	}
	if cfg.cut+cfg.drop > 1 {
		return fmt.Errorf("proxy: --cut-after-commit and --drop-commit add up to more than 1")
	}
	return nil
}

// proxyProtocol returns the commit toxics' protocol of a --protocol name (a store, one of
// its DSN schemes or a protocol, as the store registry knows them), nil for tcp.
func proxyProtocol(name string) (toxics.Protocol, error) {
	if name == "tcp" {
		return nil, nil
	}
	if p, ok := runner.ProtocolFor(name); ok {
		return p, nil
	}
	return nil, fmt.Errorf("proxy: unknown --protocol %q (want postgres, resp, mongo, cql, mysql, http, grpc or tcp)", name)
}

// parseSchedule parses the --fault entries and checks them against the flags.
func (cfg proxyConfig) parseSchedule(specs []string) (schedule.Schedule, error) {
	sched, err := schedule.Parse(specs)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	for _, f := range sched {
		switch {
		case f.Process:
			return nil, fmt.Errorf("proxy: --fault %s is a process fault, which needs a server indoubt launched: indoubt proxy has none (use indoubt run)", f.Spec)
		case f.Coordinator || f.Statement != "":
			return nil, fmt.Errorf("proxy: --fault %s acts on the two-phase commit of indoubt run --workload transfer; in front of your own, cut PREPARE TRANSACTION with --fault commit-cut and --match 'PREPARE TRANSACTION'", f.Spec)
		}
		if (f.Name == "commit-cut" && cfg.cut > 0) || (f.Name == "commit-drop" && cfg.drop > 0) {
			return nil, fmt.Errorf("proxy: --fault %s and its flag both arm %s: use one", f.Spec, f.Name)
		}
		if f.Toxic == nil && f.Name != "partition" && cfg.opt.Protocol == nil {
			return nil, fmt.Errorf("proxy: --fault %s needs a protocol: --protocol postgres", f.Spec)
		}
	}
	return sched, nil
}

// proxySink prints each fault on stdout, writes it to the events file and counts it.
type proxySink struct {
	stdout, stderr io.Writer

	mu       sync.Mutex
	file     *os.File
	writeErr error
	totals   faults.Totals
}

func (s *proxySink) open(path string, appendTo bool) error {
	if path == "" {
		return nil
	}
	mode := os.O_TRUNC
	if appendTo {
		mode = os.O_APPEND
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|mode, 0o644)
	if err != nil {
		return fmt.Errorf("proxy: events file: %w", err)
	}
	s.mu.Lock()
	s.file = f
	s.mu.Unlock()
	return nil
}

func (s *proxySink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
}

func (s *proxySink) event(e toxics.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Add(e)
	fmt.Fprintln(s.stdout, eventLine(e))
	if s.file == nil || s.writeErr != nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = s.file.Write(append(b, '\n'))
	}
	if err != nil {
		s.writeErr = err
		fmt.Fprintf(s.stderr, "indoubt proxy: events file: %v; faults go on to stdout only\n", err)
	}
}

// proxyStatus is the startup line: where the proxy listens and every fault it will
// arm, from the flags and from the schedule.
func proxyStatus(cfg proxyConfig, px *faults.Proxy) string {
	status := fmt.Sprintf("indoubt proxy: listening on %s, forwarding to %s (%s", px.Addr(), cfg.opt.Upstream, cfg.protocol)
	if cfg.opt.Protocol != nil {
		status += fmt.Sprintf(", seed %d", cfg.opt.Seed)
	}
	var armed []string
	if cfg.cut > 0 {
		armed = append(armed, fmt.Sprintf("cut-after-commit %v", cfg.cut))
	}
	if cfg.drop > 0 {
		armed = append(armed, fmt.Sprintf("drop-commit %v", cfg.drop))
	}
	for _, f := range cfg.schedule {
		armed = append(armed, f.Spec)
	}
	if len(armed) == 0 {
		armed = append(armed, "none")
	}
	status += "; faults: " + strings.Join(armed, ", ")
	if a := px.APIAddr(); a != "" {
		status += "; toxiproxy API on " + a
	}
	return status + ")"
}

// warnRemote says so when --allow-remote let the proxy or its API bind beyond loopback.
func warnRemote(stderr io.Writer, px *faults.Proxy) {
	for _, a := range []struct{ what, addr string }{
		{"the proxy listens", px.Addr()},
		{"the toxiproxy API (no authentication) listens", px.APIAddr()},
	} {
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(stderr, "indoubt proxy: warning: %s on %s, beyond loopback: anyone who reaches it can use it\n", a.what, a.addr)
		}
	}
}

// runProxySchedule runs the schedule, printing its windows, until ctx is done.
func runProxySchedule(ctx context.Context, sched schedule.Schedule, px *faults.Proxy, sink *proxySink) error {
	done := make(chan error, 1)
	go func() {
		done <- sched.Run(ctx, px, time.Now(), func(w schedule.Window) {
			state := "closed"
			if w.Open {
				state = "opened"
			}
			sink.mu.Lock()
			fmt.Fprintf(sink.stderr, "indoubt proxy: %s window %s\n", w.Fault, state)
			sink.mu.Unlock()
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		<-ctx.Done()
	case <-ctx.Done():
		if err := <-done; err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
	}
	return nil
}

// eventLine is a fault as printed on stdout, with the number of the transaction it hit
// on its connection and whether that transaction wrote:
//
//	15:04:05.000 commit-cut applied 127.0.0.1:51514 "commit" COMMIT (txn 3, changed rows: UPDATE 1, INSERT 0 1)
func eventLine(e toxics.Event) string {
	s := fmt.Sprintf("%s %s %s %s %s", e.Time.Format("15:04:05.000"), faultName(e), e.Truth, e.Conn, strconv.Quote(e.Statement))
	if e.Tag != "" {
		s += " " + e.Tag
	}
	if r := e.Request; r != nil && r.IdempotencyKey != "" {
		s += " Idempotency-Key " + strconv.Quote(r.IdempotencyKey)
	}
	if e.Txn != nil {
		wrote := "wrote"
		switch {
		case e.Txn.Changed != nil && *e.Txn.Changed:
			wrote = "changed rows"
		case e.Txn.Changed != nil:
			wrote = "its writes changed nothing"
		case !e.Txn.Wrote:
			wrote = "read only: changed nothing"
		}
		if len(e.Txn.Tags) > 0 {
			wrote += ": " + strings.Join(e.Txn.Tags, ", ")
		}
		s += fmt.Sprintf(" (txn %d, %s)", e.Txn.Seq, wrote)
	}
	return s
}
