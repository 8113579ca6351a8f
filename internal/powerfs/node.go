package powerfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node whose changes are journaled before they reach the backing
// directory: the go-fuse loopback does the work, node first keeps what it will destroy.
// Every change takes FS.mu, so that a change and its undo record are one step.
type node struct {
	fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
)

// rel returns the path of name in n relative to the backing root; name "" is n itself.
func (n *node) rel(name string) string { return filepath.Join(n.Path(nil), name) }

// abs returns the backing path of name in n.
func (n *node) abs(name string) string { return filepath.Join(n.fs.backing, n.rel(name)) }

// reserved reports whether name is the trash, which the mount must not show or touch.
func (n *node) reserved(name string) bool { return name == trashName && n.IsRoot() }

// ino returns the backing inode number of name in n (of n for "").
func (n *node) ino(name string) (uint64, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Lstat(n.abs(name), &st); err != nil {
		return 0, fs.ToErrno(err)
	}
	return st.Ino, 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.ENOENT
	}
	return n.LoopbackNode.Lookup(ctx, name, out)
}

// created journals a new name in n, made durable by n's fsync.
func (n *node) created(dir uint64, name string) {
	n.fs.j.ns = append(n.fs.j.ns, &nsOp{kind: nsCreate, dirs: [2]uint64{dir, dir}, path: n.rel(name)})
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.reserved(name) {
		return nil, nil, 0, syscall.EPERM
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	dir, errno := n.ino("")
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The kernel sends CREATE when its cache says the name is free; it may be wrong.
	_, lerr := n.ino(name)
	existed := lerr == 0
	if existed && flags&syscall.O_TRUNC != 0 {
		if errno := n.fs.truncating(n.abs(name), -1, 0); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if !existed {
		n.created(dir, name)
	}
	f, errno := n.fs.wrap(fh)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.fs.handle(f, flags)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, h, fuseFlags, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.fs.mu.Lock()
		errno := n.fs.truncating(n.abs(""), -1, 0)
		if errno != 0 {
			n.fs.mu.Unlock()
			return nil, 0, errno
		}
		defer n.fs.mu.Unlock()
	}
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	f, errno := n.fs.wrap(fh)
	if errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_TRUNC == 0 {
		n.fs.mu.Lock()
		defer n.fs.mu.Unlock()
	}
	h, errno := n.fs.handle(f, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return h, fuseFlags, 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f, _ := fh.(*file)
	if f != nil {
		fh = f.lf
	}
	if size, ok := in.GetSize(); ok {
		n.fs.mu.Lock()
		defer n.fs.mu.Unlock()
		fd := -1
		if f != nil {
			fd = f.fd
		}
		if errno := n.fs.truncating(n.abs(""), fd, int64(size)); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// create runs one of the loopback's entry-creating calls (mkdir, mknod, symlink, link)
// under the journal's lock and, when it succeeded, records name as a new entry of this
// directory: not durable until the directory is fsynced.
func (n *node) create(name string, mk func() (*fs.Inode, syscall.Errno)) (*fs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EPERM
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	dir, errno := n.ino("")
	if errno != 0 {
		return nil, errno
	}
	ch, errno := mk()
	if errno == 0 {
		n.created(dir, name)
	}
	return ch, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mkdir(ctx, name, mode, out) })
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out) })
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Symlink(ctx, target, name, out) })
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Link(ctx, target, name, out) })
}

// keep makes what is at abs recoverable after it is unlinked or replaced: a file gets a
// hard link in the trash, a directory (necessarily empty) is remembered by its mode and
// owner.
func (f *FS) keep(abs string) (*removed, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return &removed{mode: st.Mode & 0o7777, uid: int(st.Uid), gid: int(st.Gid)}, 0
	}
	f.j.seq++
	trash := filepath.Join(f.trash, fmt.Sprint(f.j.seq))
	if err := unix.Linkat(unix.AT_FDCWD, abs, unix.AT_FDCWD, trash, 0); err != nil {
		return nil, fs.ToErrno(err)
	}
	return &removed{trash: trash}, 0
}

// discard drops a keep whose removal did not happen.
func (r *removed) discard() {
	if r != nil && r.trash != "" {
		_ = os.Remove(r.trash)
	}
}

func (n *node) remove(ctx context.Context, name string, rm func(context.Context, string) syscall.Errno) syscall.Errno {
	if n.reserved(name) {
		return syscall.EPERM
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	dir, errno := n.ino("")
	if errno != 0 {
		return errno
	}
	r, errno := n.fs.keep(n.abs(name))
	if errno != 0 {
		return errno
	}
	if errno := rm(ctx, name); errno != 0 {
		r.discard()
		return errno
	}
	n.fs.j.ns = append(n.fs.j.ns, &nsOp{kind: nsRemove, dirs: [2]uint64{dir, dir}, path: n.rel(name), replaced: r})
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, n.LoopbackNode.Unlink)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, n.LoopbackNode.Rmdir)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if n.reserved(name) || np.reserved(newName) {
		return syscall.EPERM
	}
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return syscall.EINVAL
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	src, errno := n.ino("")
	if errno != 0 {
		return errno
	}
	dst, errno := np.ino("")
	if errno != 0 {
		return errno
	}
	op := &nsOp{kind: nsRename, dirs: [2]uint64{src, dst}, path: n.rel(name), to: np.rel(newName)}
	from, errno := n.ino(name)
	if errno != 0 {
		return errno
	}
	to, errno := np.ino(newName)
	switch {
	case errno == syscall.ENOENT:
	case errno != 0:
		return errno
	case from == to:
		// Two names of one file: rename does nothing.
		return n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags)
	case flags&unix.RENAME_EXCHANGE != 0:
		op.kind = nsExchange
	case flags&unix.RENAME_NOREPLACE == 0:
		if op.replaced, errno = n.fs.keep(np.abs(newName)); errno != 0 {
			return errno
		}
	}
	if errno := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); errno != 0 {
		op.replaced.discard()
		return errno
	}
	n.fs.j.ns = append(n.fs.j.ns, op)
	return 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.abs(""))
	if errno != 0 {
		return nil, 0, errno
	}
	d := &dirHandle{n: n, hide: n.IsRoot()}
	if d.rd, _ = ds.(fs.FileReaddirenter); d.rd == nil {
		ds.Close()
		return nil, 0, syscall.ENOTSUP
	}
	d.inner = ds
	n.fs.open.Add(1)
	return d, 0, 0
}

// truncating journals a truncation of the file at abs (through descriptor fd if not -1)
// to size; size -1 means 0 from an O_TRUNC open. The caller holds FS.mu.
func (f *FS) truncating(abs string, fd int, size int64) syscall.Errno {
	size = max(size, 0)
	var st syscall.Stat_t
	var err error
	if fd >= 0 {
		err = syscall.Fstat(fd, &st)
	} else {
		err = syscall.Stat(abs, &st)
	}
	if err != nil {
		return fs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size == size {
		return 0
	}
	l, err := f.j.log(st.Ino, func() (int, error) {
		if fd >= 0 {
			return reopen(fd)
		}
		return unix.Open(abs, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	})
	if err != nil {
		return fs.ToErrno(err)
	}
	return fs.ToErrno(l.change(size, 0, size, false))
}

// reopen opens the file of descriptor fd again, read-write, whatever fd's own mode:
// undoing needs to read old bytes and write them back.
func reopen(fd int) (int, error) {
	return unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
}

// file is an open file whose changes are journaled. It wraps the go-fuse loopback file
// and deliberately does not offer kernel passthrough or copy_file_range, which would let
// writes bypass the journal; appendFile offers passthrough where only appends can pass.
type file struct {
	fs  *FS
	lf  *fs.LoopbackFile
	fd  int
	ino uint64
}

func (f *FS) wrap(fh fs.FileHandle) (*file, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, syscall.EIO
	}
	fd, ok := lf.PassthroughFd() // the descriptor itself, valid until Release
	if !ok {
		lf.Release(context.Background())
		return nil, syscall.EBADF
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	f.open.Add(1)
	return &file{fs: f, lf: lf, fd: fd, ino: st.Ino}, 0
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.writes++
	l, err := f.fs.j.log(f.ino, func() (int, error) { return reopen(f.fd) })
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	if err := l.change(off, int64(len(data)), -1, true); err != nil {
		return 0, fs.ToErrno(err)
	}
	return f.lf.Write(ctx, data, off)
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	l, err := f.fs.j.log(f.ino, func() (int, error) { return reopen(f.fd) })
	if err != nil {
		return fs.ToErrno(err)
	}
	if err := l.change(int64(off), int64(size), -1, false); err != nil {
		return fs.ToErrno(err)
	}
	return f.lf.Allocate(ctx, off, size, mode)
}

// Fsync, and fdatasync alike, make the file's content durable.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.fsyncs++
	f.fs.j.commitData(f.ino)
	f.fs.hmu.Lock()
	defer f.fs.hmu.Unlock()
	if open := f.fs.appending[f.ino]; len(open) > 0 {
		if err := f.fs.j.appendBase(f.ino, open[0].fd); err != nil {
			return fs.ToErrno(err)
		}
	}
	if f.fs.opts.Entries == Ordered {
		f.fs.j.commitAll()
	}
	if f.fs.opts.SyncBacking {
		return f.lf.Fsync(ctx, flags)
	}
	return 0
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.lf.Flush(ctx) }

func (f *file) Release(ctx context.Context) syscall.Errno {
	defer f.fs.open.Add(-1)
	f.fs.hmu.Lock()
	if f.fs.opened[f.ino]--; f.fs.opened[f.ino] <= 0 {
		delete(f.fs.opened, f.ino)
	}
	f.fs.hmu.Unlock()
	return f.lf.Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

// handle returns the handle to give the kernel for f, opened with flags. A descriptor
// that can only append (O_APPEND with write access) gets a handle that offers the
// kernel passthrough, after journaling the size its appends are cut back to, unless
// the file is open otherwise already (the kernel does not mix passthrough with its page
// cache on one inode): then it is journaled write by write like any other. Once a file
// has passthrough descriptors, every later open of it must pass through too: a
// read-only one does; one that could overwrite is refused with ETXTBSY, since its
// writes would escape the journal (Options.NoPassthrough lifts this), and f is released.
// The caller holds fsys.mu.
func (fsys *FS) handle(f *file, flags uint32) (fs.FileHandle, syscall.Errno) {
	fsys.hmu.Lock()
	defer fsys.hmu.Unlock()
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY
	appendOnly := flags&syscall.O_APPEND != 0 && !readOnly
	var passing, others int
	count := func() {
		passing = len(fsys.appending[f.ino])
		others = fsys.opened[f.ino] - passing
	}
	passes := func() bool { return appendOnly && !fsys.opts.NoPassthrough && others == 0 }
	count()
	// The kernel sends the release of a closed descriptor after close has returned: a
	// program that closes its last appending descriptor and opens the file to
	// overwrite it can be here before that release. Such an open (the switch's last
	// case) waits for releases a moment, the lock let go meanwhile, and is refused
	// only if passthrough descriptors are still open then.
	for deadline := time.Now().Add(releaseWait); passing > 0 && !readOnly && !passes() && time.Now().Before(deadline); {
		fsys.hmu.Unlock()
		time.Sleep(2 * time.Millisecond)
		fsys.hmu.Lock()
		count()
	}
	switch {
	case passes():
		if err := fsys.j.appendBase(f.ino, f.fd); err != nil {
			break
		}
		fsys.opened[f.ino]++
		fsys.appending[f.ino] = append(fsys.appending[f.ino], f)
		return &appendFile{f}, 0
	case passing > 0 && readOnly:
		fsys.opened[f.ino]++
		return &readFile{f}, 0
	case passing > 0:
		// Refused: give back the descriptor wrap opened and counted.
		f.lf.Release(context.Background())
		fsys.open.Add(-1)
		return nil, syscall.ETXTBSY
	}
	fsys.opened[f.ino]++
	return f, 0
}

// releaseWait is how long an open that passthrough descriptors would refuse waits for
// their releases, which the kernel sends after close has returned.
const releaseWait = time.Second

// readFile is a read-only descriptor of a file that has passthrough descriptors open:
// it passes through as well, as the kernel requires.
type readFile struct{ *file }

// PassthroughFd offers the backing descriptor to the kernel for passthrough.
func (r *readFile) PassthroughFd() (int, bool) { return r.fd, true }

// appendFile is a file open for appending only, whose writes the kernel may pass
// through to the backing file (see the package's Design).
type appendFile struct{ *file }

// PassthroughFd offers the backing descriptor to the kernel for passthrough.
func (a *appendFile) PassthroughFd() (int, bool) { return a.fd, true }

func (a *appendFile) Release(ctx context.Context) syscall.Errno {
	a.fs.hmu.Lock()
	open := a.fs.appending[a.ino]
	if i := slices.Index(open, a.file); i >= 0 {
		open = slices.Delete(open, i, i+1)
	}
	if len(open) == 0 {
		delete(a.fs.appending, a.ino)
	} else {
		a.fs.appending[a.ino] = open
	}
	a.fs.hmu.Unlock()
	return a.file.Release(ctx)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

// dirHandle is an open directory: its fsync makes its entries durable. The root's listing
// hides the trash.
type dirHandle struct {
	n     *node
	hide  bool
	inner fs.DirStream
	rd    fs.FileReaddirenter
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	for {
		de, errno := d.rd.Readdirent(ctx)
		if errno != 0 || de == nil || !d.hide || de.Name != trashName {
			return de, errno
		}
	}
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	defer d.n.fs.open.Add(-1)
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
		return
	}
	d.inner.Close()
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	f := d.n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dsyncs++
	ino, errno := d.n.ino("")
	if errno != 0 {
		return errno
	}
	if f.opts.Entries == Ordered {
		f.j.commitAll()
	} else {
		f.j.commitDir(ino)
	}
	if f.opts.SyncBacking {
		if s, ok := d.inner.(fs.FileFsyncdirer); ok {
			return s.Fsyncdir(ctx, flags)
		}
	}
	return 0
}
