package main

import (
	"path/filepath"
)

// absPaths makes each non-empty path absolute, in place.
func absPaths(paths ...*string) error {
	for _, p := range paths {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}
