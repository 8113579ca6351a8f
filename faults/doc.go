// Package faults is indoubt's fault layer: a proxy that makes ambiguous commits on
// purpose, and a schedule that arms faults for windows of a run.
//
// A Proxy stands in front of one server. It accepts each client itself and relays the
// connection with toxiproxy (v2.12.0, embedded in the process), so toxiproxy's
// standard toxics and HTTP API apply, and with a wire protocol (package faults/toxics)
// it judges every byte of the connection for the commit faults. While no standard
// toxic is on the proxy, connections bypass toxiproxy's channels and cost what a bare
// relay costs; adding one moves the open connections onto toxiproxy's links, with
// their commit state, for good. At the moment a client
// commits, it can cut the connection after the server proved the commit (commit-cut:
// applied, the client is not told) or drop the commit before the server sees it
// (commit-drop: not applied); the client sees the same error either way. The proxy
// knows which it did, to which connection (the client's address, from the socket it
// accepted), and reports it as a toxics.Event: the ground truth that a checker never
// sees and a report joins to the history. See Example for a complete program.
//
// # Starting a proxy
//
//	px, err := faults.Start(faults.Options{
//		Upstream: pg.Addr,               // the real server, host:port
//		Protocol: toxics.Postgres{},     // nil: a plain TCP proxy
//		Seed:     seed,                  // derived from the run's --seed
//		Events:   func(e toxics.Event) { events <- e }, // faults.jsonl, history
//	})
//	defer px.Close()
//	dsn := "postgres://...@" + px.Addr() + "/..."   // clients connect here
//
// Start checks the upstream address (a host and a port, and the host resolves) so
// that a typo fails at once instead of dropping every client later.
//
// Bind rule: the proxy, and its HTTP API when asked for, listen on loopback. An
// address with an empty host (":6432") means loopback; any other address (0.0.0.0,
// an interface's address, a name that resolves elsewhere) is refused unless
// Options.AllowRemote is set, because whoever reaches the proxy reaches the server,
// and the API has no authentication.
//
// # Commit faults
//
// Proxy.Faults returns the three knobs, Cut, Drop and Mixed (a fair seeded coin picks
// cut or drop). Each has a probability per commit point and an optional cap on fires;
// they start disarmed and take effect on open connections:
//
//	px.Faults().Cut.Set(0.2, 0)     // cut 20% of commits from now on
//	px.Faults().Mixed.Set(1, 5)     // the next 5 commits, cut or drop
//	px.Faults().Cut.Disarm()
//
// Each commit point draws once from its connection's generator, seeded from Seed, so
// the same seed and the same messages in the same order give the same decisions (see
// toxics.Faults). Totals counts the events by what their proof of commit shows.
//
// # The HTTP API
//
// With Options.API the proxy serves toxiproxy's HTTP API, the one toxiproxy's client
// package and CLI speak: proxies and the standard toxics as toxiproxy has them, and
// the commit faults as three toxic types, commit_cut, commit_drop and commit_mixed,
// one per knob. Their attributes are probability (0 to 1, default 1) and max (a
// number of fires, 0 for no cap); toxicity must stay 1, since toxiproxy rolls it once
// per connection, not per commit point. A proxy has at most one commit toxic of each
// type: adding a second is refused (409) with the name of the first. A knob armed
// from Go or by a schedule shows as a commit toxic named after its type. The API sets
// the knobs through their atomics, never by decoding into a running toxic; POST /reset
// removes every toxic and disarms the knobs. Commit toxics exist only on the proxy
// Start made with a protocol, not on proxies created through the API.
//
// The proxy Start made is listed, enabled and disabled through the API like any other
// (disabled, it closes every connection: a partition), but keeps its listen address
// and upstream, which its clients were given: an update that moves it is refused
// (409). DELETE of it stops it for good and closes Proxy.Done.
//
// The API guards against what a web page in a browser on the same machine can send:
// it answers only requests whose Host header names a loopback host (or the address it
// was bound to, with AllowRemote; any address literal when that is 0.0.0.0 or ::), it
// takes POST and PATCH bodies only as application/json (415 otherwise, which refuses
// the cross-origin requests a page may send without a preflight), and it creates or
// moves proxy listeners only on loopback unless AllowRemote (":PORT" is loopback
// there too). Errors have toxiproxy's shape, {"error": "...", "status": N}.
//
// # Schedules
//
//	sched, err := faults.ParseSchedule([]string{"commit-cut:0.2@5s-15s", "latency:5ms"})
//	go sched.Run(ctx, px, runStart, func(w faults.Window) { /* nemesis event */ })
//
// Each entry is NAME[:PARAMS][@START-END]. PARAMS is a first value, then KEY=VALUE
// options, comma-separated. The window's START and END are Go durations from the start
// of the run ("@5s-15s"); "@5s-" lasts until the run ends; without a window the fault is
// armed for the whole run. Windows of one commit fault, and partitions, must not overlap.
//
//	commit-cut[:P][,max=N]     cut the reply that proves a commit, with probability P
//	                           per commit point (default 1), at most N times per window
//	commit-drop[:P][,max=N]    drop the commit before it reaches the server
//	commit-mixed[:P][,max=N]   fire with P; a fair seeded coin picks cut or drop
//	prepare-cut[:P][,max=N]    commit-cut at PREPARE TRANSACTION only (Fault.Statement:
//	                           the proxy's Options.Match must select that statement)
//	prepare-drop[:P][,max=N]   commit-drop at PREPARE TRANSACTION only
//	latency:DELAY[~JITTER]     delay each chunk by DELAY ± JITTER (whole ms: 50ms~10ms)
//	bandwidth:RATE             limit to RATE KB/s
//	timeout:DURATION           stop all data, close after DURATION (0: never close)
//	reset_peer[:DURATION]      reset the connection (RST) after DURATION (default 0)
//	slow_close:DELAY           delay the close by DELAY
//	limit_data:BYTES           close after BYTES bytes
//	partition@START-END        stop listening and close every connection for the window
//
// # Listed faults
//
// A commit fault can also be listed at one commit point instead of armed for a window.
// It fires there exactly once, whatever the seeded rolls say, so a run that lists its
// faults fails the same way without the random decisions of the seed that found it
// (indoubt shrink writes its reproducers so):
//
//	commit-cut@commit:N        at the N-th commit point the proxy counts, from 1
//	commit-drop@commit:N
//	commit-cut@conn:C/txn:T    at the T-th transaction (from 1) of the C-th connection
//	commit-drop@conn:C/txn:T   the proxy accepted (from 0)
//
// Every event names its point both ways (toxics.Event's point, conn_index and txn.seq),
// so any fault of faults.jsonl can be listed again. The counted points are the ones the
// seeded rolls are made for (toxics.Pin), from the proxy's start: what a client does
// before the schedule starts (a workload's setup) is counted too, and with one client
// the N-th is that client's N-th write or commit; with several, whichever client makes
// the N-th. A connection's
// accept index depends on the order clients connect in, which several clients race;
// the commit number does not. A listed entry takes no probability, max or window, and
// two entries may not list one point.
//
// ParseSchedule also takes the process faults that indoubt run applies to a server it
// launched (kill, pause, restart, failover, power-loss; see indoubt run --help), marked
// Fault.Process, so that one schedule holds all of a run's faults. This package cannot
// apply them: Schedule.Run leaves them to whoever launched the server.
//
// The coordinator crash acts on indoubt's own two-phase commit coordinator (the transfer
// and two-rows runs), not on the proxy either:
//
//	coordinator-crash@T        the coordinator dies at T, leaving its transactions in doubt
//
// Partitions between nodes, and slow or lossy links between them, act on a topology
// indoubt launched with a network of its own (each node in a network namespace); the
// runner applies them (Schedule.Run leaves them alone), each change a nemesis event
// with who could reach whom. A partition is a grudge, as Jepsen's: each node drops
// what it receives from the nodes it has a grudge against, and from the clients that
// stand beside them. The shapes that shuffle draw from the run's seed; every
// partition is healed at its END, and one runs at a time:
//
//	partition:isolate-primary@START-END   the primary alone | every other node
//	partition:isolate:NODE@START-END      NODE alone | the others ("isolate:n2")
//	partition:halves@START-END            two shuffled halves
//	partition:majority@START-END          the primary in a minority | a majority
//	partition:majorities-ring@START-END   each node sees its own majority (4+ nodes)
//	partition:bridge@START-END            two halves and one node that sees both
//	partition:one-way[:NODE]@START-END    the others drop what the primary (or NODE)
//	                                      sends; it still hears them
//
// A standard toxic with ",link=replication" is put on the replication path between
// nodes instead (a proxy the standby streams through): "latency:200ms,link=replication@2s-6s".
//
// The standard toxics apply to server-to-client bytes (toxiproxy's default); add
// ",stream=up" for client-to-server. Hyphens and underscores are the same in names
// (reset-peer = reset_peer). Examples: "commit-cut:0.2@5s-15s", "commit-mixed:0.1,max=5",
// "latency:50ms~10ms,stream=up@0s-30s", "partition@10s-12s".
//
// The commit decisions are seeded (see toxics.Faults): the same seed and the same
// messages in the same order give the same decisions. Windows follow the wall clock, and
// toxiproxy's latency jitter uses its own unseeded generator.
package faults
