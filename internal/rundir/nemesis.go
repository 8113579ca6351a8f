package rundir

// The values of the nemesis events the runner records for process and node faults, in
// the history (the event's value) and in faults.jsonl (ProcessFault.Value): one type per
// kind of step, so that no writer spells them as a map.

// ProcessStep is a step of a process fault on a launched server (kill, start, pause,
// continue), taken at the event's time.
type ProcessStep struct {
	// Fault is the schedule entry as written.
	Fault  string `json:"fault"`
	Server string `json:"server"`
	Pid    int    `json:"pid"`
	// Node is the node the step hit, in a topology whose faults aim at whichever
	// member leads when the fault fires (etcd, Patroni); empty elsewhere.
	Node string `json:"node,omitempty"`
	// Error is what the step met; empty when it succeeded.
	Error string `json:"error,omitempty"`
}

// PartitionStep is a partition between the nodes of a topology opened or healed.
type PartitionStep struct {
	Fault string `json:"fault"`
	Shape string `json:"shape"`
	// Primary is the node that was primary when the partition opened.
	Primary string `json:"primary,omitempty"`
	// Reach names, per node, the nodes it receives from; Components the groups of
	// nodes that reach one another (when the partition splits them).
	Reach      map[string][]string `json:"reach,omitempty"`
	Components [][]string          `json:"components,omitempty"`
	// Nodes and Clients are each node's address and its clients' address.
	Nodes   map[string]string `json:"nodes,omitempty"`
	Clients map[string]string `json:"clients,omitempty"`
	// Grudge is what each node drops: the nodes it does not receive from.
	Grudge map[string][]string `json:"grudge"`
	Error  string              `json:"error,omitempty"`
}

// LinkStep is a link toxic between two nodes added (start) or removed (stop).
type LinkStep struct {
	Fault   string    `json:"fault"`
	Link    string    `json:"link"`
	Between [2]string `json:"between"`
	Error   string    `json:"error,omitempty"`
}

// RoleReport is a node's role as it reported it (primary, standby), when it changed.
type RoleReport struct {
	Node string `json:"node"`
	Role string `json:"role"`
	// Reported is what the node answered, when it says more than the role.
	Reported string `json:"reported,omitempty"`
	// Signal says what the harness asked the node (results.Leaders's signal), when the
	// topology names it.
	Signal string `json:"signal,omitempty"`
}
