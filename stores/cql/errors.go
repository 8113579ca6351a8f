package cql

import (
	"context"
	"errors"
	"strings"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/stores"
)

// Classify wraps err under the contract of package stores. write says whether the
// statement could change data (an LWT, an UPDATE, a batch); the failure of a read changes
// nothing, so every error of a read is definite.
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
func Classify(err error, write bool) error {
	if err == nil {
		return nil
	}
	if !write {
		return stores.Definite(err, reason(err))
	}
	switch r := reason(err); r {
	case "unavailable", "overloaded", "bootstrapping", "syntax", "invalid", "unauthorized",
		"config", "already-exists", "unprepared", "protocol", "function-failure",
		"cdc-write-failure", "credentials", "no-connections", "no-streams", "session-closed",
		"arguments", "not-sent":
		return stores.Definite(err, r)
	default:
		return stores.Unknown(err, r)
	}
}

// reason names err for accounting: a CQL error's name, or what gocql reported. gocql
// decodes most error codes into typed values, which are matched by type (their code is
// in an unexported field); the rest by code.
func reason(err error) string {
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
			return "write-timeout-" + strings.ToLower(wt.WriteType)
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
		return "cas-write-unknown"
	case errors.As(err, &ff):
		return "function-failure"
	case errors.As(err, &cd):
		return "cdc-write-failure"
	case errors.As(err, &ae):
		return "already-exists"
	case errors.As(err, &up):
		return "unprepared"
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeServer:
			return "server-error"
		case gocql.ErrCodeProtocol:
			return "protocol"
		case gocql.ErrCodeCredentials:
			return "credentials"
		case gocql.ErrCodeUnavailable:
			return "unavailable"
		case gocql.ErrCodeOverloaded:
			return "overloaded"
		case gocql.ErrCodeBootstrapping:
			return "bootstrapping"
		case gocql.ErrCodeTruncate:
			return "truncate"
		case gocql.ErrCodeWriteTimeout:
			return "write-timeout"
		case gocql.ErrCodeReadTimeout:
			return "read-timeout"
		case gocql.ErrCodeReadFailure:
			return "read-failure"
		case gocql.ErrCodeFunctionFailure:
			return "function-failure"
		case gocql.ErrCodeWriteFailure:
			return "write-failure"
		case gocql.ErrCodeCDCWriteFailure:
			return "cdc-write-failure"
		case gocql.ErrCodeCASWriteUnknown:
			return "cas-write-unknown"
		case gocql.ErrCodeSyntax:
			return "syntax"
		case gocql.ErrCodeUnauthorized:
			return "unauthorized"
		case gocql.ErrCodeInvalid:
			return "invalid"
		case gocql.ErrCodeConfig:
			return "config"
		case gocql.ErrCodeAlreadyExists:
			return "already-exists"
		case gocql.ErrCodeUnprepared:
			return "unprepared"
		}
		return "cql-error"
	}
	switch {
	case errors.Is(err, gocql.ErrNoConnections):
		return "no-connections"
	case errors.Is(err, gocql.ErrNoStreams):
		return "no-streams"
	case errors.Is(err, gocql.ErrSessionClosed):
		return "session-closed"
	case errors.Is(err, gocql.ErrQueryArgLength):
		return "arguments"
	case errors.Is(err, gocql.ErrConnectionClosed):
		// gocql returns it both for a connection found closed before the write and for
		// one lost while waiting for the answer; the two cannot be told apart.
		return "conn-closed"
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		return "timeout"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var ns *notSentError
	if errors.As(err, &ns) {
		return "not-sent"
	}
	var pe gocql.ErrProtocol
	if errors.As(err, &pe) {
		// gocql could not make sense of the answer: the request was sent.
		return "bad-response"
	}
	return "conn-lost"
}

// notSentError is an error the adapter raised before handing a request to gocql, such as
// a context that had already ended.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }
