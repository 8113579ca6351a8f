package twopc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Decision is a coordinator's decision for one distributed transaction.
type Decision string

// The decisions.
const (
	Commit Decision = "commit"
	Abort  Decision = "abort"
)

// Record is one line of the decision log.
type Record struct {
	GID string `json:"gid"`
	// Participants are the indexes of the servers that prepared the transaction.
	Participants []int    `json:"participants"`
	Decision     Decision `json:"decision"`
}

// Log is the coordinator's durable decision log: an append-only file of JSON lines,
// fsynced before Write returns. A commit decision exists once its line is on disk, and
// not before: recovery commits what the log says committed and aborts everything else
// (presumed abort), so the log is written after every participant prepared and before
// any is told to commit. Write is safe for concurrent use; concurrent writers share one
// fsync (group commit).
type Log struct {
	path string

	mu      sync.Mutex // guards f's writes and written
	f       *os.File
	written uint64

	syncMu sync.Mutex // serialises fsyncs; guards synced
	synced uint64
}

// OpenLog opens (creating it if needed) the decision log at path for appending.
func OpenLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	return &Log{path: path, f: f}, nil
}

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// Write appends r and returns once it is on disk.
func (l *Log) Write(r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	if _, err := l.f.Write(line); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("decision log %s: %w", l.path, err)
	}
	l.written++
	mine := l.written
	l.mu.Unlock()

	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= mine {
		return nil // another writer's fsync covered this line
	}
	l.mu.Lock()
	upto := l.written
	l.mu.Unlock()
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("decision log %s: fsync: %w", l.path, err)
	}
	l.synced = upto
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// ReadLog reads the decisions of the log at path, by gid (the last line of a gid wins).
// A missing file is an empty log. A last line without its newline is a write the crash
// interrupted: it was never fsynced as a whole, so it is no decision and is skipped.
func ReadLog(path string) (map[string]Record, error) {
	out := map[string]Record{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
		b = b[:i+1]
	}
	r := bufio.NewReader(bytes.NewReader(b))
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, nil
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil || rec.GID == "" {
			return nil, fmt.Errorf("decision log %s line %d: not a decision", path, n)
		}
		out[rec.GID] = rec
	}
}
