// The commit decisions are seeded (see toxics.Faults): the same seed and the same
// messages in the same order give the same decisions. toxiproxy's latency jitter uses
// its own unseeded generator.
// Package faults is indoubt's fault layer: a proxy that makes ambiguous commits on
// purpose, and tells what it did.
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
// from Go shows as a commit toxic named after its type. The API sets
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
// # Listed faults
//
// A commit fault can also be listed at one commit point instead of armed with a
// probability. It fires there exactly once, whatever the seeded rolls say, so a program
// that lists its faults fails the same way without the random decisions of the seed
// that found it:
//
//	px.Faults().Listed.Add(toxics.Pin{Kind: toxics.CommitCut, Point: 4})        // the 4th commit point
//	px.Faults().Listed.Add(toxics.Pin{Kind: toxics.CommitDrop, Conn: 0, Txn: 3}) // the 3rd transaction of the first connection
//
// Every event names its point both ways (toxics.Event's Point, ConnIndex and Txn.Seq),
// so any fault the proxy told can be listed again; toxics.Pin says what is counted, and
// Proxy.CommitPoints how many points a proxy has counted so far.
//
// # Fault schedules
//
// indoubt run, exec and proxy take a schedule of faults (--fault entries such as
// "commit-cut:0.2@5s-15s", "partition@10s-12s", "kill@3s"), documented in their --help
// and in docs/faults.md. They arm this package's knobs and toxics at each window; a
// program of one's own does the same with Faults, AddToxic and RemoveToxic, and
// Disable and Enable for a partition of the proxy.
//
// The commit decisions are seeded (see toxics.Faults): the same seed and the same
// messages in the same order give the same decisions. Windows follow the wall clock, and
// toxiproxy's latency jitter uses its own unseeded generator.
package faults
