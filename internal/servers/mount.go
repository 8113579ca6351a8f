package servers

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A launched server can keep its data directory on a filesystem of its own, mounted in
// its temporary directory (the DataFS option of the launchers): package powerloss
// mounts powerfs there, so that a power loss can be simulated.
//
// The mount lives in the launch's temporary directory: "fs.backing" holds the files,
// "fs" is the mountpoint, and only the data directory is under it. The server's working
// directory, its binary, its log and its configuration stay off the mount: a child that
// touches the mount between fork and exec can deadlock the process that serves it (see
// package powerfs). What the launcher writes before the server starts (an initdb'd
// cluster, Redis's empty AOF directory) is made in the backing directory before the
// mount, so it counts as durable, as on a machine that was set up and rebooted before
// the test.

// Mounter mounts the filesystem a launched server keeps its data directory on (the
// DataFS option of the launchers; powerloss.FS is the one indoubt has). The launcher
// makes the server's first files in backing, then calls Mount, which makes them appear
// at mountpoint, where the server works from then on. A Mounter is asked once per
// launch.
type Mounter interface {
	Mount(backing, mountpoint string) (Mount, error)
}

// Mount is a mounted filesystem. The server's Stop (and a failed start) unmounts it
// before the server's directories are removed.
type Mount interface {
	Unmount() error
}

// MountDirs makes the backing directory of a Mounter and its mountpoint in the
// server's temporary directory dir ("fs.backing" and "fs") and returns them; the
// backing directory belongs to acct, the server's account.
func MountDirs(dir string, acct Account) (backing, mountpoint string, err error) {
	backing, mountpoint = filepath.Join(dir, "fs.backing"), filepath.Join(dir, "fs")
	for _, d := range []string{backing, mountpoint} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", "", err
		}
	}
	// The mount's root takes the backing root's owner and mode; the server's account
	// must enter it, and root (this process) serves it.
	if err := acct.Own(backing); err != nil {
		return "", "", err
	}
	if err := os.Chmod(mountpoint, 0o755); err != nil {
		return "", "", err
	}
	return backing, mountpoint, nil
}

// MountData mounts m's filesystem from backing at mountpoint (made by MountDirs) for
// the server's data directory; Stop, or Abandon after a failed start, unmounts it.
func (s *Instance) MountData(m Mounter, backing, mountpoint string) error {
	f, err := m.Mount(backing, mountpoint)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	s.mount = f
	return nil
}

// DataMount returns the filesystem MountData mounted under the server's data
// directory, or nil when it has none.
func (s *Instance) DataMount() Mount { return s.mount }

// unmountUnder lazily unmounts every mount at or under dir (a leftover powerfs whose
// serving process died: any access would fail with ENOTCONN, and RemoveAll with it).
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	// Deepest first.
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
