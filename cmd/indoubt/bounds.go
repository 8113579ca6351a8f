package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// maxRunTime bounds --time (and a suite case's time): a run of more than a week is a
// typo (1000000h, 114 years, was taken), and the run clock's nanoseconds must hold
// every time of its history with room to spare.
const maxRunTime = 7 * 24 * time.Hour

// checkRunTime refuses a run time above maxRunTime; what names it is flag.
func checkRunTime(what string, d time.Duration) error {
	if d > maxRunTime {
		return fmt.Errorf("%s %v is longer than %v: a run that long is a typo; split it into runs", what, d, maxRunTime)
	}
	return nil
}

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
