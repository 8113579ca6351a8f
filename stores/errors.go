// Package stores holds what every database adapter shares: the error contract and, in
// storetest, the conformance suite each adapter runs against its real server.
//
// The error contract: an adapter wraps an error with ErrUnknown when the outcome is
// unknown (the connection was lost after the request may have been sent, a timeout), with
// ErrConflict when the operation certainly did not apply and a retry is reasonable
// (SQLSTATE 40001, a CAS mismatch, WriteTooOld). Any other error is a definite failure.
// When in doubt, unknown.
package stores

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknown marks an error after which the operation may or may not have applied.
	ErrUnknown = errors.New("outcome unknown")
	// ErrConflict marks an error after which the operation certainly did not apply and
	// a retry is reasonable.
	ErrConflict = errors.New("conflict")
)

// classified is an error wrapped with one of the sentinels, keeping the cause's text
// and chain, and an optional reason (an SQLSTATE, a driver error name) for accounting.
type classified struct {
	class  error
	reason string
	err    error
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() []error {
	if e.class == nil {
		return []error{e.err}
	}
	return []error{e.class, e.err}
}

// Unknown wraps err as ErrUnknown with reason (may be empty).
func Unknown(err error, reason string) error {
	if err == nil {
		err = ErrUnknown
	}
	return &classified{class: ErrUnknown, reason: reason, err: err}
}

// Conflict wraps err as ErrConflict with reason (may be empty).
func Conflict(err error, reason string) error {
	if err == nil {
		err = ErrConflict
	}
	return &classified{class: ErrConflict, reason: reason, err: err}
}

// Definite wraps err as a definite failure with reason, for accounting only.
func Definite(err error, reason string) error {
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

// Reason returns the accounting reason an adapter attached to err (an SQLSTATE such as
// "40001", "conn-closed", "timeout"), or a generic one from the class.
func Reason(err error) string {
	var c *classified
	if errors.As(err, &c) && c.reason != "" {
		return c.reason
	}
	switch Classify(err) {
	case ClassUnknown:
		return "unknown"
	case ClassConflict:
		return "conflict"
	case ClassDefinite:
		return "error"
	}
	return ""
}
