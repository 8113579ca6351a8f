package histories

import (
	"encoding/json"
	"fmt"
)

// Type is the kind of a history event. The zero value is invalid.
type Type uint8

const (
	Invoke Type = 1 + iota // invoke: the operation is about to be sent
	OK                     // ok: the operation took effect
	Fail                   // fail: the operation certainly did not take effect
	Info                   // info: the outcome is unknown
)

var typeNames = [...]string{Invoke: "invoke", OK: "ok", Fail: "fail", Info: "info"}

// String returns the name used in histories: invoke, ok, fail or info.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ParseType returns the Type named s.
func ParseType(s string) (Type, error) {
	if t, ok := typeNamed([]byte(s)); ok {
		return t, nil
	}
	return 0, fmt.Errorf("unknown event type %q", s)
}

// typeNamed returns the Type named b, for the decoders' fast paths: a switch on
// string(b) does not copy b.
func typeNamed(b []byte) (Type, bool) {
	switch string(b) {
	case "invoke":
		return Invoke, true
	case "ok":
		return OK, true
	case "fail":
		return Fail, true
	case "info":
		return Info, true
	}
	return 0, false
}

// MarshalText implements encoding.TextMarshaler.
func (t Type) MarshalText() ([]byte, error) {
	if t < Invoke || t > Info {
		return nil, fmt.Errorf("invalid event type %d", uint8(t))
	}
	return []byte(typeNames[t]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Nemesis is the process of events that are not operations of a worker: fault windows
// opened and closed by the schedule, and faults the proxy fired.
const Nemesis = -1

// Op is one event of a history. An operation is the pair of its invocation and its
// completion, which share Process and OpID.
type Op struct {
	// Index is the event's position in the history, from 0.
	Index int64 `json:"index"`
	// Time is monotonic nanoseconds since the run started.
	Time int64 `json:"time"`
	// Process is the logical process; Nemesis for fault events. A process whose
	// operation ended in info never invokes again.
	Process int `json:"process"`
	// Type is invoke, or the completion: ok, fail or info.
	Type Type `json:"type"`
	// F is the function: decrement, read, write, cas, increment, ...
	F string `json:"f"`
	// Key partitions independent objects (register workload); empty for one object.
	Key string `json:"key,omitempty"`
	// Value is the workload-specific argument (on invoke) or result (on completion),
	// as JSON: for each model and function, see "Values" in the package
	// documentation. Empty means no value, which for an ok read of a register means
	// no information; JSON null is a value (the register is absent).
	Value json.RawMessage `json:"value,omitempty"`
	// OpID identifies the logical operation across its retries.
	OpID string `json:"op_id,omitempty"`
	// Conn is the client's local address of the connection the attempt used.
	Conn string `json:"conn,omitempty"`
	// Error is the error text of a fail or info completion.
	Error string `json:"error,omitempty"`
	// Attempt counts the attempts the completion took (1 = no retry).
	Attempt int `json:"attempt,omitempty"`
	// Failed lists, on a completion, the operation's attempts that ended in an error,
	// in order (the last one too, when the operation failed or ended unknown): which
	// connection each used, when, and what error the client saw. It is how the
	// proxy's fault events join the attempt they cut from the history alone.
	Failed []FailedAttempt `json:"failed_attempts,omitempty"`
	// Ended says, on a completion that is not ok, why the recorder stopped trying, when
	// it says: EndedNoEffect, EndedNotRetryable, EndedExhausted, EndedDeadline or
	// EndedInterrupted. Empty: a reader takes an operation of one attempt as not
	// retryable, of more as exhausted.
	Ended string `json:"ended,omitempty"`
	// Conflicts counts, on a completion, the rounds the store's own mechanism lost to
	// contention and tried again inside the operation (a compare-and-set that found
	// another value): they are not attempts of the operation.
	Conflicts int `json:"conflicts,omitempty"`
}

// Why a recorder stopped trying an operation (Op.Ended).
const (
	// EndedNoEffect: the last attempt was answered, and the answer was that the
	// operation did nothing by the workload's own rule (a decrement of an exhausted
	// budget, a compare-and-set whose value did not match). Its last attempt is not
	// among Failed.
	EndedNoEffect = "no-effect"
	// EndedNotRetryable: the last attempt's error is one the retry policy does not retry.
	EndedNotRetryable = "not-retryable"
	// EndedExhausted: the retry policy's attempts ran out.
	EndedExhausted = "exhausted"
	// EndedDeadline: the run's end came before the next attempt could.
	EndedDeadline = "deadline"
	// EndedInterrupted: the run was interrupted before the next attempt.
	EndedInterrupted = "interrupted"
)

// FailedAttempt is one attempt of an operation that ended in an error.
type FailedAttempt struct {
	// Conn is the client's local address of the connection the attempt used.
	Conn string `json:"conn,omitempty"`
	// Start and End are the attempt's times, on the history's clock.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Error is the error the client saw.
	Error string `json:"error"`
	// Class is how the client judged the error by the error contract: unknown (the
	// request may have applied), definite (it did not) or conflict (it did not, and a
	// retry is reasonable); empty when the recorder did not say.
	Class string `json:"class,omitempty"`
	// Reason is the error's reason in the error contract's vocabulary, finer than its
	// class (workloads.Reason: dial, timeout, conflict, broken-pipe, ...); empty when
	// the recorder did not say.
	Reason string `json:"reason,omitempty"`
}

// IsClient reports whether the event belongs to a worker rather than the nemesis.
func (o Op) IsClient() bool { return o.Process >= 0 }

// Header is the first line of an indoubt history. It lets `indoubt check` choose the
// checker without flags.
type Header struct {
	// Format is "indoubt-history/1".
	Format string `json:"format"`
	// Workload is the workload run: budget, counter, register.
	Workload string `json:"workload"`
	// Model is the checker's model: budget, counter, register, cas-register,
	// exactly-once or bank.
	Model string `json:"model"`
	// Store is the store the history was recorded against (postgres, redis, ...).
	Store string `json:"store,omitempty"`
	// Seed is the run's seed: the same seed gives the same fault decisions.
	Seed int64 `json:"seed"`
	// Params holds the workload's parameters the checker needs, as JSON: "budget"
	// (budget model: the initial balance, an integer), "before" (counter: the value
	// before the run, an integer), "initial" (register models: every register's initial
	// value, an integer, or null or absent for a register that starts absent),
	// "accounts", "floor" and "floors" (bank: initial balances and the floors below
	// which no balance may go).
	Params map[string]json.RawMessage `json:"params,omitempty"`
}

// FormatV1 is the value of Header.Format written by this version.
const FormatV1 = "indoubt-history/1"

// JSONAppender is a value that appends its own JSON encoding, exactly what
// encoding/json would give it (its tests must hold it to that). Value uses it instead
// of encoding/json's reflection: the workloads' outcomes are encoded on every
// operation's path.
type JSONAppender interface {
	AppendJSON(b []byte) []byte
}

// Value encodes v as a history value. It panics only if v cannot be encoded as JSON,
// which is a programming error of the caller, never a property of input.
func Value(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if a, ok := v.(JSONAppender); ok {
		return a.AppendJSON(make([]byte, 0, 64))
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("histories.Value: %v", err))
	}
	return b
}
