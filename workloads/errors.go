package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// The error contract. A store's operation returns nil, or an error of one of three
// classes, which the workloads and the retry loop branch on and every adapter follows:
// the adapter wraps an error with ErrUnknown when the operation may or may not have
// applied (the connection was lost after the request may have been sent, a timeout, the
// server says so itself), with ErrConflict when it certainly did not apply and a retry is
// reasonable (a serialization failure, a lost compare-and-set, a write conflict). Any
// other error is a definite failure. When in doubt, unknown.
//
// Each wrapped error also carries a Reason from one vocabulary shared by every store, so
// that the same fault is counted under the same name whichever store met it.
var (
	// ErrUnknown marks an error after which the operation may or may not have applied.
	ErrUnknown = errors.New("outcome unknown")
	// ErrConflict marks an error after which the operation certainly did not apply and
	// a retry is reasonable.
	ErrConflict = errors.New("conflict")
)

// Reason names the cause of an error for accounting (results.json counts retries and
// failures by it). The constants below are the vocabulary shared by every store; a
// store names an error its server defines and the contract has no word for with
// ServerCode.
type Reason string

// Reasons for a request that was never sent, or a connection that never opened: the
// failure is definite.
const (
	// ReasonDial: no connection could be opened (refused, unreachable, handshake failed).
	ReasonDial Reason = "dial"
	// ReasonNotSent: the operation's context had ended before anything was sent.
	ReasonNotSent Reason = "not-sent"
	// ReasonClientClosed: the client or session was closed by its owner.
	ReasonClientClosed Reason = "client-closed"
)

// Reasons for a connection lost or a wait that ended while the request may have been
// sent: the outcome is unknown unless the driver knows nothing went out.
const (
	// ReasonConnClosed: the peer closed the connection (EOF, a closed socket).
	ReasonConnClosed Reason = "conn-closed"
	// ReasonConnReset: the peer reset the connection.
	ReasonConnReset Reason = "conn-reset"
	// ReasonBrokenPipe: a write found the connection closed by the peer.
	ReasonBrokenPipe Reason = "broken-pipe"
	// ReasonConnLost: the connection broke and the driver does not say how.
	ReasonConnLost Reason = "conn-lost"
	// ReasonTimeout: a deadline expired while waiting for the answer.
	ReasonTimeout Reason = "timeout"
	// ReasonCanceled: the operation's context was canceled while waiting for the answer.
	ReasonCanceled Reason = "canceled"
	// ReasonBadReply: an answer arrived that the adapter could not make sense of.
	ReasonBadReply Reason = "bad-reply"
)

// Reasons the server gives in its own words.
const (
	// ReasonServerUnknown: the server itself says the outcome of the commit is unknown
	// (PostgreSQL's and CockroachDB's SQLSTATE 40003 statement_completion_unknown,
	// Cassandra's CAS_WRITE_UNKNOWN). Unlike a lost connection, it is evidence that the
	// commit reached the server and may have applied.
	ReasonServerUnknown Reason = "server-unknown"
	// ReasonSerialization: a serialization failure (SQLSTATE 40001).
	ReasonSerialization Reason = "serialization-failure"
	// ReasonDeadlock: the server broke a deadlock by aborting this transaction (SQLSTATE
	// 40P01).
	ReasonDeadlock Reason = "deadlock"
	// ReasonWriteConflict: a write-write conflict with a concurrent transaction
	// (MongoDB's WriteConflict).
	ReasonWriteConflict Reason = "write-conflict"
	// ReasonCASConflict: a compare-and-set round lost to a concurrent writer.
	ReasonCASConflict Reason = "cas-conflict"
)

// Reasons for an attempt that found its own operation's effect already in place.
const (
	// ReasonAlreadyApplied: the attempt was refused because the effect it carries is
	// already there and the store can tell it is this very operation's (a retried insert
	// whose primary key, chosen by the client before the first attempt, now holds a row
	// tagged with the same op id: the unique violation proves an earlier attempt
	// committed). The store returns it as a definite error; the workload reports the
	// operation as applied.
	ReasonAlreadyApplied Reason = "already-applied"
)

// Reasons a store attaches to nothing more specific, from the class alone.
const (
	ReasonUnknown  Reason = "unknown"  // an unknown outcome with no reason given
	ReasonConflict Reason = "conflict" // a conflict with no reason given
	ReasonError    Reason = "error"    // a definite failure with no reason given
)

// ServerCode is the reason for an error the server names by a code of its own that the
// shared vocabulary has no word for: an SQLSTATE ("23505"), a Redis error prefix
// ("WRONGTYPE"), a MongoDB code name ("DuplicateKey"), a CQL error ("syntax").
func ServerCode(code string) Reason {
	if code == "" {
		return "server-error"
	}
	return Reason(code)
}

// NetReason names an error of Go's network stack or of a context in the shared
// vocabulary (timeout, canceled, conn-closed, conn-reset, broken-pipe), or returns ""
// when err is none of them. Adapters call it so that one fault gets one name in every
// store; the class stays the adapter's to decide.
func NetReason(err error) Reason {
	switch {
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ReasonConnClosed
	case errors.Is(err, syscall.ECONNRESET):
		return ReasonConnReset
	case errors.Is(err, syscall.EPIPE):
		return ReasonBrokenPipe
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classified is an error wrapped with one of the sentinels, keeping the cause's text
// and chain, and its reason.
type classified struct {
	class  error
	reason Reason
	err    error
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() []error {
	if e.class == nil {
		return []error{e.err}
	}
	return []error{e.class, e.err}
}

// Unknown wraps err as ErrUnknown with reason (may be empty). A nil err becomes
// ErrUnknown itself.
func Unknown(err error, reason Reason) error {
	if err == nil {
		err = ErrUnknown
	}
	return &classified{class: ErrUnknown, reason: reason, err: err}
}

// Conflict wraps err as ErrConflict with reason (may be empty). A nil err becomes
// ErrConflict itself.
func Conflict(err error, reason Reason) error {
	if err == nil {
		err = ErrConflict
	}
	return &classified{class: ErrConflict, reason: reason, err: err}
}

// Definite wraps err as a definite failure with reason, for accounting only. It returns
// nil for nil.
func Definite(err error, reason Reason) error {
	if err == nil {
		return nil
	}
	return &classified{class: nil, reason: reason, err: err}
}

// Class is how an error bears on an operation's outcome.
type Class uint8

const (
	ClassNone     Class = iota // no error
	ClassDefinite              // certainly not applied
	ClassConflict              // certainly not applied, retry is reasonable
	ClassUnknown               // may or may not have applied
)

// String returns the class's name: none, definite, conflict or unknown.
func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassDefinite:
		return "definite"
	case ClassConflict:
		return "conflict"
	case ClassUnknown:
		return "unknown"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Classify returns the class of err under the contract.
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrUnknown):
		return ClassUnknown
	case errors.Is(err, ErrConflict):
		return ClassConflict
	}
	return ClassDefinite
}

// ReasonOf returns the reason an adapter attached to err, or a generic one from its
// class (ReasonUnknown, ReasonConflict, ReasonError), or "" for nil.
func ReasonOf(err error) Reason {
	var c *classified
	if errors.As(err, &c) && c.reason != "" {
		return c.reason
	}
	switch Classify(err) {
	case ClassUnknown:
		return ReasonUnknown
	case ClassConflict:
		return ReasonConflict
	case ClassDefinite:
		return ReasonError
	}
	return ""
}
