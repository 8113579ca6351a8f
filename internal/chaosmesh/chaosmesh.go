// Package chaosmesh turns a fault schedule into Chaos Mesh objects, for a cluster on
// Kubernetes where indoubt cannot apply partitions, kills or pauses itself: a partition
// between nodes becomes one NetworkChaos per node that has a grudge (action partition,
// the node's pods dropping what the pods of the nodes it has a grudge against send), a
// standard toxic on the replication link a NetworkChaos delay or bandwidth between the
// standby and the primary, and kill, pause and failover a PodChaos. The shapes are drawn
// from the schedule's seed as a run on one machine draws them (netns.ShapeRand), so
// the same schedule and seed give the same grudges in both places.
//
// What has no equivalent is refused by name: the commit faults and the client-side
// toxics belong to indoubt's proxy, which a cluster run keeps in front of its clients;
// power loss and restart have no Chaos Mesh action that keeps the data and port. A pause
// becomes pod-failure, which makes the pod unavailable for the window (Chaos Mesh has
// no SIGSTOP); the clients that stand beside a node are not modelled, since a cluster
// run's clients are outside it.
//
// On etcd and Patroni (Options.Topology) the faults aimed at the leader as they fire
// select it by a label the cluster keeps on it, and partition:dcs cuts Patroni nodes
// from their DCS pods (leader.go); what cannot be aimed that way is refused.
//
// A Chaos Mesh object starts when it is created and ends after its duration: the
// annotation indoubt.io/start says when, from the start of the run, to create it.
package chaosmesh

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/schedule"
)

// APIVersion is Chaos Mesh's API group and version of NetworkChaos and PodChaos.
const APIVersion = "chaos-mesh.org/v1alpha1"

// Options says where the schedule's nodes are in the cluster.
type Options struct {
	// Namespace is the Kubernetes namespace of the objects and of the pods.
	Namespace string
	// Nodes are the topology's nodes in order ("n1", "n2" ...), Pods the pod of each.
	Nodes []string
	Pods  map[string]string
	// Primary is the node that is primary when the schedule starts, and Standby the
	// one a replication link leads from (the node after the primary when empty).
	Primary, Standby string
	// Seed draws the shapes, as indoubt run's --seed.
	Seed int64
	// Name prefixes the objects' names; "indoubt" when empty.
	Name string
	// Topology is TopologyEtcd or TopologyPatroni for a cluster whose faults aim at
	// the leader as they fire (leader.go), "" for one with a fixed primary (Primary).
	// LeaderLabel (KEY=VALUE) is the label the cluster keeps on its leader pod, and
	// ClusterLabel one all its pods carry: the selectors of the faults aimed at the
	// leader. DCSPods are the pods of a Patroni cluster's DCS, for partition:dcs.
	Topology                  string
	LeaderLabel, ClusterLabel string
	DCSPods                   []string
}

// Object is one Chaos Mesh object, ready to be written as YAML or JSON.
type Object struct {
	APIVersion string         `yaml:"apiVersion" json:"apiVersion"`
	Kind       string         `yaml:"kind" json:"kind"`
	Metadata   Metadata       `yaml:"metadata" json:"metadata"`
	Spec       map[string]any `yaml:"spec" json:"spec"`
}

// Metadata is the part of Kubernetes object metadata the objects carry.
type Metadata struct {
	Name        string            `yaml:"name" json:"name"`
	Namespace   string            `yaml:"namespace" json:"namespace"`
	Annotations map[string]string `yaml:"annotations" json:"annotations"`
}

// Start is when, from the start of the run, the object must be created.
func (o Object) Start() (time.Duration, error) {
	return time.ParseDuration(o.Metadata.Annotations["indoubt.io/start"])
}

// Generate returns the objects for the schedule, in the order they start. It fails,
// naming the entry, on a fault with no Chaos Mesh equivalent, on a window without an
// end (Chaos Mesh needs a duration), and on a node without a pod.
func Generate(sched schedule.Schedule, opt Options) ([]Object, error) {
	if opt.Namespace == "" {
		return nil, errors.New("chaos mesh: no namespace")
	}
	if opt.Name == "" {
		opt.Name = "indoubt"
	}
	for _, n := range opt.Nodes {
		if opt.Pods[n] == "" {
			return nil, fmt.Errorf("chaos mesh: node %s has no pod", n)
		}
	}
	if err := checkOptions(opt); err != nil {
		return nil, err
	}
	if err := checkTopology(opt); err != nil {
		return nil, err
	}
	if opt.Primary == "" && len(opt.Nodes) > 0 {
		opt.Primary = opt.Nodes[0]
	}
	if opt.Standby == "" {
		for _, n := range opt.Nodes {
			if n != opt.Primary {
				opt.Standby = n
				break
			}
		}
	}
	rng := netns.ShapeRand(opt.Seed)
	var out []Object
	for i, f := range sched {
		objs, err := generate(i, f, opt, rng)
		if err != nil {
			return nil, fmt.Errorf("chaos mesh: fault %q: %w", f.Spec, err)
		}
		if len(objs) == 0 {
			// A partition of one node has no side to cut it from: writing nothing
			// for it would let the schedule pass for one that was kept.
			return nil, fmt.Errorf("chaos mesh: fault %q: makes no Chaos Mesh object with the nodes %v", f.Spec, opt.Nodes)
		}
		out = append(out, objs...)
	}
	sort.SliceStable(out, func(a, b int) bool {
		sa, _ := out[a].Start()
		sb, _ := out[b].Start()
		return sa < sb
	})
	return out, nil
}

// objFunc makes an object of the fault being written.
type objFunc func(kind, suffix string, spec map[string]any) Object

func generate(i int, f schedule.Fault, opt Options, rng *rand.Rand) ([]Object, error) {
	obj := func(kind, suffix string, spec map[string]any) Object {
		return Object{APIVersion: APIVersion, Kind: kind, Spec: spec, Metadata: Metadata{
			Name: fmt.Sprintf("%s-%d-%s", opt.Name, i, suffix), Namespace: opt.Namespace,
			Annotations: map[string]string{"indoubt.io/fault": f.Spec, "indoubt.io/start": f.Start.String()},
		}}
	}
	pods := func(nodes ...string) map[string]any {
		var ps []string
		for _, n := range nodes {
			ps = append(ps, opt.Pods[n])
		}
		sort.Strings(ps)
		return map[string]any{"pods": map[string]any{opt.Namespace: ps}}
	}
	duration := func() (string, error) {
		if !f.Bounded {
			return "", errors.New("Chaos Mesh needs a window with an end (a duration)")
		}
		return (f.End - f.Start).String(), nil
	}
	if opt.Topology != "" {
		if out, handled, err := leaderFault(f, opt, obj, pods, duration); handled {
			return out, err
		}
	} else if f.Shape == DCSShape {
		return nil, fmt.Errorf("partition:dcs cuts Patroni nodes from their DCS: --topology %s", TopologyPatroni)
	}
	switch {
	case f.Shape != "":
		d, err := duration()
		if err != nil {
			return nil, err
		}
		g, err := netns.MakeGrudge(f.Shape, f.Target, opt.Nodes, opt.Primary, rng)
		if err != nil {
			return nil, err
		}
		var out []Object
		for _, a := range opt.Nodes {
			if len(g[a]) == 0 {
				continue
			}
			out = append(out, obj("NetworkChaos", "partition-"+a, map[string]any{
				"action": "partition", "mode": "all", "selector": pods(a),
				// a drops what it receives from them: the packets from the target.
				"direction": "from",
				"target":    map[string]any{"mode": "all", "selector": pods(g[a]...)},
				"duration":  d,
			}))
		}
		return out, nil
	case f.Link != "":
		d, err := duration()
		if err != nil {
			return nil, err
		}
		spec := map[string]any{"mode": "all", "selector": pods(opt.Standby), "direction": "to",
			"target": map[string]any{"mode": "all", "selector": pods(opt.Primary)}, "duration": d}
		switch f.Toxic.Type {
		case "latency":
			delay := map[string]any{"latency": fmt.Sprintf("%dms", f.Toxic.Attributes["latency"])}
			if j := f.Toxic.Attributes["jitter"]; j > 0 {
				delay["jitter"] = fmt.Sprintf("%dms", j)
			}
			spec["action"], spec["delay"] = "delay", delay
		case "bandwidth":
			// toxiproxy's rate is KB/s; Chaos Mesh's bps means bytes per second.
			spec["action"] = "bandwidth"
			spec["bandwidth"] = map[string]any{"rate": strconv.FormatInt(f.Toxic.Attributes["rate"]*1024, 10) + "bps", "limit": 20971520, "buffer": 10000}
		default:
			return nil, fmt.Errorf("toxic %s has no Chaos Mesh equivalent on a link (latency and bandwidth do)", f.Toxic.Type)
		}
		return []Object{obj("NetworkChaos", "link", spec)}, nil
	case f.Name == "kill" || f.Name == "failover":
		// The pod's controller starts it again; its volume keeps the data.
		return []Object{obj("PodChaos", f.Name, map[string]any{"action": "pod-kill", "mode": "all", "selector": pods(opt.Primary), "gracePeriod": 0})}, nil
	case f.Name == "pause":
		d, err := duration()
		if err != nil {
			return nil, err
		}
		return []Object{obj("PodChaos", "pause", map[string]any{"action": "pod-failure", "mode": "all", "selector": pods(opt.Primary), "duration": d})}, nil
	case f.Process:
		return nil, fmt.Errorf("%s has no Chaos Mesh equivalent that keeps the pod's data and address", f.Name)
	}
	return nil, errors.New("a fault of indoubt's proxy: it stays in front of the clients, not in the cluster")
}

// YAML writes the objects as one multi-document YAML stream, as kubectl apply -f takes.
func YAML(objs []Object) ([]byte, error) {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("chaos mesh: %w", err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return []byte(b.String()), nil
}
