package servers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile is the marker in every temporary directory of a launched server. It names
// the process that launched the server and the server process itself, each with its start
// time: a SIGKILLed harness cannot remove its directories, and its pid alone could by
// now belong to an unrelated process.
const ownerFile = ".indoubt-owner"

// owner is the content of ownerFile.
type owner struct {
	Pid         int    `json:"pid"`   // the launching process
	Start       uint64 `json:"start"` // its start time, clock ticks since boot (/proc/PID/stat)
	Server      int    `json:"server,omitempty"`
	ServerStart uint64 `json:"server_start,omitempty"`
	Keep        bool   `json:"keep,omitempty"` // launched with Keep: left for inspection
}

// TempDirPattern is the os.MkdirTemp pattern of a launched server's directory named for
// kind, "indoubt-KIND-PID-": FindLeftovers looks at the directories named indoubt-*, and
// the owning process id is in the name too, so that a human looking at /tmp can tell.
func TempDirPattern(kind string) string {
	return "indoubt-" + kind + "-" + strconv.Itoa(os.Getpid()) + "-"
}

// writeOwner records in dir that this process owns it and, when server is not nil, that
// server runs from it. The file is replaced atomically so that a concurrent reaper
// never reads half of it.
func writeOwner(dir string, keep bool, server *Process) error {
	o := owner{Pid: os.Getpid(), Keep: keep}
	var err error
	if o.Start, _, err = processStart(o.Pid); err != nil {
		return fmt.Errorf("owner marker: %w", err)
	}
	if server != nil {
		o.Server = server.Pid()
		if o.ServerStart, _, err = processStart(o.Server); err != nil {
			// The server already exited; there is nothing to track.
			o.Server = 0
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ownerFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("owner marker: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ownerFile)); err != nil {
		return fmt.Errorf("owner marker: %w", err)
	}
	return nil
}

// Track records server in the owner marker of every directory of s, so that a later
// launch or `indoubt clean` kills it should this process die without stopping it. A
// launcher calls it as soon as the server process exists, before it waits for the
// server to be ready: a harness killed during the wait leaves a server to find.
func (s *Instance) Track(server *Process) error {
	for _, dir := range s.dirs {
		if err := writeOwner(dir, s.Keep, server); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// alive reports whether pid is a running (not zombie) process that started at start.
// A pid now held by another process is not alive.
func alive(pid int, start uint64) bool {
	got, zombie, err := processStart(pid)
	return err == nil && !zombie && got == start
}

// Leftover is the temporary directory of a server whose launching process is gone:
// killed (SIGKILL, a crash) before it could stop the server and remove the directory.
type Leftover struct {
	Dir    string // the directory
	Owner  int    // the process id that launched the server, now gone
	Server int    // the server process, still running (its parent-death signal failed), or 0
	Kept   bool   // launched with Keep: left on purpose, for inspection
	Bytes  int64  // the size of the files in it
}

// MarkOwned records in dir, a directory this process writes (a run directory before
// it is published), that this process owns it: should the process die first, a later
// FindLeftovers lists dir as a leftover when its name is that of an unpublished run
// (.NAME.partial). Unmark removes the record.
func MarkOwned(dir string) error { return writeOwner(dir, false, nil) }

// Unmark removes the record MarkOwned wrote in dir.
func Unmark(dir string) error { return os.Remove(filepath.Join(dir, ownerFile)) }

// FindLeftovers lists the temporary directories of launched servers in parent ("" means
// os.TempDir()) whose launching process is gone, and the unpublished run directories
// (.NAME.partial, MarkOwned) of runs killed before they were published. Directories
// without an owner marker (made by an older indoubt or another program, or still being
// created) and those of live processes are not listed.
func FindLeftovers(parent string) ([]Leftover, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("leftovers: %w", err)
	}
	var out []Leftover
	for _, e := range ents {
		partialRun := strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".partial")
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "indoubt-") && !partialRun {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		// Only markers this user wrote count: anyone may make a directory in /tmp.
		marker := filepath.Join(dir, ownerFile)
		if fi, err := os.Lstat(marker); err != nil || !fi.Mode().IsRegular() || !ownedByMe(fi) {
			continue
		}
		b, err := os.ReadFile(marker)
		if err != nil {
			continue
		}
		var o owner
		if json.Unmarshal(b, &o) != nil || o.Pid <= 0 || alive(o.Pid, o.Start) {
			continue
		}
		l := Leftover{Dir: dir, Owner: o.Pid, Kept: o.Keep, Bytes: dirBytes(dir)}
		if o.Server > 1 && alive(o.Server, o.ServerStart) && worksIn(o.Server, dir) {
			l.Server = o.Server
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// Remove kills the leftover's server and every process it started if it still runs, waits for it to
// go, and removes the directory. The server's pid was checked against its recorded
// start time when l was found, so a reused pid is not killed.
func (l Leftover) Remove() error {
	if l.Server > 0 {
		// Its process group and every descendant: PostgreSQL's backends are each in a
		// session of their own, and one busy computing outlives its postmaster.
		killTree(l.Server)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, zombie, err := processStart(l.Server)
			if err != nil || zombie {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("remove %s: server process %d did not die", l.Dir, l.Server)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A powerfs its dead process served is still mounted in the directory.
	unmountUnder(l.Dir)
	if err := os.RemoveAll(l.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", l.Dir, err)
	}
	return nil
}

// reapLeftovers removes the leftovers in each parent that were not kept on purpose. It
// runs at every launch, so that a harness killed with SIGKILL costs disk space only until
// the next launch. Errors are ignored: a leftover that cannot be removed must not stop a
// new server from starting, and `indoubt clean` reports it.
func reapLeftovers(parents ...string) {
	seen := map[string]bool{}
	for _, p := range parents {
		if p == "" {
			p = os.TempDir()
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		ls, _ := FindLeftovers(p)
		for _, l := range ls {
			if !l.Kept {
				_ = l.Remove()
			}
		}
	}
}

// worksIn reports whether process pid has its working directory in dir, as every
// launched server does. The marker lives in a directory that the server's account may
// write, so its pid is not trusted alone: it must not make clean kill anything else.
func worksIn(pid int, dir string) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	return err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator)))
}

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return fs.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// MakeOwnedTempDir makes the temporary directory of a server that runs inside this
// process (FerretDB) under parent ("" means os.TempDir()), named for kind, with the
// owner marker that lets a later launch or `indoubt clean` remove it should this process
// die without cleaning up. It reaps such leftovers first, as every launch does. The
// caller removes the directory when its server stops.
func MakeOwnedTempDir(parent, kind string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	reapLeftovers(parent, os.TempDir())
	dir, err := os.MkdirTemp(parent, TempDirPattern(kind))
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err == nil {
		err = writeOwner(dir, false, nil)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
