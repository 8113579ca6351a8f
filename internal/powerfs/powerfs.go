// Package powerfs is a FUSE filesystem that forgets, on demand, what was never fsynced:
// a power cut for the server whose data directory sits on it.
//
// A killed process loses nothing the kernel already has; a machine that loses power loses
// every write not yet fsynced. powerfs mirrors a backing directory (loopback) and keeps
// track of what a power cut would lose:
//
//   - a file's writes, truncates and fallocates are durable once that file is fsynced
//     (fsync or fdatasync, on any descriptor of the file);
//   - a new, removed or renamed directory entry is durable once its directory is fsynced
//     (a rename is one change of both directories: fsync of either makes it durable, as
//     one journal transaction does on ext4 or xfs). An fsync of a file does not make its
//     name durable, nor does an fsync of a directory make its files' contents durable.
//     That is the POSIX rule (PerDirectory, the default); Options.Entries can choose a
//     journaling filesystem's instead (Ordered: any fsync commits every earlier entry
//     change).
//
// PowerLoss then brings the backing directory back to that durable state.
//
// # Design: write through, undo log
//
// Every change goes straight to the backing directory, so reads, mmap and attributes are
// the plain loopback's and cost nothing extra. Before a change, powerfs keeps what it
// destroys, in memory: the old bytes a write or truncate replaces (nothing for an append,
// the common case for logs), and for a removed name a hard link to the file in a hidden
// trash directory inside the backing directory (or the mode of a removed empty directory).
// An fsync of a file forgets its undo log; an fsync of a directory forgets the undo
// records of its entries.
//
// Appends to a file opened with O_APPEND and write access (a log such as Redis's AOF)
// destroy nothing, so they need no undo bytes, only the size to cut back to. powerfs
// offers such descriptors to the kernel for FUSE passthrough (Linux 6.9 and later, as
// root): the kernel writes them to the backing file itself, without the round trip
// through this process that every other write costs, and powerfs journals the file's
// size when it was opened and after each fsync, which a power loss cuts it back to (a
// tear keeps a page-aligned prefix of the growth). fsync still reaches powerfs. Where
// the kernel refuses passthrough, the appends come to Write and are journaled as any
// write; Options.NoPassthrough asks for that. A file opened for appending while it is
// open otherwise is journaled write by write too. The kernel will not mix passthrough
// and its page cache on one file, so while a file has descriptors passing through, a
// read-only open of it passes through as well, and an open that could overwrite fails
// with ETXTBSY (its writes would escape the journal). Stats do not count appends passed
// through as writes. PowerLoss unmounts, applies the undo records newest first,
// empties the trash and mounts again, so that the kernel's caches are gone too, as after
// a reboot. The alternative, keeping the durable state on disk and the volatile one in
// memory overlays, would have to merge every read, directory listing and mmap.
//
// # What is modelled and what is not
//
// Modelled: write, truncate (including O_TRUNC), fallocate, create, mknod, mkdir, symlink,
// hard link, unlink, rmdir, rename (including over a target, RENAME_NOREPLACE and
// RENAME_EXCHANGE). Writes through a shared mmap reach powerfs when the kernel writes the
// pages back, and msync then fsyncs, so they follow the same rule. Optionally a power cut
// tears: each file keeps a seeded prefix of its unsynced changes, ending inside a write at
// a 4 KiB page boundary. A prefix, in the order the changes were made: a disk that
// persists a later page but not an earlier one is not modelled.
//
// Not modelled: attribute changes (chmod, chown, utimes) are durable at once; a hole that a rolled-back write filled comes back as zeros, not as a
// hole; a directory renamed and made durable carries along pending changes of its
// children by rewritten path, which is exact for renames within one directory and an
// approximation across directories. The undo log is in memory: a workload that rewrites
// much old data between fsyncs costs as much memory (Stats.UndoBytes).
//
// Not offered: extended attributes (and so POSIX ACLs). Getting, setting or listing one
// fails with ENOTSUP, as on a filesystem without them. With them, the kernel asks the
// filesystem for security.capability before every write, to know whether the write
// must drop file capabilities: a second round trip per write, which cost a third of a
// write's CPU time. The databases indoubt launches use none.
//
// # Use
//
// Mount needs root and /dev/fuse; it mounts with mount(2) directly (no fusermount), with
// allow_other and default_permissions so that a server running as an unprivileged user
// works on it with ordinary permission checks. PowerLoss is meant for a moment when the
// server on top has been killed: it refuses, with ErrBusy, while files on the mount are
// still open after Options.OpenWait.
//
// The process that mounts serves the mount. A child it starts must not touch the mount
// between fork and exec: no exec.Cmd.Dir and no program on the mount (pass the data
// directory as an argument instead). While the child waits for the mount, the parent's
// runtime can stop the world for a garbage collection that waits for the thread still
// inside vfork: a deadlock. Once the child has exec'd, it may use the mount freely.
package powerfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// ErrUnavailable is matched (errors.Is) by Mount's error when FUSE cannot be used here:
// no /dev/fuse, or not root.
var ErrUnavailable = errors.New("FUSE unavailable")

// ErrBusy is matched by PowerLoss's error when files on the mount are still open.
var ErrBusy = errors.New("files still open on the mount")

// trashName is the hidden directory, in the backing root, that keeps removed files alive
// until their removal is durable.
const trashName = ".powerfs-trash"

// EntryDurability says which fsync makes a directory entry change durable.
type EntryDurability uint8

const (
	// PerDirectory (the default) is the POSIX rule: a new, removed or renamed entry is
	// durable once its directory is fsynced, and only then. It finds programs that never
	// fsync a directory they create files in.
	PerDirectory EntryDurability = iota
	// Ordered is a journaling filesystem's behaviour (ext4 data=ordered, xfs): entry
	// changes commit in order, and any fsync, of a file or a directory, makes every entry
	// change made before it durable.
	Ordered
)

// Options configures Mount. The zero value (or nil) is ready to use.
type Options struct {
	// Entries is the rule for directory entries; the zero value is PerDirectory.
	Entries EntryDurability
	// SyncBacking forwards every fsync to the backing directory as well. Off by default:
	// the backing directory's own durability is not what is simulated, and the real
	// fsync would only slow the server down.
	SyncBacking bool
	// OpenWait is how long PowerLoss waits for the files of a killed server to be
	// released by the kernel; 0 means 5 s.
	OpenWait time.Duration
	// NoPassthrough journals appends to files opened with O_APPEND through this process
	// like any other write, instead of letting the kernel pass them to the backing file
	// (see Mount). The durable state is the same either way; passthrough costs less.
	NoPassthrough bool
}

// PowerLossOptions configures one PowerLoss. The zero value discards everything unsynced.
type PowerLossOptions struct {
	// Tear, if set, keeps a prefix of each file's unsynced changes instead of none: a
	// seeded number of them whole, and of the next one, if a write, a prefix ending at a
	// 4 KiB page boundary (possibly empty). Directory entries are never torn.
	Tear bool
	// Seed makes the tearing reproducible.
	Seed uint64
}

// Stats are counts of an FS since Mount.
type Stats struct {
	PendingBytes   int64 // bytes written, cut, allocated or appended since their file's last fsync
	PendingFiles   int   // files with changes since their last fsync
	PendingEntries int   // directory entry changes not yet durable
	UndoBytes      int64 // old file content held in memory to undo them
	Writes         int64 // write requests that reached powerfs (not appends passed through)
	FileSyncs      int64 // fsync and fdatasync of files
	DirSyncs       int64 // fsync of directories
	PowerLosses    int64
}

// FS is a mounted powerfs. Its methods are safe for concurrent use.
type FS struct {
	backing    string
	mountpoint string
	trash      string
	opts       Options

	mu sync.Mutex // guards the journal, the mount, and changes to the backing dir
	j  *journal
	// hmu guards appending and opened, which Release updates without mu (PowerLoss
	// holds mu while it waits for the releases). Taken after mu, never before.
	hmu sync.Mutex
	// appending holds the open files of each inode opened for appending with
	// passthrough: after an fsync their journal starts again from the size then.
	appending map[uint64][]*file
	opened    map[uint64]int // open file handles by inode, passthrough or not
	server    *fuse.Server
	closed    bool
	writes    int64
	fsyncs    int64
	dsyncs    int64
	crashes   int64

	open atomic.Int64 // open file and directory handles
}

// Mount mounts a powerfs at mountpoint that mirrors backingDir, whose current content
// counts as durable. Both must be existing directories. opts may be nil. Unmount undoes
// it.
func Mount(backingDir, mountpoint string, opts *Options) (*FS, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	f := &FS{j: newJournal(), appending: map[uint64][]*file{}, opened: map[uint64]int{}}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.OpenWait <= 0 {
		f.opts.OpenWait = 5 * time.Second
	}
	var err error
	if f.backing, err = existingDir(backingDir); err != nil {
		return nil, fmt.Errorf("powerfs: backing %w", err)
	}
	if f.mountpoint, err = existingDir(mountpoint); err != nil {
		return nil, fmt.Errorf("powerfs: mountpoint %w", err)
	}
	if rel, err := filepath.Rel(f.backing, f.mountpoint); err == nil && filepath.IsLocal(rel) { // "." too
		// The mount would serve itself and hang on its first lookup.
		return nil, fmt.Errorf("powerfs: mountpoint %s is inside the backing directory %s", f.mountpoint, f.backing)
	}
	f.trash = filepath.Join(f.backing, trashName)
	// A trash left by a process that died mounted holds nothing durable.
	if err := os.RemoveAll(f.trash); err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	if err := os.Mkdir(f.trash, 0o700); err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	if err := f.mount(); err != nil {
		_ = os.RemoveAll(f.trash)
		return nil, err
	}
	return f, nil
}

// Available returns nil when this process can mount a powerfs, and otherwise a one-line
// error matching ErrUnavailable that says why.
func Available() error {
	if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return fmt.Errorf("powerfs: %w: no /dev/fuse (load the fuse module, or give the container --device /dev/fuse)", ErrUnavailable)
	}
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("powerfs: %w: mounting needs root (euid is %d)", ErrUnavailable, uid)
	}
	return nil
}

func existingDir(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s: not a directory", abs)
	}
	return abs, nil
}

// mount serves a fresh node tree on the mountpoint.
func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("powerfs: %w", err)
	}
	root := &fs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: f}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	second := time.Second
	server, err := fs.Mount(f.mountpoint, root.RootNode, &fs.Options{
		EntryTimeout: &second,
		AttrTimeout:  &second,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // no fusermount binary needed, and none used
			AllowOther:        true,
			DisableXAttrs:     true, // see "Not offered" in the package documentation
			Options:           []string{"default_permissions"},
			FsName:            f.backing,
			Name:              "powerfs",
		},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s on %s: %w", f.backing, f.mountpoint, err)
	}
	f.server = server
	closeFuseOnExec()
	return nil
}

// closeFuseOnExec marks this process's /dev/fuse descriptors close-on-exec. go-fuse
// opens /dev/fuse without it, so every server started afterwards would inherit the
// connection and keep it alive after this process dies, leaving processes that touch
// the mountpoint waiting forever instead of failing.
func closeFuseOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
}

// unmount ends the FUSE server; if the mountpoint is busy it fails unless lazy, which
// then detaches the mount and lets the kernel finish it when the last user goes.
func (f *FS) unmount(lazy bool) error {
	if f.server == nil {
		return nil
	}
	err := f.server.Unmount()
	if err != nil && lazy {
		if derr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("powerfs: unmount %s: %w; lazy unmount: %w", f.mountpoint, err, derr)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("powerfs: unmount %s: %w", f.mountpoint, err)
	}
	f.server = nil
	return nil
}

// Mountpoint returns the absolute path the FS is mounted on.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Backing returns the absolute path of the backing directory.
func (f *FS) Backing() string { return f.backing }

// PowerLoss simulates a power cut and reboot: the mount goes away, every change not yet
// durable is undone on the backing directory, and the mount comes back. It must be called
// when nothing uses the mount (the server on top killed): if files are still open after
// Options.OpenWait it changes nothing and returns an error matching ErrBusy. An error
// from undoing a change is returned after the mount is back.
func (f *FS) PowerLoss(opts PowerLossOptions) error {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return errors.New("powerfs: power loss: unmounted")
	}
	deadline := time.Now().Add(f.opts.OpenWait)
	for f.open.Load() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("powerfs: power loss: %w (%d handles)", ErrBusy, f.open.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("powerfs: power loss: unmounted")
	}
	if err := f.unmount(false); err != nil {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	f.crashes++
	var rng *rand.Rand
	if opts.Tear {
		rng = rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	}
	undoErr := f.j.rollback(f.backing, rng)
	if undoErr != nil {
		undoErr = fmt.Errorf("powerfs: power loss: %w", undoErr)
	}
	if err := emptyDir(f.trash); err != nil {
		undoErr = errors.Join(undoErr, fmt.Errorf("powerfs: empty trash: %w", err))
	}
	if err := f.mount(); err != nil {
		f.closed = true
		_ = os.RemoveAll(f.trash)
		return errors.Join(undoErr, err)
	}
	return undoErr
}

func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// Unmount unmounts the FS, lazily if the mountpoint is busy, and leaves the backing
// directory as it is now: a clean shutdown, which makes everything durable. It may be
// called more than once.
func (f *FS) Unmount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	err := f.unmount(true)
	f.closed = true
	for ino := range f.j.data {
		f.j.commitData(ino)
	}
	f.j.ns = nil
	if rerr := os.RemoveAll(f.trash); rerr != nil {
		err = errors.Join(err, fmt.Errorf("powerfs: %w", rerr))
	}
	return err
}

// Stats returns the FS's counts now.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{Writes: f.writes, FileSyncs: f.fsyncs, DirSyncs: f.dsyncs, PowerLosses: f.crashes}
	s.PendingBytes, s.UndoBytes, s.PendingFiles, s.PendingEntries = f.j.stats()
	return s
}
