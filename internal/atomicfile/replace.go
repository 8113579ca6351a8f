package atomicfile

import (
	"fmt"
	"os"
)

// Replace writes data to path with permissions perm, whole or not at all, as a new
// regular file in path's directory: a symbolic link at path is replaced, never
// followed (a report.html that a tampered run directory links to a file elsewhere, or
// to nowhere, does not write there), and so is a FIFO or a device. A directory at path
// is refused. On error the entry at path is untouched and no temporary file is left.
func Replace(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("write %s: is a directory", path)
	}
	return replace(path, path, data, perm)
}
