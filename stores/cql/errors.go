package cql

import (
	"errors"
	"strings"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/workloads"
)

// Classify wraps err under the contract of package workloads, for a statement that could
// change data (an LWT, an UPDATE, a batch). The adapter's reads use classifyRead instead:
// the failure of a read changes nothing, so every error of a read is definite.
//
// For writes:
//   - unknown: a write timeout (any write type, CAS included: the Paxos proposal may have
//     been accepted and a later round will complete it), a write failure, CAS_WRITE_UNKNOWN,
//     a read timeout or read failure inside an LWT (conservatively: Paxos v2 reads and
//     proposes in overlapping steps), a server error (code 0x0000, which says nothing of
//     how far the request got), the connection lost or the client timeout expired while
//     the request may have been sent, and any error this function does not recognise.
//   - definite: errors the coordinator raises before it executes anything: unavailable
//     (the replica count is checked before any mutation or Paxos message is sent),
//     overloaded, bootstrapping, syntax, invalid, unauthorized, configuration, already
//     exists, unprepared, protocol, function failure (functions are evaluated before the
//     mutation is built), CDC write failure (refused before the commit log write), and
//     gocql's errors for requests it never wrote (no connections, no free streams, session
//     closed, wrong number of values), and a context that had ended before the adapter
//     sent anything.
//
// A lost CAS race is not an error here (the statement answers applied=false); the budget
// loop counts it in Outcome.Conflicts.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	r := reason(err)
	if notExecuted[r] {
		return workloads.Definite(err, r)
	}
	return workloads.Unknown(err, r)
}

// classifyRead is Classify for a statement that changes nothing: every error is
// definite.
func classifyRead(err error) error {
	return workloads.Definite(err, reason(err))
}

// notExecuted holds the reasons of the errors raised before anything of a write was
// executed: by the coordinator before it acts, or by gocql or the adapter before the
// request was written.
var notExecuted = map[workloads.Reason]bool{
	"unavailable": true, "overloaded": true, "bootstrapping": true, "syntax": true,
	"invalid": true, "unauthorized": true, "config": true, "already-exists": true,
	"unprepared": true, "protocol": true, "function-failure": true,
	"cdc-write-failure": true, "credentials": true, "no-connections": true,
	"no-streams": true, "arguments": true,
	workloads.ReasonClientClosed: true, workloads.ReasonNotSent: true,
}

// reason names err for accounting: a CQL error's name, or what gocql or the network
// reported, in the vocabulary of package workloads where it has a word for it.
func reason(err error) workloads.Reason {
	var ns *notSentError
	if errors.As(err, &ns) {
		return workloads.ReasonNotSent
	}
	if r := typedReason(err); r != "" {
		return r
	}
	// gocql decodes most error codes into typed values, which are matched by type (their
	// code is in an unexported field); the rest by code.
	var re gocql.RequestError
	if errors.As(err, &re) {
		return codeReason(re.Code())
	}
	if r := clientReason(err); r != "" {
		return r
	}
	var pe gocql.ErrProtocol
	if errors.As(err, &pe) {
		// gocql could not make sense of the answer: the request was sent.
		return workloads.ReasonBadReply
	}
	return workloads.ReasonConnLost
}

// typedReason names the server errors gocql decodes into typed values, or returns "".
func typedReason(err error) workloads.Reason {
	var (
		wt *gocql.RequestErrWriteTimeout
		wf *gocql.RequestErrWriteFailure
		rt *gocql.RequestErrReadTimeout
		rf *gocql.RequestErrReadFailure
		un *gocql.RequestErrUnavailable
		cu *gocql.RequestErrCASWriteUnknown
		ff *gocql.RequestErrFunctionFailure
		cd *gocql.RequestErrCDCWriteFailure
		ae *gocql.RequestErrAlreadyExists
		up *gocql.RequestErrUnprepared
	)
	switch {
	case errors.As(err, &wt):
		if wt.WriteType != "" {
			return workloads.Reason("write-timeout-" + strings.ToLower(wt.WriteType))
		}
		return "write-timeout"
	case errors.As(err, &wf):
		return "write-failure"
	case errors.As(err, &rt):
		return "read-timeout"
	case errors.As(err, &rf):
		return "read-failure"
	case errors.As(err, &un):
		return "unavailable"
	case errors.As(err, &cu):
		return workloads.ReasonServerUnknown
	case errors.As(err, &ff):
		return "function-failure"
	case errors.As(err, &cd):
		return "cdc-write-failure"
	case errors.As(err, &ae):
		return "already-exists"
	case errors.As(err, &up):
		return "unprepared"
	}
	return ""
}

// codeNames names the CQL error codes by the protocol's names for them.
var codeNames = map[int]workloads.Reason{
	gocql.ErrCodeServer:          "server-error",
	gocql.ErrCodeProtocol:        "protocol",
	gocql.ErrCodeCredentials:     "credentials",
	gocql.ErrCodeUnavailable:     "unavailable",
	gocql.ErrCodeOverloaded:      "overloaded",
	gocql.ErrCodeBootstrapping:   "bootstrapping",
	gocql.ErrCodeTruncate:        "truncate",
	gocql.ErrCodeWriteTimeout:    "write-timeout",
	gocql.ErrCodeReadTimeout:     "read-timeout",
	gocql.ErrCodeReadFailure:     "read-failure",
	gocql.ErrCodeFunctionFailure: "function-failure",
	gocql.ErrCodeWriteFailure:    "write-failure",
	gocql.ErrCodeCDCWriteFailure: "cdc-write-failure",
	gocql.ErrCodeCASWriteUnknown: workloads.ReasonServerUnknown,
	gocql.ErrCodeSyntax:          "syntax",
	gocql.ErrCodeUnauthorized:    "unauthorized",
	gocql.ErrCodeInvalid:         "invalid",
	gocql.ErrCodeConfig:          "config",
	gocql.ErrCodeAlreadyExists:   "already-exists",
	gocql.ErrCodeUnprepared:      "unprepared",
}

// codeReason names a CQL error by its code.
func codeReason(code int) workloads.Reason {
	if r, ok := codeNames[code]; ok {
		return r
	}
	return "cql-error"
}

// clientReason names the errors gocql and the network raise on the client's side, or
// returns "".
func clientReason(err error) workloads.Reason {
	switch {
	case errors.Is(err, gocql.ErrNoConnections):
		return "no-connections"
	case errors.Is(err, gocql.ErrNoStreams):
		return "no-streams"
	case errors.Is(err, gocql.ErrSessionClosed):
		return workloads.ReasonClientClosed
	case errors.Is(err, gocql.ErrQueryArgLength):
		return "arguments"
	case errors.Is(err, gocql.ErrConnectionClosed):
		// gocql returns it both for a connection found closed before the write and for
		// one lost while waiting for the answer; the two cannot be told apart.
		return workloads.ReasonConnClosed
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		return workloads.ReasonTimeout
	}
	return workloads.NetReason(err)
}

// notSentError is an error the adapter raised before handing a request to gocql, such as
// a context that had already ended.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }
