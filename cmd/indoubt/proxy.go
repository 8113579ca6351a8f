package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
)

const proxyHelp = `indoubt proxy: the commit-aware fault proxy, standalone, in front of any application.

It forwards connections from --listen to --upstream, understands the database's wire
protocol, and at the moment of commit either cuts the connection after the server
committed (--cut-after-commit: the change is applied, the client gets an error) or
drops the commit before it reaches the server (--drop-commit: not applied, the same
error). Each fault is printed to stdout as it fires, one line, and appended to --events
as JSON (one object per line) with its ground truth. It runs until Ctrl-C.

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

Usage: indoubt proxy --upstream HOST:PORT [flags]

Example:
  indoubt proxy --upstream 127.0.0.1:5432 --listen 127.0.0.1:6432 --cut-after-commit 0.1 --events faults.jsonl
  psql -h 127.0.0.1 -p 6432 ...                        # the application connects here
  indoubt proxy --upstream db:5432 --fault commit-mixed:0.2@10s-40s --fault latency:5ms --seed 7

Exit codes: 0 stopped by Ctrl-C, 3 could not run (bad flags, address in use).
`

func proxyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("proxy", proxyHelp, stdout)
	var (
		protocol = fs.String("protocol", "postgres", "wire protocol: postgres, resp (Redis), mongo (OP_MSG), cql (native protocol v3-v5), or tcp (no commit faults)")
		listen   = fs.String("listen", "127.0.0.1:6432", "address to accept clients on")
		upstream = fs.String("upstream", "", "the server's address, host:port (required)")
		cut      = fs.Float64("cut-after-commit", 0, "probability per commit point of cutting the connection after the server committed")
		drop     = fs.Float64("drop-commit", 0, "probability per commit point of dropping the commit before the server sees it")
		seed     = fs.Int64("seed", 1, "seed of the fault decisions: the same seed and message order give the same faults")
		events   = fs.String("events", "", "append each fault as a JSON line to this file")
		api      = fs.String("api", "", "serve toxiproxy's HTTP API on this address (loopback when the host is empty, e.g. :8474); off by default")
		match    = fs.String("match", "", "regular expression: only statements whose SQL matches count as commit points")
		sched    multiFlag
	)
	fs.Var(&sched, "fault", "scheduled fault NAME[:P][@START-END], repeatable: commit-cut:0.2@5s-15s, latency:50ms~10ms, partition@5s-7s, ...")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("proxy: unexpected argument %q", fs.Arg(0))
	}
	if *upstream == "" {
		return fmt.Errorf("proxy: --upstream is required (the server's host:port)")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"--cut-after-commit", *cut}, {"--drop-commit", *drop}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("proxy: %s %v: want a probability from 0 to 1", p.name, p.v)
		}
	}
	if *cut+*drop > 1 {
		return fmt.Errorf("proxy: --cut-after-commit and --drop-commit add up to more than 1")
	}
	var proto toxics.Protocol
	switch *protocol {
	case "postgres", "postgresql", "pg":
		proto = toxics.Postgres{}
	case "resp", "redis":
		proto = toxics.Resp{}
	case "mongo", "mongodb":
		proto = toxics.Mongo{}
	case "cql", "cassandra":
		proto = toxics.CQL{}
	case "tcp":
		if *cut > 0 || *drop > 0 || *match != "" {
			return fmt.Errorf("proxy: commit faults need a protocol: --protocol postgres, resp, mongo or cql")
		}
	default:
		return fmt.Errorf("proxy: unknown --protocol %q (want postgres, resp, mongo, cql or tcp)", *protocol)
	}
	schedule, err := faults.ParseSchedule(sched)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	for _, f := range schedule {
		if (f.Name == "commit-cut" && *cut > 0) || (f.Name == "commit-drop" && *drop > 0) {
			return fmt.Errorf("proxy: --fault %s and its flag both arm %s: use one", f.Spec, f.Name)
		}
		if f.Toxic == nil && f.Name != "partition" && proto == nil {
			return fmt.Errorf("proxy: --fault %s needs a protocol: --protocol postgres", f.Spec)
		}
	}
	var matchFn func(string) bool
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return fmt.Errorf("proxy: --match: %w", err)
		}
		matchFn = re.MatchString
	}

	var file *os.File
	if *events != "" {
		f, err := os.OpenFile(*events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("proxy: events file: %w", err)
		}
		defer f.Close()
		file = f
	}
	var mu sync.Mutex
	var writeErr error
	onEvent := func(e toxics.Event) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stdout, eventLine(e))
		if file == nil || writeErr != nil {
			return
		}
		b, err := json.Marshal(e)
		if err == nil {
			_, err = file.Write(append(b, '\n'))
		}
		if err != nil {
			writeErr = err
			fmt.Fprintf(stderr, "indoubt proxy: events file: %v; faults go on to stdout only\n", err)
		}
	}

	px, err := faults.Start(faults.Options{
		Upstream: *upstream,
		Listen:   *listen,
		Protocol: proto,
		Seed:     *seed,
		Match:    matchFn,
		Events:   onEvent,
		API:      *api,
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	defer px.Close()
	if f := px.Faults(); f != nil {
		f.Cut.Set(*cut, 0)
		f.Drop.Set(*drop, 0)
	}
	status := fmt.Sprintf("indoubt proxy: listening on %s, forwarding to %s (%s", px.Addr(), *upstream, *protocol)
	if proto != nil {
		status += fmt.Sprintf(", cut-after-commit %v, drop-commit %v, seed %d", *cut, *drop, *seed)
	}
	if a := px.APIAddr(); a != "" {
		status += ", toxiproxy API on " + a
	}
	fmt.Fprintln(stderr, status+")")

	done := make(chan error, 1)
	go func() {
		done <- schedule.Run(ctx, px, time.Now(), func(w faults.Window) {
			state := "closed"
			if w.Open {
				state = "opened"
			}
			mu.Lock()
			fmt.Fprintf(stderr, "indoubt proxy: %s window %s\n", w.Fault, state)
			mu.Unlock()
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

// eventLine is a fault as printed on stdout:
//
//	15:04:05.000 commit-cut applied 127.0.0.1:51514 "commit" COMMIT
func eventLine(e toxics.Event) string {
	s := fmt.Sprintf("%s %s %s %s %s", e.Time.Format("15:04:05.000"), e.Kind, e.Truth, e.Conn, strconv.Quote(e.Statement))
	if e.Tag != "" {
		s += " " + e.Tag
	}
	return s
}
