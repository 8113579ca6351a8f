package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	for _, data := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != data {
			t.Fatalf("read %q, want %q", b, data)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone", len(ents))
	}
}

func TestWriteFollowsLinksAndSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.html")
	link := filepath.Join(dir, "link.html")
	os.WriteFile(real, []byte("old"), 0o644)
	os.Symlink("real.html", link)
	if err := Write(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new" {
		t.Errorf("the link's target holds %q, want new", b)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file")
	}
	if err := Write(os.DevNull, []byte("x"), 0o644); err != nil {
		t.Errorf("write %s: %v", os.DevNull, err)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode().IsRegular() {
		t.Errorf("%s is no longer a device: %v", os.DevNull, err)
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		if err := Write("/dev/full", []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("write /dev/full: %v, want no space left on device", err)
		}
	}
	if err := Write(dir, []byte("x"), 0o644); err == nil {
		t.Errorf("wrote over a directory")
	}
	if err := Write(filepath.Join(dir, "no", "such", "dir.html"), []byte("x"), 0o644); err == nil {
		t.Errorf("wrote into a directory that does not exist")
	}
}

// On a full filesystem (a real tmpfs of 64 KiB, as root) a write that does not fit
// fails, names the file and the cause, and leaves the old file whole and no temporary
// file behind.
func TestWriteOnAFullDisk(t *testing.T) {
	dir := smallTmpfs(t, "64k")
	path := filepath.Join(dir, "report.html")
	if err := Write(path, []byte("the old report"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(path, bytes.Repeat([]byte("x"), 1<<20), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write of 1 MiB on 64 KiB: %v, want no space left on device", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "the old report" {
		t.Errorf("the old file holds %d bytes, want the old report whole", len(b))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want the old file alone", len(ents))
	}
}

// smallTmpfs mounts a tmpfs of size on a temporary directory, unmounted when the test
// ends; it skips the test when not root or when mount fails.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
