// Package atomicfile writes a file whole or not at all, so that nothing half-written
// is ever presented as a result: a full disk, a crash or a kill leaves the file as it
// was before (or absent), never a truncated one.
//
// Write puts the data in a temporary file beside the target, fsyncs and closes it,
// renames it over the target and fsyncs the directory; a reader sees the old file or
// the new one. A target that is not a regular file (a device such as /dev/stdout, a
// FIFO) is written in place, as there is nothing to rename over; a symbolic link is
// followed, so that the file it names is the one replaced.
//
// Replace is Write for a path inside a directory that came from elsewhere (a run
// directory): a symbolic link at the name is replaced by a regular file, not
// followed, a FIFO or a device refused, and nothing outside the directory is written
// or created.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with permissions perm, whole or not at all. On error the
// target is untouched, no temporary file is left, and the error names path and the
// cause (no space left on device, permission denied).
func Write(path string, data []byte, perm os.FileMode) error {
	target, special, err := resolve(path)
	if err != nil {
		return err
	}
	if special {
		return writeInPlace(target, data, perm)
	}
	return replace(path, target, data, perm)
}

// replace writes data to a temporary file beside target and renames it over target;
// errors name path.
func replace(path, target string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fail(path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fail(path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(path, err)
	}
	if err := f.Sync(); err != nil {
		return fail(path, err)
	}
	if err := f.Close(); err != nil {
		return fail(path, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fail(path, err)
	}
	ok = true
	if err := SyncDir(dir); err != nil {
		return fail(path, err)
	}
	return nil
}

// SyncDir fsyncs directory dir, so that the entries renamed or created in it survive a
// crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// resolve follows path's symbolic links and reports whether what it names exists and
// is not a regular file.
func resolve(path string) (string, bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, false, nil
	case err != nil:
		return "", false, fail(path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := filepath.EvalSymlinks(path)
		if errors.Is(err, fs.ErrNotExist) {
			// A dangling link: write the file it names.
			link, lerr := os.Readlink(path)
			if lerr != nil {
				return "", false, fail(path, lerr)
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(path), link)
			}
			return link, false, nil
		}
		if err != nil {
			return "", false, fail(path, err)
		}
		fi, err = os.Stat(target)
		if err != nil {
			return "", false, fail(path, err)
		}
		return target, !fi.Mode().IsRegular(), nil
	case fi.IsDir():
		return "", false, fmt.Errorf("write %s: is a directory", path)
	}
	return path, !fi.Mode().IsRegular(), nil
}

func writeInPlace(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return fail(path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(path, err)
	}
	return nil
}

// fail names path and the cause of err, without the temporary file's name.
func fail(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return &fs.PathError{Op: "write", Path: path, Err: err}
}
