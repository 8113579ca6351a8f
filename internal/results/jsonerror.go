package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
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

// goTypeError matches encoding/json's type errors as text, where the error itself is
// gone (wrapped with %v on its way up): the JSON kind, the field (when a struct's), and
// the Go type, which runs to the end of the message (an anonymous struct's type has
// spaces: "struct { Applied *bool ... }").
var goTypeError = regexp.MustCompile(`json: cannot unmarshal (\w+(?: [^ ]+)?) into Go (?:struct field (\S*) of type|value of type) (.+)$`)

// JSONErrorText rewords the encoding/json type error at the end of msg, an error
// message from any file indoubt reads (a history's values, results.json), as JSONError
// does: the field, the JSON it holds and what it should hold, never a Go type. Other
// messages come back as they are.
func JSONErrorText(msg string) string {
	m := goTypeError.FindStringSubmatchIndex(msg)
	if m == nil {
		return msg
	}
	kind := msg[m[2]:m[3]]
	field := "the value"
	if m[4] >= 0 {
		f := msg[m[4]:m[5]]
		// "Type.a.b" or ".a.b" (an anonymous struct): the path after the type.
		if i := strings.IndexByte(f, '.'); i >= 0 {
			f = f[i+1:]
		}
		f = strings.TrimPrefix(f, "plain.")
		if f != "" {
			field = f
		}
	}
	return msg[:m[0]] + fmt.Sprintf("%s is %s, want %s", field, jsonKind(kind), goKindText(msg[m[6]:m[7]]))
}

// goKindText names, as JSON, the value of a Go type written as Go prints it.
func goKindText(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "struct"), strings.HasPrefix(t, "map["):
		return "an object"
	case strings.HasPrefix(t, "["):
		return "an array"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a value of another form"
}
