package results

// TwoPhase is the two_phase_commit section of a transfer or two-rows run: its servers
// and coordinator, its transactions, and what a coordinator crash left in doubt and how
// recovery finished it. It explains the verdict beside it; the checker decides from the
// history alone.
type TwoPhase struct {
	Servers     int    `json:"servers"`
	Placement   string `json:"placement"`
	Coordinator string `json:"coordinator"`
	// Transactions counts the transactions (transfers, or reads of two rows; the reads
	// of the total are left out) by what the client was told; CommittedPerSecond is
	// the committed ones per second of the run, and LatencyMs their latency.
	Transactions       TxCounts  `json:"transactions"`
	CommittedPerSecond float64   `json:"committed_per_second"`
	LatencyMs          TxLatency `json:"latency_ms"`
	// Crash is what a coordinator crash left; nil without one.
	Crash *Crash `json:"crash,omitempty"`
	// Recovery is what the end-of-run recovery resolved (after a crash: the crash's).
	Recovery []Resolution `json:"recovery"`
}

// TxCounts counts transactions by outcome: committed (ok), aborted (fail: certainly
// not applied) and abandoned (info: the coordinator crashed mid-protocol, or a lost
// COMMIT; recovery decided).
type TxCounts struct {
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	Abandoned int64 `json:"abandoned"`
}

// TxLatency is the mean and 99th percentile latency of the committed transactions, in
// milliseconds.
type TxLatency struct {
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
}

// Crash is what a coordinator crash left in doubt and how it was repaired.
type Crash struct {
	// AtS is when the coordinator crashed, seconds from the start of the run.
	AtS float64 `json:"at_s"`
	// Stops counts the transactions abandoned at each protocol point (before-prepare,
	// mid-prepare, before-decision, after-decision).
	Stops   map[string]int64 `json:"stops"`
	InDoubt []InDoubt        `json:"in_doubt"`
	Probes  []LockProbe      `json:"lock_probes"`
	// RecoveryMs is how long recovery took; ResolvedMs is from the crash until every
	// in-doubt transaction was finished.
	RecoveryMs float64 `json:"recovery_ms"`
	ResolvedMs float64 `json:"resolved_ms"`
}

// InDoubt is one transaction prepared on one server and not finished when listed.
type InDoubt struct {
	GID    string  `json:"gid"`
	Server int     `json:"server"`
	AgeMs  float64 `json:"age_ms"`
	// Locks counts the locks it held in pg_locks (its row locks live in the rows and
	// show as blocked writers).
	Locks int `json:"locks"`
}

// LockProbe is one writer that tried a row an in-doubt transaction held: how long it
// was blocked (BlockedMs, over Timeouts short lock_timeouts) and how long the row was
// locked, from its PREPARE TRANSACTION to the probe's success.
type LockProbe struct {
	GID         string  `json:"gid"`
	Server      int     `json:"server"`
	Row         int     `json:"row"`
	BlockedMs   float64 `json:"blocked_ms"`
	Timeouts    int     `json:"timeouts"`
	LockedForMs float64 `json:"locked_for_ms"`
	Error       string  `json:"error,omitempty"`
}

// Resolution is what recovery did to one in-doubt transaction on one server: commit or
// abort, Logged when the decision came from the coordinator's log (false: presumed
// abort, or the naive coordinator's commit of whatever it found).
type Resolution struct {
	GID      string `json:"gid"`
	Server   int    `json:"server"`
	Decision string `json:"decision"`
	Logged   bool   `json:"logged"`
	Error    string `json:"error,omitempty"`
}
