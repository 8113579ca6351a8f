package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// jsonDoc is a whole JSON input held in memory, so that an error can name the line and
// column of the value it is about (the readers of dbcop's and elle-cli's histories).
type jsonDoc struct {
	name string
	data []byte
}

// at returns "name:line:col" for the first byte at or after off that is not
// whitespace or a comma: the start of the value a json.Decoder reads next when its
// InputOffset is off.
func (d jsonDoc) at(off int64) string {
	i := int(min(max(off, 0), int64(len(d.data))))
	for i < len(d.data) && bytes.IndexByte([]byte(" \t\r\n,"), d.data[i]) >= 0 {
		i++
	}
	line := 1 + bytes.Count(d.data[:i], []byte("\n"))
	col := i - bytes.LastIndexByte(d.data[:i], '\n')
	return fmt.Sprintf("%s:%d:%d", d.name, line, col)
}

// readJSONDoc reads all of r, refuses it unless it is valid UTF-8 (checkUTF8), and
// returns it with a decoder of it that keeps numbers as json.Number.
func readJSONDoc(r io.Reader, name string) (jsonDoc, *json.Decoder, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return jsonDoc{}, nil, fmt.Errorf("read %s: %w", name, err)
	}
	doc := jsonDoc{name: name, data: data}
	if err := doc.checkUTF8(); err != nil {
		return jsonDoc{}, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return doc, dec, nil
}

// errAt is an error about the value starting at or after off.
func (d jsonDoc) errAt(off int64, format string, a ...any) error {
	return fmt.Errorf("%s: %s", d.at(off), fmt.Sprintf(format, a...))
}

// checkUTF8 refuses input that is not valid UTF-8, at its first bad byte: Go's JSON
// decoder would read such bytes as U+FFFD, and two different keys or values as one.
func (d jsonDoc) checkUTF8() error {
	if utf8.Valid(d.data) {
		return nil
	}
	for i := 0; i < len(d.data); {
		r, n := utf8.DecodeRune(d.data[i:])
		if r == utf8.RuneError && n <= 1 {
			line := 1 + bytes.Count(d.data[:i], []byte("\n"))
			col := i - bytes.LastIndexByte(d.data[:i], '\n')
			return fmt.Errorf("%s:%d:%d: not valid UTF-8", d.name, line, col)
		}
		i += n
	}
	return nil
}

// jsonWhy shortens a decoder's error for a message that already names the position.
func jsonWhy(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends before the history does (a file cut short?)"
	case errors.As(err, &se):
		return "not JSON: " + se.Error()
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%s is a JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("a JSON %s, want %s", te.Value, te.Type)
	}
	return err.Error()
}

// jsonMembers calls f with each member of the JSON object raw, in order, and refuses
// an object with a key twice (Go's decoder would keep the last silently).
func jsonMembers(raw json.RawMessage, f func(key string, val json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s", jsonWhy(err))
		}
		key, _ := t.(string)
		if seen[key] {
			return fmt.Errorf("key %q twice in one object", key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("%s", jsonWhy(err))
		}
		if err := f(key, val); err != nil {
			return err
		}
	}
	return nil
}
