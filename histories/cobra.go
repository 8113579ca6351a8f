package histories

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Cobra's client logs (Tan et al., "Cobra: Making Transactional Key-Value Stores
// Verifiably Serializable", OSDI 2020), as AWDIT reads them: a directory of *.log
// files, each one client's session, each a sequence of records of a one-byte tag and
// big-endian 64-bit integers:
//
//	'S' txn            a transaction begins
//	'W' wid key val    it writes (wid: the write's unique id; key and val: hashes)
//	'R' prev wid key val  it reads the write wid (0xdeadbeef or 0xbebeebee: none)
//	'C' txn            it commits
//
// The values are the write ids: a read names the write it saw by its id.

// cobraNull are the write ids of a read that saw no write.
const (
	cobraNull1 = 0xdeadbeef
	cobraNull2 = 0xbebeebee
)

// ReadCobra reads the *.log files of the directory dir, in the order of their names,
// as the events of an rw-register history (model "rw-register"): each file a session,
// its process the file's place in that order; each committed transaction an ok
// completion without invocation (no real-time order is recorded), with ["w", key,
// wid] and ["r", key, wid] micro-ops (a read of no write ["r", key, null]); a
// transaction begun and not committed when its log ends is an unknown (info)
// completion with the same micro-ops. A record of another tag, a commit of another
// transaction than the one begun, a record outside a transaction, or a log cut
// inside a record is an error naming the file and the byte offset; so is a
// directory without a *.log file.
func ReadCobra(dir string) ([]Op, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read Cobra logs: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".log") {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Cobra log (*.log) in it", dir)
	}
	var ops []Op
	for session, name := range files {
		path := filepath.Join(dir, name)
		more, err := readCobraLog(path, session)
		if err != nil {
			return nil, err
		}
		for _, op := range more {
			op.Index, op.Time = int64(len(ops)), int64(len(ops))
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// readCobraLog reads one client's log as the events of process session.
func readCobraLog(path string, session int) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read Cobra log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var off int64
	nums := func(n int) ([]int64, error) {
		out := make([]int64, n)
		var b [8]byte
		for i := range out {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return nil, fmt.Errorf("%s: byte %d: the log ends inside a record", path, off)
			}
			off += 8
			out[i] = int64(binary.BigEndian.Uint64(b[:]))
		}
		return out, nil
	}
	var ops []Op
	var mops []string
	open := false
	var txn int64
	for {
		tag, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		at := off
		off++
		switch tag {
		case 'S':
			v, err := nums(1)
			if err != nil {
				return nil, err
			}
			if open {
				return nil, fmt.Errorf("%s: byte %d: transaction %d begins inside transaction %d", path, at, v[0], txn)
			}
			open, txn, mops = true, v[0], mops[:0]
		case 'C':
			v, err := nums(1)
			if err != nil {
				return nil, err
			}
			if !open || v[0] != txn {
				return nil, fmt.Errorf("%s: byte %d: commit of transaction %d, which did not begin here", path, at, v[0])
			}
			ops = append(ops, Op{Process: session, Type: OK, F: "txn", Value: json.RawMessage("[" + strings.Join(mops, ",") + "]")})
			open = false
		case 'W', 'R':
			n := 3
			if tag == 'R' {
				n = 4
			}
			v, err := nums(n)
			if err != nil {
				return nil, err
			}
			if !open {
				return nil, fmt.Errorf("%s: byte %d: a %c record outside a transaction", path, at, tag)
			}
			if tag == 'W' {
				mops = append(mops, fmt.Sprintf(`["w",%d,%d]`, v[1], v[0]))
				continue
			}
			wid, key := v[1], v[2]
			val := strconv.FormatInt(wid, 10)
			if wid == cobraNull1 || wid == cobraNull2 {
				val = "null"
			}
			mops = append(mops, fmt.Sprintf(`["r",%d,%s]`, key, val))
		default:
			return nil, fmt.Errorf("%s: byte %d: not a Cobra record (tag %q; S, W, R and C are known)", path, at, tag)
		}
	}
	if open {
		ops = append(ops, Op{Process: session, Type: Info, F: "txn", Value: json.RawMessage("[" + strings.Join(mops, ",") + "]")})
	}
	return ops, nil
}
