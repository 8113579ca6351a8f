package faults

// CommitPoints returns how many commit points the proxy has counted so far (the
// number of the last, toxics.Event.Point), 0 without a protocol. A fault listed at a
// number up to it can no longer fire: read before a workload starts, it says where the
// numbers of the workload's own points begin, after its setup's.
func (p *Proxy) CommitPoints() uint64 {
	if p.commits == nil {
		return 0
	}
	return p.commits.Points()
}
