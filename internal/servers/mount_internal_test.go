package servers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/powerfs"
)

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir+" ")
}

// A leftover directory with a powerfs still mounted in it is unmounted before it is
// removed: RemoveAll would fail on (or descend into) the mount.
func TestLeftoverRemoveUnmounts(t *testing.T) {
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "fs.backing"), filepath.Join(dir, "fs")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f, err := powerfs.Mount(backing, mnt, nil)
	if errors.Is(err, powerfs.ErrUnavailable) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("powerfs: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unmount()
	if !mounted(mnt) {
		t.Fatalf("%s is not in mountinfo after Mount", mnt)
	}
	if err := (Leftover{Dir: dir}).Remove(); err != nil {
		t.Fatal(err)
	}
	if mounted(mnt) {
		t.Errorf("%s still mounted after Remove", mnt)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Remove (%v)", dir, err)
	}
}
