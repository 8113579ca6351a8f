package servers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ReachableCopy returns the path of a copy of src, a file or a directory tree, that
// acct can reach: the scripts that prepare a server unpack or build it into the
// caller's cache, which under root's home the unprivileged server account cannot enter.
// The copy is made once, under the system's temporary directory (indoubt-NAME-uidN,
// name saying what and which version), by the caller and writable by it alone, and is
// trusted only while it still is so; a copy another process placed first is as good.
func ReachableCopy(src, name string, acct Account) (string, error) {
	dest := filepath.Join(os.TempDir(), fmt.Sprintf("indoubt-%s-uid%d", name, os.Geteuid()))
	copied := filepath.Join(dest, filepath.Base(src))
	if err := trustedCopy(dest); err == nil {
		return copied, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("copy of %s: %w", src, err)
	}
	tmp, err := os.MkdirTemp(os.TempDir(), ".indoubt-"+name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("cp", "-a", src, tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s where %s can reach it: %v: %s", src, acct.Name, err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("chmod", "-R", "go-w,a+rX", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chmod copy of %s: %v: %s", src, err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(filepath.Join(tmp, "complete"), []byte(src+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dest); err != nil && trustedCopy(dest) != nil {
		return "", fmt.Errorf("place copy of %s: %w", src, err)
	}
	if err := acct.CheckReach(dest); err != nil {
		return "", err
	}
	return copied, nil
}

// trustedCopy returns nil when dest is a complete copy that only the caller could have
// written, os.ErrNotExist when there is none, and an error when something else is there.
func trustedCopy(dest string) error {
	fi, err := os.Lstat(dest)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s exists and is not a directory written only by uid %d: remove it", dest, os.Geteuid())
	}
	if _, err := os.Stat(filepath.Join(dest, "complete")); err != nil {
		return fmt.Errorf("%s is incomplete: remove it", dest)
	}
	return nil
}
