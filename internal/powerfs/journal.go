package powerfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pageSize is the granularity at which a torn write keeps a prefix: the unit a disk or
// page cache writes back, so a power cut leaves whole pages old or new.
const pageSize = 4096

// journal holds what the backing directory would lose in a power cut: for each file with
// writes since its last fsync the old bytes those writes replaced, and the directory
// entry changes whose directory has not been fsynced since. The backing directory always
// holds the current state; rolling the journal back gives the durable one.
type journal struct {
	data map[uint64]*dataLog // by backing inode number, so hard links share one log
	ns   []*nsOp             // pending entry changes, oldest first
	seq  int                 // names trash entries
}

// dataLog is the undo log of one file's unsynced changes.
type dataLog struct {
	fd      int // read-write descriptor on the inode, owned by the log
	undo    []dataUndo
	pending int64 // bytes written or cut since the last fsync
	held    int64 // bytes of old content kept in undo
}

// dataUndo undoes one write, truncate or fallocate: set the size back to size, then put
// old back at off. n is the length of a write (0 for other changes); only writes tear.
type dataUndo struct {
	off  int64
	old  []byte
	size int64
	n    int64
	// grow marks the undo of appends the kernel passed through to the backing file
	// since size was recorded: powerfs never saw them, so n is found when rolling back
	// (the file's size at the next change, or now, less size).
	grow bool
}

// nsKind is the kind of a directory entry change.
type nsKind uint8

const (
	nsCreate   nsKind = 1 + iota // a new name: file, directory, symlink, node or hard link
	nsRemove                     // unlink or rmdir
	nsRename                     // rename, possibly replacing its target
	nsExchange                   // rename with RENAME_EXCHANGE
)

// removed is what an unlink (or a rename over a target) took away: a file kept alive by
// a hard link in the trash, or an empty directory to make again.
type removed struct {
	trash    string // absolute path of the trash link; "" for a directory
	mode     uint32 // directory permission bits
	uid, gid int
}

// nsOp is one pending entry change. Paths are relative to the backing root; dirs are the
// inode numbers of the directories whose fsync makes the change durable (either one, for
// a rename: one journal transaction, as on ext4 or xfs).
type nsOp struct {
	kind     nsKind
	dirs     [2]uint64
	path     string // created or removed name, or the rename's source
	to       string // the rename's target
	replaced *removed
}

func (op *nsOp) in(dir uint64) bool { return op.dirs[0] == dir || op.dirs[1] == dir }

func newJournal() *journal { return &journal{data: map[uint64]*dataLog{}} }

// log returns the data log of ino, creating it with reopen's descriptor.
func (j *journal) log(ino uint64, reopen func() (int, error)) (*dataLog, error) {
	if l := j.data[ino]; l != nil {
		return l, nil
	}
	fd, err := reopen()
	if err != nil {
		return nil, fmt.Errorf("reopen for the undo log: %w", err)
	}
	l := &dataLog{fd: fd}
	j.data[ino] = l
	return l, nil
}

// change records the undo of a change to [off, off+n) that may also move the size to
// newSize (-1: the size grows to cover the range if it must). It reads the old bytes
// before the change is made.
func (l *dataLog) change(off, n, newSize int64, write bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		return err
	}
	u := dataUndo{off: off, size: st.Size}
	if write {
		u.n = n
	}
	end := min(off+n, st.Size)
	if newSize >= 0 && newSize < st.Size {
		// A cut: keep what is cut off.
		u.off, end = newSize, st.Size
	}
	if end > u.off {
		u.old = make([]byte, end-u.off)
		if _, err := unix.Pread(l.fd, u.old, u.off); err != nil {
			return err
		}
	}
	l.undo = append(l.undo, u)
	l.held += int64(len(u.old))
	switch {
	case write:
		l.pending += n
	case newSize >= 0:
		l.pending += max(st.Size-newSize, newSize-st.Size)
	default:
		l.pending += n
	}
	return nil
}

// appendBase journals the size ino has now as what a power loss cuts the appends the
// kernel passes through from now on back to. fd is any open descriptor of ino.
func (j *journal) appendBase(ino uint64, fd int) error {
	l, err := j.log(ino, func() (int, error) { return reopen(fd) })
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		return err
	}
	l.undo = append(l.undo, dataUndo{off: st.Size, size: st.Size, grow: true})
	return nil
}

// growth fills in the length of each grow record: how far the file grew before the
// next change was recorded, or until now.
func (l *dataLog) growth() {
	for i := range l.undo {
		u := &l.undo[i]
		if !u.grow {
			continue
		}
		end := int64(-1)
		if i+1 < len(l.undo) {
			end = l.undo[i+1].size
		} else {
			var st unix.Stat_t
			if unix.Fstat(l.fd, &st) == nil {
				end = st.Size
			}
		}
		u.n = max(0, end-u.size)
	}
}

// commitData makes ino's content durable.
func (j *journal) commitData(ino uint64) {
	if l := j.data[ino]; l != nil {
		unix.Close(l.fd)
		delete(j.data, ino)
	}
}

// commitDir makes the entry changes in directory dir durable.
func (j *journal) commitDir(dir uint64) {
	for i := 0; i < len(j.ns); i++ {
		op := j.ns[i]
		if !op.in(dir) {
			continue
		}
		j.ns = slices.Delete(j.ns, i, i+1)
		if op.kind == nsRename {
			// Older pending changes named the renamed directory's children by their old
			// path; from now on the durable path is the new one. A pending create of the
			// renamed name itself moved with it and no longer undoes anything.
			for k := 0; k < i; k++ {
				p := j.ns[k]
				if p.kind == nsCreate && p.path == op.path {
					j.ns = slices.Delete(j.ns, k, k+1)
					k--
					i--
					continue
				}
				p.path = reparent(p.path, op.path, op.to)
				p.to = reparent(p.to, op.path, op.to)
			}
		}
		i--
		j.forget(op.replaced)
	}
	j.dropOrphans()
}

// commitAll makes every pending entry change durable.
func (j *journal) commitAll() {
	if len(j.ns) == 0 {
		return
	}
	for _, op := range j.ns {
		j.forget(op.replaced)
	}
	j.ns = nil
	j.dropOrphans()
}

// reparent moves p from under dir old to under dir new.
func reparent(p, old, new string) string {
	if rest, ok := strings.CutPrefix(p, old+"/"); ok {
		return new + "/" + rest
	}
	return p
}

// forget removes a durable removal's trash link.
func (j *journal) forget(r *removed) {
	if r != nil && r.trash != "" {
		_ = os.Remove(r.trash)
		r.trash = ""
	}
}

// dropOrphans forgets the data logs of files whose last name is durably gone: nothing can
// bring their content back.
func (j *journal) dropOrphans() {
	for ino, l := range j.data {
		var st unix.Stat_t
		if unix.Fstat(l.fd, &st) == nil && st.Nlink == 0 {
			j.commitData(ino)
		}
	}
}

// tear says, for one file's undo log, how much of it survives a power cut: the first
// keep changes whole, and of the next one (a write) the bytes before keepEnd.
type tear struct {
	keep    int
	keepEnd int64 // -1: none of the next change
}

// rollback brings the backing directory root back to its durable state, then empties the
// journal. rng, when not nil, tears each file's unsynced writes at a page boundary.
func (j *journal) rollback(root string, rng *rand.Rand) error {
	var errs []error
	for i := len(j.ns) - 1; i >= 0; i-- {
		if err := j.ns[i].undo(root); err != nil {
			errs = append(errs, err)
		}
	}
	j.ns = nil
	inos := make([]uint64, 0, len(j.data))
	for ino := range j.data {
		inos = append(inos, ino)
	}
	slices.Sort(inos) // the seed alone decides the tearing
	for _, ino := range inos {
		l := j.data[ino]
		l.growth()
		t := tear{keep: 0, keepEnd: -1}
		if rng != nil {
			t = chooseTear(l.undo, rng)
		}
		if err := l.rollback(t); err != nil {
			errs = append(errs, fmt.Errorf("roll back inode %d: %w", ino, err))
		}
		j.commitData(ino)
	}
	return errors.Join(errs...)
}

// chooseTear picks how many changes survive whole and, when the next is a write, a
// page-aligned prefix of it.
func chooseTear(undo []dataUndo, rng *rand.Rand) tear {
	t := tear{keep: rng.IntN(len(undo) + 1), keepEnd: -1}
	if t.keep == len(undo) || undo[t.keep].n == 0 {
		return t
	}
	u := undo[t.keep]
	ends := []int64{u.off}
	for b := (u.off/pageSize + 1) * pageSize; b < u.off+u.n; b += pageSize {
		ends = append(ends, b)
	}
	t.keepEnd = ends[rng.IntN(len(ends))]
	return t
}

func (l *dataLog) rollback(t tear) error {
	for i := len(l.undo) - 1; i >= t.keep; i-- {
		u := l.undo[i]
		size, off, old := u.size, u.off, u.old
		if i == t.keep && t.keepEnd > u.off {
			size = max(size, t.keepEnd)
			if cut := t.keepEnd - u.off; cut < int64(len(old)) {
				off, old = t.keepEnd, old[cut:]
			} else {
				old = nil
			}
		}
		if err := unix.Ftruncate(l.fd, size); err != nil {
			return err
		}
		if len(old) > 0 {
			if _, err := unix.Pwrite(l.fd, old, off); err != nil {
				return err
			}
		}
	}
	return nil
}

// undo reverts one entry change. A name that is no longer where the change left it was
// moved or removed by a later change that became durable; the durable state then already
// says what happened to it, so that is not an error.
func (op *nsOp) undo(root string) error {
	abs := func(p string) string { return filepath.Join(root, p) }
	gone := func(err error) bool { return errors.Is(err, syscall.ENOENT) }
	switch op.kind {
	case nsCreate:
		if err := os.RemoveAll(abs(op.path)); err != nil && !gone(err) {
			return fmt.Errorf("undo create %s: %w", op.path, err)
		}
	case nsRemove:
		if err := op.replaced.restore(abs(op.path)); err != nil {
			return fmt.Errorf("undo remove %s: %w", op.path, err)
		}
	case nsRename:
		if err := os.Rename(abs(op.to), abs(op.path)); err != nil {
			if gone(err) {
				return nil
			}
			return fmt.Errorf("undo rename %s to %s: %w", op.path, op.to, err)
		}
		if err := op.replaced.restore(abs(op.to)); err != nil {
			return fmt.Errorf("undo rename %s over %s: %w", op.path, op.to, err)
		}
	case nsExchange:
		err := unix.Renameat2(unix.AT_FDCWD, abs(op.path), unix.AT_FDCWD, abs(op.to), unix.RENAME_EXCHANGE)
		if err != nil && !gone(err) {
			return fmt.Errorf("undo exchange %s and %s: %w", op.path, op.to, err)
		}
	}
	return nil
}

// restore puts a removed entry back at path.
func (r *removed) restore(path string) error {
	if r == nil {
		return nil
	}
	if r.trash == "" {
		err := os.Mkdir(path, os.FileMode(r.mode&0o777))
		if errors.Is(err, os.ErrExist) || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		// Mkdir applies the umask and drops setgid/sticky bits; put them back.
		if err := os.Chmod(path, fileMode(r.mode)); err != nil {
			return err
		}
		return os.Lchown(path, r.uid, r.gid)
	}
	err := os.Rename(r.trash, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r.trash = ""
	return err
}

// fileMode converts st_mode permission bits to an os.FileMode.
func fileMode(m uint32) os.FileMode {
	fm := os.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		fm |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		fm |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// stats sums the journal's pending work.
func (j *journal) stats() (bytes, held int64, files, entries int) {
	for _, l := range j.data {
		l.growth()
		pending := l.pending
		for _, u := range l.undo {
			if u.grow {
				pending += u.n
			}
		}
		if pending > 0 || l.held > 0 {
			files++
		}
		bytes += pending
		held += l.held
	}
	return bytes, held, files, len(j.ns)
}
