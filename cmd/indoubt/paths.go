package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkDirWritable refuses an output directory that cannot be made or written: not a
// directory, or one whose nearest existing ancestor refuses a new file. It makes
// nothing that stays: the file it writes to find out is removed again.
func checkDirWritable(dir string) error {
	if dir == "" {
		return nil
	}
	at := filepath.Clean(dir)
	for {
		fi, err := os.Stat(at)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", at)
			}
			break
		}
		if !os.IsNotExist(err) {
			return err
		}
		parent := filepath.Dir(at)
		if parent == at {
			return err
		}
		at = parent
	}
	f, err := os.CreateTemp(at, ".indoubt-write-check-")
	if err != nil {
		return fmt.Errorf("%s: cannot write there: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
