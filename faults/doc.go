// Package faults is indoubt's fault layer: a proxy that makes ambiguous commits on
// purpose, and a schedule that arms faults for windows of a run.
//
// A Proxy is toxiproxy (v2.12.0) embedded in the process, listening on loopback, with
// the commit toxics of package faults/toxics installed for a wire protocol. Its HTTP API,
// the one toxiproxy's client package speaks, is off unless Options.API asks for it. A
// runner uses it like this:
//
//	px, err := faults.Start(faults.Options{
//		Upstream: pg.Addr,               // the real server
//		Protocol: toxics.Postgres{},
//		Seed:     seed,                  // derived from the run's --seed
//		Events:   func(e toxics.Event) { events <- e }, // faults.jsonl, history
//	})
//	defer px.Close()
//	dsn := "postgres://...@" + px.Addr() + "/..."   // clients connect here
//	sched, err := faults.ParseSchedule([]string{"commit-cut:0.2@5s-15s", "latency:5ms"})
//	go sched.Run(ctx, px, runStart, func(w faults.Window) { /* nemesis event */ })
//
// or arms the commit faults directly: px.Faults().Cut.Set(0.2, 0).
//
// # Schedule syntax
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
//	latency:DELAY[~JITTER]     delay each chunk by DELAY ± JITTER (whole ms: 50ms~10ms)
//	bandwidth:RATE             limit to RATE KB/s
//	timeout:DURATION           stop all data, close after DURATION (0: never close)
//	reset_peer[:DURATION]      reset the connection (RST) after DURATION (default 0)
//	slow_close:DELAY           delay the close by DELAY
//	limit_data:BYTES           close after BYTES bytes
//	partition@START-END        stop listening and close every connection for the window
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
