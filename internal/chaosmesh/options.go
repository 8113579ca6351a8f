package chaosmesh

import (
	"fmt"
	"slices"
)

// MaxNodes is the most nodes (pods) a schedule is written for: a partition's objects
// name, for each node, the nodes it is cut from, and 3000 pods made 134 MB of YAML.
const MaxNodes = 128

// checkOptions refuses options Generate cannot write objects for that do what they say:
// a node listed twice, a pod that two nodes share (a partition between them would
// separate a pod from itself), and a primary or standby that is not one of the nodes
// (its objects would select pod "").
func checkOptions(opt Options) error {
	if err := checkNames(opt); err != nil {
		return err
	}
	if len(opt.Nodes) > MaxNodes {
		return fmt.Errorf("chaos mesh: %d nodes, at most %d: a partition writes an object per node naming the others, so the objects grow with the square of the nodes", len(opt.Nodes), MaxNodes)
	}
	seen := map[string]string{}
	for i, n := range opt.Nodes {
		if slices.Contains(opt.Nodes[:i], n) {
			return fmt.Errorf("chaos mesh: node %s is given twice", n)
		}
		p := opt.Pods[n]
		if other, ok := seen[p]; ok {
			return fmt.Errorf("chaos mesh: pod %s is named for nodes %s and %s: each node is a pod of its own", p, other, n)
		}
		seen[p] = n
	}
	for _, role := range []struct{ name, node string }{{"primary", opt.Primary}, {"standby", opt.Standby}} {
		if role.node != "" && !slices.Contains(opt.Nodes, role.node) {
			return fmt.Errorf("chaos mesh: the %s %q is not one of the nodes (%v)", role.name, role.node, opt.Nodes)
		}
	}
	return nil
}
