package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// JSONError rewords err, an error of encoding/json decoding a file of a run directory
// (results.json, a line of faults.jsonl), for the person who reads it: the field, what
// it holds and what it should hold ("workers is a string, want an integer"), where a
// syntax error is, and never a Go type (encoding/json's own message names them: "Go
// struct field .plain.workers of type int"). Any other error comes back as it is; nil
// is nil. The result unwraps to err.
func JSONError(err error) error {
	if err == nil {
		return nil
	}
	return jsonError(err, "")
}

func jsonError(err error, prefix string) error {
	var done *wordedError
	if errors.As(err, &done) {
		return err // reworded already, where the field's path was known
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var pe *time.ParseError
	var msg string
	switch {
	case errors.As(err, &te):
		field := strings.TrimPrefix(te.Field, "plain.") // Results.UnmarshalJSON's embedded alias
		if field = prefix + field; field == "" {
			field = "the value"
		} else {
			field = strings.TrimSuffix(field, ".")
		}
		msg = fmt.Sprintf("%s is %s, want %s", field, jsonKind(te.Value), goKind(te.Type))
	case errors.As(err, &se):
		msg = fmt.Sprintf("not JSON: byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &pe):
		msg = fmt.Sprintf("%q is not a time in RFC 3339 form (2006-01-02T15:04:05Z)", pe.Value)
	default:
		return err
	}
	return &wordedError{msg: msg, err: err}
}

type wordedError struct {
	msg string
	err error
}

func (e *wordedError) Error() string { return e.msg }
func (e *wordedError) Unwrap() error { return e.err }

// jsonKind names what encoding/json found ("string", "number 1e400", "array").
func jsonKind(v string) string {
	kind, lit, _ := strings.Cut(v, " ")
	switch {
	case lit != "":
		return "the " + kind + " " + lit
	case kind == "array", kind == "object":
		return "an " + kind
	case kind == "bool":
		return "true or false"
	case kind == "":
		return "a value"
	}
	return "a " + kind
}

// goKind names, as JSON, the value a Go type takes.
func goKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another value"
}
