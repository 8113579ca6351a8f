package chaosmesh

import (
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var patroni = Options{
	Namespace: "db", Nodes: []string{"n1", "n2", "n3"}, Seed: 3, Topology: TopologyPatroni,
	Pods:        map[string]string{"n1": "pg-0", "n2": "pg-1", "n3": "pg-2"},
	LeaderLabel: "role=master", ClusterLabel: "cluster-name=pg", DCSPods: []string{"etcd-1", "etcd-0", "etcd-2"},
}

func parseCM(t *testing.T, specs ...string) []Object {
	t.Helper()
	s, err := ParseSchedule(specs)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Generate(s, patroni)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// The faults a Patroni cluster's schedule aims at the leader select it by its label
// when the object is created, the others by the cluster's label without the leader's;
// partition:dcs cuts the nodes from the DCS pods both ways and nothing else; every
// object matches Chaos Mesh's CRDs.
func TestLeaderFaults(t *testing.T) {
	schemas := map[string]*jsonschema.Schema{"NetworkChaos": crdSchema(t, "networkchaos.crd.yaml"), "PodChaos": crdSchema(t, "podchaos.crd.yaml")}
	objs := parseCM(t, "partition:isolate-primary@1s-5s", "kill@6s-7s", "pause@8s-9s", "partition:one-way@10s-11s",
		"partition:dcs@12s-20s", "partition:dcs:n2@21s-22s", "partition:halves@23s-24s")
	leader := map[string]any{"namespaces": []string{"db"}, "labelSelectors": map[string]string{"cluster-name": "pg", "role": "master"}}
	others := map[string]any{"namespaces": []string{"db"}, "labelSelectors": map[string]string{"cluster-name": "pg"},
		"expressionSelectors": []map[string]any{{"key": "role", "operator": "NotIn", "values": []string{"master"}}}}
	target := func(o Object) any { return o.Spec["target"].(map[string]any)["selector"] }
	var names []string
	for _, o := range objs {
		names = append(names, strings.TrimPrefix(o.Metadata.Name, "indoubt-"))
		if err := validate(t, schemas[o.Kind], o); err != nil {
			t.Errorf("%s %s does not match the CRD: %v", o.Kind, o.Metadata.Name, err)
		}
		switch o.Metadata.Name {
		case "indoubt-0-partition-leader":
			if !reflect.DeepEqual(o.Spec["selector"], leader) || !reflect.DeepEqual(target(o), others) || o.Spec["direction"] != "from" {
				t.Errorf("the leader's side: %+v", o.Spec)
			}
		case "indoubt-0-partition-others", "indoubt-3-partition-others":
			if !reflect.DeepEqual(o.Spec["selector"], others) || !reflect.DeepEqual(target(o), leader) || o.Spec["direction"] != "from" {
				t.Errorf("the others' side: %+v", o.Spec)
			}
		case "indoubt-1-kill-leader", "indoubt-2-pause-leader":
			if !reflect.DeepEqual(o.Spec["selector"], leader) || o.Spec["mode"] != "one" {
				t.Errorf("%s: %+v", o.Metadata.Name, o.Spec)
			}
		case "indoubt-4-dcs":
			want := map[string]any{"pods": map[string]any{"db": []string{"etcd-0", "etcd-1", "etcd-2"}}}
			if !reflect.DeepEqual(o.Spec["selector"], map[string]any{"pods": map[string]any{"db": []string{"pg-0", "pg-1", "pg-2"}}}) ||
				!reflect.DeepEqual(target(o), want) || o.Spec["direction"] != "both" || o.Spec["duration"] != "8s" {
				t.Errorf("dcs: %+v", o.Spec)
			}
			if o.Metadata.Annotations["indoubt.io/fault"] != "partition:dcs@12s-20s" {
				t.Errorf("dcs annotated %v", o.Metadata.Annotations)
			}
		case "indoubt-5-dcs":
			if !reflect.DeepEqual(o.Spec["selector"], map[string]any{"pods": map[string]any{"db": []string{"pg-1"}}}) {
				t.Errorf("dcs:n2: %+v", o.Spec)
			}
		}
	}
	want := "0-partition-leader 0-partition-others 1-kill-leader 2-pause-leader 3-partition-others 4-dcs 5-dcs"
	if got := strings.Join(names, " "); !strings.HasPrefix(got, want+" 6-partition-") {
		t.Errorf("objects %s, want %s then the halves' by pod name", got, want)
	}
}

// What cannot be aimed as the fault means is refused, naming the entry and why.
func TestLeaderRefusals(t *testing.T) {
	noLabels := patroni
	noLabels.LeaderLabel, noLabels.ClusterLabel = "", ""
	etcd := noLabels
	etcd.Topology, etcd.DCSPods = TopologyEtcd, nil
	plain := Options{Namespace: "db", Nodes: patroni.Nodes, Pods: patroni.Pods}
	for _, tc := range []struct {
		spec string
		opt  Options
		want string
	}{
		{"kill@1s-2s", etcd, "--leader-label"},
		{"pause@1s-2s", noLabels, "--leader-label"},
		{"partition:isolate-primary@1s-2s", etcd, "picks its pods when it is created"},
		{"partition:majority@1s-2s", patroni, "isolate-primary is the same cut"},
		{"failover@1s", patroni, "fails over by itself"},
		{"latency:100ms,link=replication@1s-2s", patroni, "link"},
		{"partition:dcs@1s-2s", etcd, "--topology patroni"},
		{"partition:dcs@1s-2s", plain, "--topology patroni"},
		{"partition:dcs:n9@1s-2s", patroni, `"n9" is not one of the nodes`},
	} {
		s, err := ParseSchedule([]string{tc.spec})
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		_, err = Generate(s, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.spec) {
			t.Errorf("%s on %q: error %v, want one naming it and %q", tc.spec, tc.opt.Topology, err, tc.want)
		}
	}
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Topology = "zookeeper" }, `topology "zookeeper"`},
		{func(o *Options) { o.ClusterLabel = "" }, "go together"},
		{func(o *Options) { o.LeaderLabel = "role" }, "want KEY=VALUE"},
		{func(o *Options) { o.LeaderLabel = "cluster-name=x" }, "have one key"},
		{func(o *Options) { o.DCSPods = []string{"pg-1"} }, "DCS in pods of its own"},
		{func(o *Options) { o.Primary = "n1" }, "not named"},
		{func(o *Options) { o.Topology = "" }, "for a topology whose faults aim at the leader"},
	} {
		o := patroni
		tc.edit(&o)
		if _, err := Generate(nil, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options %+v: error %v, want %q", o, err, tc.want)
		}
	}
	for _, spec := range []string{"partition:dcs", "partition:dcs:n1@1s"} {
		if _, err := ParseSchedule([]string{spec}); err == nil || !strings.Contains(err.Error(), spec) {
			t.Errorf("%s: error %v, want one naming it", spec, err)
		}
	}
	if _, err := ParseSchedule([]string{"partition:dcs@1s-5s", "partition:halves@4s-6s"}); err == nil || !strings.Contains(err.Error(), "partition:dcs@1s-5s") {
		t.Errorf("overlapping partitions: %v", err)
	}
}
