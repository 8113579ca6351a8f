package runner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// networkRuns lets one run on namespaces at a time: partitionRun checks that the
// process has none left after its run, which another's would break.
var networkRuns sync.Mutex

// partitionRun is processRun for a topology on a network of its own: it skips (fails
// under CI) where no network can be made, and checks that the run left no namespace.
func partitionRun(t *testing.T, cfg runner.Config) *results.Results {
	t.Helper()
	if err := netns.Available(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	networkRuns.Lock()
	defer networkRuns.Unlock()
	res := processRun(t, cfg)
	left, _ := filepath.Glob(filepath.Join("/run/netns", fmt.Sprintf("%s%d-*", netns.Prefix, os.Getpid())))
	if len(left) != 0 {
		t.Errorf("namespaces left after the run: %v", left)
	}
	grudges := 0
	for _, f := range cfg.Faults.BetweenNodes() {
		if f.Link == "" {
			grudges++
		}
	}
	if len(res.Partitions) != grudges {
		t.Fatalf("partitions %+v for schedule %v", res.Partitions, res.Faults.Schedule)
	}
	return res
}

// historyOps reads a run's history.
func historyOps(t *testing.T, res *results.Results) []histories.Op {
	t.Helper()
	_, ops, err := histories.ReadFile(res.RunDir+"/history.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// PostgreSQL with a standby, the primary isolated from the standby and from the clients
// beside it, failed over inside the partition (the harness kills the old primary and
// promotes the standby, as an orchestrator that fences does). With asynchronous
// replication the inserts the old primary acknowledged after the partition began never
// reached the standby: lost, each named by the checker. With synchronous replication
// the old primary could acknowledge nothing the standby did not have: none lost; and
// before the partition a latency on the standby's link held every commit for it.
func TestPartitionPostgresFailover(t *testing.T) {
	t.Parallel() // a topology of its own
	for _, repl := range []string{"async", "sync"} {
		t.Run(repl, func(t *testing.T) {
			specs, d := []string{"partition:isolate-primary@1s-2500ms", "failover@1500ms"}, 3*time.Second
			if repl == "sync" {
				// Before the partition, the standby's stream slowed on its link.
				specs, d = []string{"partition:isolate-primary@2s-3500ms", "failover@2500ms", linkLatency}, 4*time.Second
			}
			cfg := runner.Config{Workload: "insert", Store: "postgres", Topology: runner.TopologyReplicated, Replication: repl,
				Workers: 4, Duration: d, Seed: 1, Retry: policy(t, "none"),
				Faults: parseSchedule(t, specs...)}
			res := partitionRun(t, cfg)
			if repl == "sync" {
				checkLinkLatency(t, historyOps(t, res))
			}
			p := res.Partitions[0]
			if want := map[string][]string{"n1": {"n1"}, "n2": {"n2"}}; !reflect.DeepEqual(p.Reach, want) || p.Shape != "isolate-primary" {
				t.Errorf("partition %+v: want n1 and n2 apart", p)
			}
			if len(res.ProcessFaults) != 1 || res.ProcessFaults[0].Error != "" {
				t.Fatalf("process faults %+v", res.ProcessFaults)
			}
			t.Logf("%s; %s", p, res.ProcessFaults[0])
			switch repl {
			case "async":
				if p.AckedDuring["n1"] == 0 {
					t.Fatalf("the isolated primary acknowledged nothing before the failover: %+v", p)
				}
				if res.Verdict != checker.Invalid || len(res.LostWrites) == 0 {
					t.Fatalf("verdict %v, lost %+v: want the acknowledged inserts of the isolated primary lost", res.Verdict, res.LostWrites)
				}
				for _, l := range res.LostWrites {
					if l.OpID == "" || l.Fault != "failover@1500ms" {
						t.Errorf("lost write %+v: want it named, after the failover", l)
					}
				}
				if p.LostWrites != res.LostTotal() || len(p.LostOps) != len(res.LostWrites) {
					t.Errorf("partition counts %d lost (%v), the run %d", p.LostWrites, p.LostOps, res.LostTotal())
				}
				t.Logf("%d acknowledged inserts lost, first: %s", res.LostTotal(), res.LostWrites[0].Explanation)
			case "sync":
				if len(res.LostWrites) != 0 || p.LostWrites != 0 {
					t.Errorf("lost %+v with synchronous replication", res.LostWrites)
				}
				if res.Verdict != checker.Valid {
					t.Errorf("verdict %v: %s", res.Verdict, res.Summary)
				}
			}
		})
	}
}

// linkLatency delays what the primary streams to the standby by 300 ms, on the link
// proxy the standby streams through.
const linkLatency = "latency:300ms,link=replication@100ms-1900ms"

// checkLinkLatency checks, in a run of synchronous replication with linkLatency, that
// the link's window is in the history and that every insert invoked inside it and
// acknowledged before it closed waited for the delayed stream: at least 300 ms from
// invoke to acknowledgement (a lower bound the proxy sets, whatever the load).
func checkLinkLatency(t *testing.T, ops []histories.Op) {
	t.Helper()
	var start, stop int64 = -1, -1
	invoked := map[string]int64{}
	for _, op := range ops {
		switch {
		case op.Process == histories.Nemesis && strings.Contains(string(op.Value), `"link":"replication"`):
			if op.F == "start" {
				start = op.Time
			} else if op.F == "stop" {
				stop = op.Time
			}
			if strings.Contains(string(op.Value), `"error"`) {
				t.Errorf("link event %s: %s", op.F, op.Value)
			}
		case op.IsClient() && op.Type == histories.Invoke:
			invoked[op.OpID] = op.Time
		}
	}
	if start < 0 || stop < start {
		t.Fatalf("link window %d to %d: want a start and a stop event", start, stop)
	}
	n := 0
	for _, op := range ops {
		at, ok := invoked[op.OpID]
		if !op.IsClient() || op.Type != histories.OK || !ok || at < start || op.Time > stop {
			continue
		}
		n++
		if d := time.Duration(op.Time - at); d < 300*time.Millisecond {
			t.Errorf("insert %s acknowledged %v after its invoke, inside the link's 300 ms latency", op.OpID, d)
		}
	}
	if n == 0 {
		t.Errorf("no insert invoked and acknowledged inside the link's window (%.2fs to %.2fs)", time.Duration(start).Seconds(), time.Duration(stop).Seconds())
		return
	}
	t.Logf("%d inserts acknowledged inside the link's window, each after at least 300 ms", n)
}

// Redis in Jepsen's layout (a primary and two replicas on n1 to n3, five Sentinels on
// n1 to n5), the primary put in a minority with one other node and the clients beside
// both, while the Sentinels of the majority fail over to a replica. Whether
// acknowledged writes are lost, and whether two primaries took writes at once, is a
// finding either way: the test asserts that the run reports it from the history, with
// the operations, and logs what it found.
func TestPartitionRedisSentinelsMajority(t *testing.T) {
	cfg := runner.Config{Workload: "budget", Store: "redis", Topology: runner.TopologyReplicated, Budget: 1_000_000_000,
		Workers: 5, Duration: 6 * time.Second, Seed: 1, Retry: policy(t, "none"),
		Faults: parseSchedule(t, "partition:majority@1s-5s")}
	res := partitionRun(t, cfg)
	p := res.Partitions[0]
	var minority []string
	for _, c := range p.Components {
		if slices.Contains(c, "n1") {
			minority = c
		}
	}
	if len(p.Components) != 2 || len(minority) != 2 {
		t.Fatalf("components %v: want the primary n1 in a minority of two", p.Components)
	}
	ops := historyOps(t, res)
	okOps := map[string]bool{}
	for _, op := range ops {
		if op.IsClient() && op.Type == histories.OK {
			okOps[op.OpID] = true
		}
	}
	for _, s := range res.SplitBrain {
		t.Logf("finding: %s", s)
		if s.WritesOnBoth {
			if len(s.Examples) < 2 {
				t.Errorf("split brain %+v: writes on both sides without an operation of each", s)
			}
			for prim, id := range s.Examples {
				if !okOps[id] {
					t.Errorf("split brain example %s of %s is no acknowledged operation", id, prim)
				}
			}
		}
	}
	if len(res.SplitBrain) == 0 {
		t.Logf("finding: no two nodes reported primary at once")
	}
	switch {
	case res.LostTotal() > 0:
		if res.Verdict != checker.Invalid || res.LostWrites[0].Fault != "partition:majority@1s-5s" || res.LostWrites[0].OpID == "" {
			t.Errorf("lost %+v, verdict %v: want the partition named and the verdict invalid", res.LostWrites, res.Verdict)
		}
		if p.LostWrites != res.LostTotal() {
			t.Errorf("the partition counts %d lost, the run %d", p.LostWrites, res.LostTotal())
		}
		t.Logf("finding: %s", res.LostWrites[0].Explanation)
	default:
		t.Logf("finding: no acknowledged write lost (%v: %s)", res.Verdict, res.Summary)
	}
	t.Logf("acknowledged while partitioned, by side: %v; %s", p.AckedDuring, p)
}

// The refusals of partitions between nodes, before anything launches.
func TestPartitionRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  runner.Config
		want string
	}{
		{runner.Config{Store: "postgres", Faults: parseSchedule(t, "partition:halves@1s-2s")}, "add --topology replicated"},
		{runner.Config{Store: "postgres", DSN: "postgres://x@127.0.0.1:5432/x", Topology: runner.TopologyReplicated, Faults: parseSchedule(t, "partition:halves@1s-2s")}, "drop --dsn"},
		{runner.Config{Store: "mongo", Faults: parseSchedule(t, "partition:halves@1s-2s")}, "not mongo"},
		{runner.Config{Store: "redis", Faults: parseSchedule(t, "latency:5ms,link=replication@1s-2s")}, "link=replication"},
		{runner.Config{Store: "postgres", Topology: runner.TopologyReplicated, Faults: parseSchedule(t, "partition:halves@1s-2s", "commit-cut")}, "fault proxy"},
		{runner.Config{Store: "postgres", Network: "bridged"}, "--network"},
	} {
		tc.cfg.Workers, tc.cfg.Duration = 1, 3*time.Second
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line with %q", tc.cfg.Faults, err, tc.want)
		}
	}
}

// A three-node Cassandra ring (replication factor 3), n1 isolated from the others and
// from the clients beside them, under the budget workload's LWT loop. Paxos needs a
// quorum of the replicas: no decrement that n1's clients invoke after the grudge is on
// and that completes before the heal can be acknowledged, while the majority side's
// are; and the LWTs lose nothing. Three JVMs take minutes to start on a loaded machine,
// hence INDOUBT_CQL_LONG.
func TestPartitionCassandraRingQuorum(t *testing.T) {
	longCassandra(t)
	cfg := runner.Config{Workload: "budget", Store: "cql", Topology: runner.TopologyReplicated, Budget: 1_000_000_000,
		Workers: 3, Duration: 12 * time.Second, Seed: 1, Retry: policy(t, "none"),
		Faults: parseSchedule(t, "partition:isolate-primary@3s-8s")}
	res := partitionRun(t, cfg)
	p := res.Partitions[0]
	if want := [][]string{{"n1"}, {"n2", "n3"}}; !reflect.DeepEqual(p.Components, want) {
		t.Fatalf("components %v, want %v", p.Components, want)
	}
	if !strings.Contains(res.Server, "ring of 3 nodes") {
		t.Errorf("server %q", res.Server)
	}
	ops := historyOps(t, res)
	var start, end int64 = -1, -1
	for _, op := range ops {
		if op.Process == histories.Nemesis && op.F == "partition" {
			start = op.Time
		}
		if op.Process == histories.Nemesis && op.F == "heal" {
			end = op.Time
		}
	}
	invoked := map[string]histories.Op{}
	acked := map[string]int{}
	for _, op := range ops {
		if !op.IsClient() || op.F != "decrement" {
			continue
		}
		if op.Type == histories.Invoke {
			invoked[op.OpID] = op
			continue
		}
		inv, ok := invoked[op.OpID]
		if op.Type != histories.OK || !ok || inv.Time < start || op.Time > end {
			continue
		}
		host, _, _ := strings.Cut(op.Conn, ":")
		acked[host]++
		if strings.HasSuffix(host, ".101") {
			t.Errorf("decrement %s acknowledged through isolated n1 (%s), invoked and completed inside the partition", op.OpID, op.Conn)
		}
	}
	if len(acked) == 0 {
		t.Errorf("no decrement acknowledged inside the partition on the majority side")
	}
	if res.Verdict != checker.Valid || res.LostTotal() != 0 {
		t.Errorf("verdict %v, lost %d: %s", res.Verdict, res.LostTotal(), res.Summary)
	}
	t.Logf("acknowledged inside the partition, by client address: %v; %s", acked, p)
}

// A link fault on Redis's replication path: n2's replica dials n1 as it was told, and
// the harness, redirecting that dial, stands between them. A reset_peer window on the
// link resets the replication stream: n1's log shows its replica connecting from the
// link's address, that connection lost inside the window and the replica syncing again
// after it, while n3's replica, not on the link, is never lost.
func TestLinkResetRedisReplication(t *testing.T) {
	t.Parallel() // a topology of its own
	cfg := runner.Config{Workload: "budget", Store: "redis", Topology: runner.TopologyReplicated, Budget: 1_000_000_000,
		Workers: 2, Duration: 3 * time.Second, Seed: 1, Retry: policy(t, "none"),
		Faults: parseSchedule(t, "reset_peer:0s,link=replication@1s-2s")}
	res := partitionRun(t, cfg)
	if res.Verdict != checker.Valid {
		t.Fatalf("%v: %s", res.Verdict, res.Summary)
	}
	m := regexp.MustCompile(`through a link proxy at ([0-9.]+):`).FindStringSubmatch(res.Server)
	if m == nil {
		t.Fatalf("server %q does not name the link", res.Server)
	}
	link := m[1]
	var start, stop int64 = -1, -1
	for _, op := range historyOps(t, res) {
		if op.Process == histories.Nemesis && strings.Contains(string(op.Value), `"link":"replication"`) {
			if strings.Contains(string(op.Value), `"error"`) {
				t.Errorf("link event %s: %s", op.F, op.Value)
			}
			if op.F == "start" {
				start = op.Time
			} else {
				stop = op.Time
			}
		}
	}
	if start < 0 || stop < start {
		t.Fatalf("link window %d to %d: want its start and stop in the history", start, stop)
	}
	log, err := os.ReadFile(filepath.Join(res.RunDir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Redis names a lost replica by its address, or by its client id when it lost it
	// early in a sync: the resync after the window says whose it was.
	syncs := regexp.MustCompile(`Replica ([0-9.]+):6379 asks for synchronization`).FindAllStringSubmatch(string(log), -1)
	bySource := map[string]int{}
	for _, m := range syncs {
		bySource[m[1]]++
	}
	lost := len(regexp.MustCompile(`Connection with replica (`+regexp.QuoteMeta(link)+`:6379|client id #[0-9]+) lost`).FindAllString(string(log), -1))
	for _, o := range regexp.MustCompile(`Connection with replica ([0-9.]+):6379 lost`).FindAllStringSubmatch(string(log), -1) {
		if o[1] != link {
			t.Errorf("replica %s, not on the link, lost its connection", o[1])
		}
	}
	for src, n := range bySource {
		if src != link && n != 1 {
			t.Errorf("replica %s, not on the link, synced %d times", src, n)
		}
	}
	if bySource[link] < 2 || lost < 1 || len(bySource) != 2 {
		t.Fatalf("n1's log: syncs by replica %v and %d connections lost, want the replica at the link's %s reset and synced again:\n%s", bySource, lost, link, log)
	}
	syncsOnLink := bySource[link]
	t.Logf("replica through the link %s: %d syncs, %d connections lost to the reset", link, syncsOnLink, lost)
}

// A link fault on a Cassandra ring's internode path: n2's connections to n1 (its
// gossip and the messages it sends n1) are redirected through the link proxy, and a
// reset_peer window on what they carry to n1 (stream=up: n1 answers on connections of
// its own, so downstream carries almost nothing) resets them. n1's log names each inbound connection
// with its peer's address and the socket's: n2's come from the link's address, and new
// ones are established once the reset began; n3's never come from it. The LWTs lose
// nothing. Three JVMs, hence INDOUBT_CQL_LONG.
func TestLinkResetCassandraInternode(t *testing.T) {
	longCassandra(t)
	cfg := runner.Config{Workload: "budget", Store: "cql", Topology: runner.TopologyReplicated, Budget: 1_000_000_000,
		Workers: 3, Duration: 8 * time.Second, Seed: 1, Retry: policy(t, "none"),
		Faults: parseSchedule(t, "reset_peer:0s,stream=up,link=replication@3s-5s")}
	res := partitionRun(t, cfg)
	if res.Verdict != checker.Valid || res.LostTotal() != 0 {
		t.Fatalf("verdict %v, lost %d: %s", res.Verdict, res.LostTotal(), res.Summary)
	}
	m := regexp.MustCompile(`through a link proxy at ([0-9.]+):`).FindStringSubmatch(res.Server)
	if m == nil {
		t.Fatalf("server %q does not name the link", res.Server)
	}
	link := m[1]
	log, err := os.ReadFile(filepath.Join(res.RunDir, "cassandra-n1.log"))
	if err != nil {
		t.Fatal(err)
	}
	// /PEER:7000(/SOCKET:PORT)->/N1:7000-KIND-ID messaging connection established
	conns := regexp.MustCompile(`InboundConnectionInitiator.* - /([0-9.]+):7000\(/([0-9.]+):\d+\)->/([0-9.]+):7000-([A-Z_]+)-`).FindAllStringSubmatch(string(log), -1)
	peers := map[string]map[string]int{}
	kinds := map[string]int{} // n2's connections through the link, by kind
	for _, c := range conns {
		peer, sock, self, kind := c[1], c[2], c[3], c[4]
		if peer == self {
			continue // n1 to itself
		}
		if peers[peer] == nil {
			peers[peer] = map[string]int{}
		}
		peers[peer][sock]++
		if sock == link {
			kinds[kind]++
		}
	}
	var n2 string
	for peer, socks := range peers {
		if socks[link] > 0 {
			if len(socks) != 1 {
				t.Errorf("peer %s connects from the link and from %v", peer, socks)
			}
			n2 = peer
		}
	}
	if n2 == "" || len(peers) != 2 {
		t.Fatalf("n1's inbound connections by peer and socket address %v: want n2's from the link's %s, n3's direct", peers, link)
	}
	again := false
	for _, n := range kinds {
		again = again || n > 1
	}
	if !again {
		t.Errorf("n2's connections through the link by kind %v: want one established again after the reset", kinds)
	}
	t.Logf("n1's inbound connections by peer and source: %v (link %s); through the link by kind: %v", peers, link, kinds)
}
