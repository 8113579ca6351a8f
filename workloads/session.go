package workloads

// Session is one worker's connection to a store. A worker issues one operation at a time
// on its session, so retries run on the same connection while it survives. When the
// connection breaks, the session dials a new one on its next call. Sessions are not safe
// for concurrent use.
type Session interface {
	// Conn returns the local address ("127.0.0.1:51514") of the connection the last
	// call used or is about to use, or "" when none is open. The proxy sees the same
	// address as its client, which joins fault events to operations.
	Conn() string
	// Close closes the session's connection.
	Close() error
}

// Request carries what every operation carries down to the store.
type Request struct {
	// OpID identifies the logical operation across its retries.
	OpID string
	// Idempotent asks the store to record OpID in the same atomic step as the effect,
	// and to report the original outcome when it finds OpID already recorded.
	Idempotent bool
}
