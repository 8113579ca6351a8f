package chaosmesh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/schedule"
)

// crdSchema compiles the openAPIV3Schema of a CRD in testdata, made strict: an object
// with properties takes no other (Kubernetes would prune an unknown field silently,
// which would hide a misspelt one).
func crdSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("%s: versions %+v", file, crd.Spec.Versions)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	strict(s)
	// Through JSON, so that the compiler sees JSON's types.
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile(file)
	if err != nil {
		t.Fatal(err)
	}
	return compiled
}

func strict(s map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		if _, has := s["additionalProperties"]; !has {
			s["additionalProperties"] = false
		}
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				strict(m)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if m, ok := s[k].(map[string]any); ok {
			strict(m)
		}
	}
}

func validate(t *testing.T, s *jsonschema.Schema, o Object) error {
	t.Helper()
	j, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v)
}

var opt = Options{
	Namespace: "db", Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Seed: 7,
	Pods: map[string]string{"n1": "redis-0", "n2": "redis-1", "n3": "redis-2", "n4": "sentinel-3", "n5": "sentinel-4"},
}

func parse(t *testing.T, specs ...string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every object made from a schedule of every kind that has an equivalent validates
// against Chaos Mesh's published CRDs; a misspelt action or an unknown field does not.
func TestObjectsMatchTheCRDs(t *testing.T) {
	schemas := map[string]*jsonschema.Schema{
		"NetworkChaos": crdSchema(t, "networkchaos.crd.yaml"),
		"PodChaos":     crdSchema(t, "podchaos.crd.yaml"),
	}
	objs, err := Generate(parse(t, "partition:majority@1s-5s", "latency:200ms~20ms,link=replication@6s-8s",
		"bandwidth:100,link=replication@9s-10s", "kill@11s-12s", "pause@13s-14s", "failover@15s", "partition:one-way@16s-17s"), opt)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.Kind]++
		if err := validate(t, schemas[o.Kind], o); err != nil {
			t.Errorf("%s %s does not match the CRD: %v", o.Kind, o.Metadata.Name, err)
		}
	}
	// majority: 5 nodes with a grudge each; one-way: the 4 that drop the primary's.
	if kinds["NetworkChaos"] != 5+2+4 || kinds["PodChaos"] != 3 {
		t.Errorf("kinds %v", kinds)
	}
	bad := objs[0]
	bad.Spec = map[string]any{}
	for k, v := range objs[0].Spec {
		bad.Spec[k] = v
	}
	bad.Spec["action"] = "sever"
	if validate(t, schemas["NetworkChaos"], bad) == nil {
		t.Error("a NetworkChaos with action sever matches the CRD")
	}
	delete(bad.Spec, "action")
	bad.Spec["actoin"] = "partition"
	if validate(t, schemas["NetworkChaos"], bad) == nil {
		t.Error("a NetworkChaos with a misspelt field matches the CRD")
	}
	y, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(y), "---\n"); n != len(objs) {
		t.Errorf("%d documents for %d objects", n, len(objs))
	}
}

// The partition's objects are the grudge a run on one machine draws from the same
// seed: each node's pods drop what the pods of the nodes it has a grudge against send.
func TestPartitionIsTheSameGrudge(t *testing.T) {
	objs, err := Generate(parse(t, "partition:halves@1s-3s"), opt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := netns.MakeGrudge("halves", "", opt.Nodes, "n1", netns.ShapeRand(opt.Seed))
	if err != nil {
		t.Fatal(err)
	}
	got := netns.Grudge{}
	byPod := map[string]string{}
	for n, p := range opt.Pods {
		byPod[p] = n
	}
	for _, o := range objs {
		if o.Spec["action"] != "partition" || o.Spec["direction"] != "from" || o.Spec["duration"] != "2s" {
			t.Errorf("object %+v", o.Spec)
		}
		self := o.Spec["selector"].(map[string]any)["pods"].(map[string]any)["db"].([]string)
		target := o.Spec["target"].(map[string]any)["selector"].(map[string]any)["pods"].(map[string]any)["db"].([]string)
		for _, p := range target {
			got[byPod[self[0]]] = append(got[byPod[self[0]]], byPod[p])
		}
	}
	for n := range got {
		sort.Strings(got[n])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("objects say %v, the run draws %v", got, want)
	}
}

func TestRefusals(t *testing.T) {
	for spec, want := range map[string]string{
		"commit-cut":                           "indoubt's proxy",
		"power-loss@1s":                        "no Chaos Mesh equivalent",
		"reset_peer:0s,link=replication@1s-2s": "reset_peer has no Chaos Mesh equivalent",
		"kill@1s":                              "", // kill@T has its downtime: fine
	} {
		_, err := Generate(parse(t, spec), opt)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), spec) {
			t.Errorf("%s: error %v, want one naming the entry and %q", spec, err, want)
		}
	}
	if _, err := Generate(nil, Options{Namespace: "db", Nodes: []string{"n1"}}); err == nil {
		t.Error("a node without a pod: no error")
	}
	// More nodes than MaxNodes: a partition's objects would grow with their square.
	many := Options{Namespace: "db", Name: "x", Pods: map[string]string{}}
	for i := range MaxNodes + 1 {
		n := fmt.Sprintf("n%d", i)
		many.Nodes = append(many.Nodes, n)
		many.Pods[n] = "pod-" + n
	}
	if _, err := Generate(parse(t, "partition:majority@1s-2s"), many); err == nil || !strings.Contains(err.Error(), "at most 128") {
		t.Errorf("%d nodes: error %v, want at most %d", len(many.Nodes), err, MaxNodes)
	}
	many.Nodes = many.Nodes[:MaxNodes]
	if _, err := Generate(parse(t, "partition:majority@1s-2s"), many); err != nil {
		t.Errorf("%d nodes: %v", MaxNodes, err)
	}
}
