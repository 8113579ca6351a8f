package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/schemas"
)

// maxResultsSize bounds the results.json report and compare read: the largest a run
// writes (the evidence of a few hundred anomalies) is a few megabytes.
const maxResultsSize = 64 << 20

// readRunFile reads a file of a run directory from elsewhere: a regular file (not a
// FIFO, a device or a directory, which would block or never end) of at most max bytes.
func readRunFile(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", filepath.Base(path), fileKind(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is longer than %d bytes", filepath.Base(path), max)
	}
	return b, nil
}

// decodeResults reads results.json's bytes b: decoded first, for errors that name the
// field and its JSON type, then held to schemas/results.schema.json, so that what
// report and compare render is what a run can have written (a schema_version of
// theirs, counts of 0 or more, an object and not null).
func decodeResults(b []byte) (*results.Results, error) {
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results.json: %v", results.JSONError(err))
	}
	if err := validateResults(b); err != nil {
		return nil, fmt.Errorf("results.json: %v", err)
	}
	return &r, nil
}

var resultsSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Results))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemas.ResultsID, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemas.ResultsID)
})

// validateResults holds b to the schema and words the first violation in one line.
func validateResults(b []byte) error {
	sch, err := resultsSchema()
	if err != nil {
		return fmt.Errorf("internal error: results schema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	err = sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The deepest first cause names the field; the top says only "does not validate".
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	at := "/" + strings.Join(ve.InstanceLocation, "/")
	msg := ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	return fmt.Errorf("does not hold to schemas/results.schema.json (a run of another version, or tampered with): at %s: %s", at, cut(oneLine(msg), 200))
}

// cut is s cut at most bytes.
func cut(s string, most int) string {
	if len(s) > most {
		s = s[:most] + "..."
	}
	return s
}

// checkReplaceable errs when path cannot be written by atomicfile.Replace: a directory,
// or a directory that a new file cannot be made in. It follows no link and creates
// nothing at path (a report.html that a run directory links elsewhere is replaced, not
// written through).
func checkReplaceable(path string) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s is %s, not a regular file", path, fileKind(fi.Mode()))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkRunFiles errs unless dir's history.jsonl is a regular file, and its faults.jsonl
// too when there is one: a FIFO or a device in their place would block the report
// forever, or never end.
func checkRunFiles(dir string) error {
	for _, name := range []string{"history.jsonl", "faults.jsonl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil && name == "history.jsonl":
			return fmt.Errorf("%s has no history.jsonl to draw the report from: %v", dir, err)
		case err != nil:
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s: %s is %s, not a regular file", dir, name, fileKind(fi.Mode()))
		}
	}
	return nil
}

// fileKind names what a file that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// recheckTimeout bounds the re-check of a run's history that report and compare make
// to hold results.json to it.
const recheckTimeout = 20 * time.Second

// recheckDisagrees re-checks the history.jsonl of run directory dir and returns a
// sentence when its verdict is valid or invalid and results.json's is the other: a
// results.json that says valid over a history with a duplicate is not believed
// silently. Within recheckTimeout and a memory bound; a re-check that cannot decide,
// or a history that cannot be read, says nothing here (the report says what it can).
func recheckDisagrees(ctx context.Context, dir string, r *results.Results) string {
	if r.Verdict != checker.Valid && r.Verdict != checker.Invalid {
		return ""
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return ""
	}
	defer f.Close()
	rd, err := histories.NewReader(f, f.Name())
	if err != nil || rd.Header() == nil {
		return ""
	}
	rd.Partial = true
	ctx, cancel := context.WithTimeout(ctx, recheckTimeout)
	defer cancel()
	res, err := checker.CheckReader(ctx, rd, checker.Options{Timeout: recheckTimeout, MaxMemory: 1 << 30})
	if err != nil || res.Verdict == r.Verdict || res.Verdict != checker.Valid && res.Verdict != checker.Invalid {
		return ""
	}
	return fmt.Sprintf("results.json says %s, but its history.jsonl re-checked is %s (%s): results.json does not hold to its history", r.Verdict, res.Verdict, cut(oneLine(res.Summary), 200))
}

// removeLink removes path when it is a symbolic link, so that what is written there
// next is a file of its own directory.
func removeLink(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return os.Remove(path)
	}
	return nil
}
