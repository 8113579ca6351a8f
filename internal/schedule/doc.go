// Package schedule is the fault schedule of indoubt run, exec and proxy: the grammar of
// a --fault entry (Fault, Parse), and Schedule.Run, which arms each fault on a proxy of
// package faults at its window's start and disarms it at its end. The faults a proxy
// cannot apply (process faults, partitions between nodes, links between nodes, the
// coordinator crash) are parsed here and applied by the runner. It is indoubt's own:
// a program of one's own arms the proxy's knobs and toxics (package faults) directly.
//
//	sched, err := schedule.Parse([]string{"commit-cut:0.2@5s-15s", "latency:5ms"})
//	go sched.Run(ctx, px, runStart, func(w schedule.Window) { /* nemesis event */ })
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
// Parse also takes the process faults that indoubt run applies to a server it
// launched (kill, pause, restart, failover, power-loss; see indoubt run --help), marked
// Fault.Process, so that one schedule holds all of a run's faults. Schedule.Run cannot
// apply them: it leaves them to whoever launched the server.
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
package schedule
