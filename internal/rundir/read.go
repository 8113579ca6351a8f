package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/indoubt/indoubt/internal/jsonkeys"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/schemas"
)

// MaxResultsSize bounds the results.json ReadResults reads: the largest a run writes
// (the evidence of a few hundred anomalies) is a few megabytes.
const MaxResultsSize = 64 << 20

// maxConfigSize bounds the config.json MaxAnomalies reads.
const maxConfigSize = 1 << 20

// ReadResults reads dir's results.json, a file from elsewhere: a regular file (not a
// FIFO, a device or a directory, which would block or never end) of at most
// MaxResultsSize bytes, decoded (an error names the field and its JSON type) and held
// to schemas/results.schema.json, so that what is rendered is what a run can have
// written (a schema_version of this build's, counts of 0 or more, an object and not
// null). A missing file is an error matching fs.ErrNotExist.
func ReadResults(dir string) (*results.Results, error) {
	b, err := ReadFileBounded(filepath.Join(dir, ResultsFile), MaxResultsSize)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%s: not valid UTF-8", ResultsFile)
	}
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", ResultsFile, results.JSONError(err))
	}
	// A key given twice is read last-wins by encoding/json: a second "verdict" would
	// override the first without a word.
	if err := jsonkeys.Twice(b, true); err != nil {
		return nil, fmt.Errorf("%s: %v", ResultsFile, err)
	}
	if err := validateResults(b); err != nil {
		return nil, fmt.Errorf("%s: %v", ResultsFile, err)
	}
	return &r, nil
}

// ReadFileBounded reads a file of a run directory from elsewhere: a regular file of at
// most max bytes. A FIFO, device, socket or directory in its place is refused before
// it is opened (and checked again once open), so a tampered directory can make no
// read block or run on forever.
func ReadFileBounded(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is longer than %d bytes", filepath.Base(path), max)
	}
	return b, nil
}

// OpenRegular opens a file of a run directory from elsewhere for reading, and refuses
// it unless it is a regular file: a FIFO, a device, a socket or a directory in its
// place (a link to /dev/zero, a FIFO no program writes) would make a read block or run
// on forever. The open itself does not wait (O_NONBLOCK, which a regular file's reads
// ignore), so a FIFO is refused at once rather than waiting for a writer. A missing
// file is an error matching fs.ErrNotExist.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s, not a regular file", filepath.Base(path), FileKind(fi.Mode()))
	}
	return f, nil
}

// FileKind names what a file that is not a regular file is: "a directory", "a FIFO".
func FileKind(m os.FileMode) string {
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
	msg := strings.Join(strings.Fields(ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return fmt.Errorf("does not hold to schemas/results.schema.json (a run of another version, or tampered with): at %s: %s", at, msg)
}
