package chaosmesh

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/indoubt/indoubt/internal/schedule"
)

// The topologies whose faults aim at the leader when they fire (Options.Topology), as
// indoubt run aims them at a launched etcd cluster or Patroni cluster.
const (
	TopologyEtcd    = "etcd"
	TopologyPatroni = "patroni"
)

// Topologies lists Options.Topology's values; "" is a topology with a fixed primary.
var Topologies = []string{TopologyEtcd, TopologyPatroni}

// DCSShape is the shape of partition:dcs[:NODE]@START-END, which only Generate
// takes (ParseSchedule): a Patroni cluster's nodes (or NODE alone) cut from the pods of
// their DCS (Options.DCSPods) both ways, still reaching one another and their clients.
// On one machine indoubt runs an etcd member on each Patroni node, so there is no such
// cut to make there; on Kubernetes the DCS is pods of its own.
const DCSShape = "dcs"

// ParseSchedule parses a schedule as schedule.Parse does, and also takes
// partition:dcs[:NODE]@START-END (DCSShape): its window is read, and held not to
// overlap the other partitions, as a partition's.
func ParseSchedule(specs []string) (schedule.Schedule, error) {
	plain := slices.Clone(specs)
	type dcs struct {
		i      int
		target string
	}
	var cuts []dcs
	for i, spec := range specs {
		rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "partition:"+DCSShape)
		if !ok || rest != "" && rest[0] != '@' && rest[0] != ':' {
			continue
		}
		target, window, _ := strings.Cut(rest, "@")
		target = strings.TrimPrefix(target, ":")
		if window == "" {
			return nil, fmt.Errorf("fault %q: partition:dcs needs a window with an end, as in partition:dcs@5s-20s", spec)
		}
		plain[i] = "partition@" + window
		cuts = append(cuts, dcs{i, target})
	}
	s, err := schedule.Parse(plain)
	if err != nil {
		// Name the entry as it was written.
		for _, c := range cuts {
			err = errors.New(strings.ReplaceAll(err.Error(), fmt.Sprintf("%q", plain[c.i]), fmt.Sprintf("%q", specs[c.i])))
		}
		return nil, err
	}
	for _, c := range cuts {
		s[c.i].Spec, s[c.i].Shape, s[c.i].Target = specs[c.i], DCSShape, c.target
	}
	return s, nil
}

// checkTopology refuses a topology Generate does not know, and the settings it needs
// that are malformed.
func checkTopology(opt Options) error {
	if opt.Topology != "" && !slices.Contains(Topologies, opt.Topology) {
		return fmt.Errorf("chaos mesh: topology %q: want %s, or none", opt.Topology, strings.Join(Topologies, " or "))
	}
	if opt.Topology != "" && (opt.Primary != "" || opt.Standby != "") {
		return fmt.Errorf("chaos mesh: on %s the leader is found when a fault fires, not named: no primary or standby", opt.Topology)
	}
	if opt.Topology == "" && (opt.LeaderLabel != "" || len(opt.DCSPods) > 0) {
		return fmt.Errorf("chaos mesh: a leader's label and DCS pods are for a topology whose faults aim at the leader (%s)", strings.Join(Topologies, ", "))
	}
	if (opt.LeaderLabel == "") != (opt.ClusterLabel == "") {
		return errors.New("chaos mesh: the leader's label and the cluster's label go together: the pods of the cluster other than the leader are selected by the one and not the other")
	}
	for _, l := range []struct{ what, label string }{{"leader", opt.LeaderLabel}, {"cluster", opt.ClusterLabel}} {
		if l.label == "" {
			continue
		}
		if k, v, ok := strings.Cut(l.label, "="); !ok || k == "" || v == "" || strings.ContainsAny(k+v, "=, ") {
			return fmt.Errorf("chaos mesh: the %s's label %q: want KEY=VALUE, as in role=master", l.what, l.label)
		}
	}
	if opt.LeaderLabel != "" && strings.SplitN(opt.LeaderLabel, "=", 2)[0] == strings.SplitN(opt.ClusterLabel, "=", 2)[0] {
		return fmt.Errorf("chaos mesh: the leader's label %s and the cluster's %s have one key: a pod cannot carry both", opt.LeaderLabel, opt.ClusterLabel)
	}
	for _, p := range opt.DCSPods {
		for n, q := range opt.Pods {
			if p == q {
				return fmt.Errorf("chaos mesh: pod %s is node %s and a DCS member: cutting a node from its DCS needs the DCS in pods of its own", p, n)
			}
		}
	}
	return nil
}

// leaderFault writes the fault f of a topology whose faults aim at the leader
// (Options.Topology), or says it is not one of those (handled false) and is written as
// any other. What cannot be aimed correctly is refused.
//
// A Chaos Mesh object selects its pods when it is created, so a fault aimed at the
// leader is written with a label selector, and the label must be on the pod that leads
// when the object is created: Options.LeaderLabel (KEY=VALUE, a label the cluster keeps
// on its leader, such as Patroni's role label with its Kubernetes DCS), the cluster's
// other pods those with Options.ClusterLabel and without the leader's.
func leaderFault(f schedule.Fault, opt Options, obj objFunc, pods func(...string) map[string]any, duration func() (string, error)) (out []Object, handled bool, err error) {
	lk, lv, _ := strings.Cut(opt.LeaderLabel, "=")
	ck, cv, _ := strings.Cut(opt.ClusterLabel, "=")
	leader := map[string]any{"namespaces": []string{opt.Namespace}, "labelSelectors": map[string]string{ck: cv, lk: lv}}
	others := map[string]any{"namespaces": []string{opt.Namespace}, "labelSelectors": map[string]string{ck: cv},
		"expressionSelectors": []map[string]any{{"key": lk, "operator": "NotIn", "values": []string{lv}}}}
	needLabel := func() error {
		if opt.LeaderLabel != "" {
			return nil
		}
		return fmt.Errorf("on %s it aims at the leader as the fault fires, and a Chaos Mesh object picks its pods when it is created: give the label your cluster keeps on its leader pod and the one all its pods carry (--leader-label KEY=VALUE --cluster-label KEY=VALUE), or aim at a named node (partition:isolate:NODE)", opt.Topology)
	}
	switch {
	case f.Shape == DCSShape:
		if opt.Topology != TopologyPatroni {
			return nil, true, fmt.Errorf("partition:dcs cuts Patroni nodes from their DCS: --topology %s", TopologyPatroni)
		}
		if len(opt.DCSPods) == 0 {
			return nil, true, errors.New("partition:dcs needs the pods of the DCS (--dcs-pod POD, one per etcd member)")
		}
		d, err := duration()
		if err != nil {
			return nil, true, err
		}
		nodes := opt.Nodes
		if f.Target != "" {
			if !slices.Contains(opt.Nodes, f.Target) {
				return nil, true, fmt.Errorf("partition:dcs: %q is not one of the nodes (%v)", f.Target, opt.Nodes)
			}
			nodes = []string{f.Target}
		}
		dcs := slices.Clone(opt.DCSPods)
		sort.Strings(dcs)
		// Both ways: the nodes hear nothing from the DCS and it nothing from them; the
		// nodes, their replication and their clients are left alone.
		return []Object{obj("NetworkChaos", "dcs", map[string]any{
			"action": "partition", "mode": "all", "selector": pods(nodes...), "direction": "both",
			"target":   map[string]any{"mode": "all", "selector": map[string]any{"pods": map[string]any{opt.Namespace: dcs}}},
			"duration": d,
		})}, true, nil
	case f.Link != "":
		return nil, true, fmt.Errorf("the replication link's ends move with the leader on %s, and a link toxic needs them fixed", opt.Topology)
	case f.Name == "failover":
		return nil, true, fmt.Errorf("%s fails over by itself: failover@T is indoubt's own promotion of a standby", opt.Topology)
	case f.Name == "kill" || f.Name == "pause":
		if err := needLabel(); err != nil {
			return nil, true, err
		}
		spec := map[string]any{"action": "pod-kill", "mode": "one", "selector": leader, "gracePeriod": 0}
		if f.Name == "pause" {
			d, err := duration()
			if err != nil {
				return nil, true, err
			}
			spec = map[string]any{"action": "pod-failure", "mode": "one", "selector": leader, "duration": d}
		}
		return []Object{obj("PodChaos", f.Name+"-leader", spec)}, true, nil
	case f.Shape == schedule.IsolatePrimary, f.Shape == schedule.OneWay && f.Target == "":
		if err := needLabel(); err != nil {
			return nil, true, err
		}
		d, err := duration()
		if err != nil {
			return nil, true, err
		}
		// Each side drops what it receives from the other, as the grudge of a run on
		// one machine: the others drop the leader's packets, and for isolate-primary the
		// leader theirs.
		drop := func(suffix string, self, from map[string]any) Object {
			return obj("NetworkChaos", suffix, map[string]any{"action": "partition", "mode": "all", "selector": self,
				"direction": "from", "target": map[string]any{"mode": "all", "selector": from}, "duration": d})
		}
		out := []Object{drop("partition-others", others, leader)}
		if f.Shape == schedule.IsolatePrimary {
			out = append([]Object{drop("partition-leader", leader, others)}, out...)
		}
		return out, true, nil
	case f.Shape == schedule.Majority:
		return nil, true, fmt.Errorf("partition:majority puts the leader in a minority with nodes drawn around it, which needs the leader's name when it fires; with 3 nodes partition:isolate-primary is the same cut")
	}
	return nil, false, nil
}
