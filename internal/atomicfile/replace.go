package atomicfile

import (
	"fmt"
	"os"
)

// Replace writes data to path with permissions perm, whole or not at all, as a new
// regular file in path's directory: a symbolic link at path is replaced, never
// followed (a report.html that a tampered run directory links to a file elsewhere, or
// to nowhere, does not write there). A directory, a FIFO or a device at path is
// refused. On error the entry at path is untouched and no temporary file is left.
func Replace(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		// A directory, a FIFO, a device: not a file a run directory holds, and not
		// one to rename over (/dev/full).
		return fmt.Errorf("write %s: not a regular file", path)
	}
	return replace(path, path, data, perm)
}
