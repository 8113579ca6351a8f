package postgres

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// withPrepared returns settings with max_prepared_transactions=n added when n is
// positive and settings do not name it already.
func withPrepared(settings map[string]string, n int) map[string]string {
	if n <= 0 {
		return settings
	}
	for name := range settings {
		if strings.EqualFold(name, "max_prepared_transactions") {
			return settings
		}
	}
	out := make(map[string]string, len(settings)+1)
	for k, v := range settings {
		out[k] = v
	}
	out["max_prepared_transactions"] = strconv.Itoa(n)
	return out
}

// StartMany starts n independent PostgreSQL servers with opt, concurrently (initdb
// dominates a start, and n of them in a row would take n times as long). When
// opt.LogPath is set, server i logs to that path with "-i" before its extension
// (postgres-0.log, postgres-1.log ...). On error every server already started is
// stopped and the first error is returned.
func StartMany(ctx context.Context, n int, opt Options) ([]*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("postgres: %d servers asked for, want at least 1", n)
	}
	out := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		o := opt
		if opt.LogPath != "" {
			ext := filepath.Ext(opt.LogPath)
			o.LogPath = strings.TrimSuffix(opt.LogPath, ext) + "-" + strconv.Itoa(i) + ext
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = Start(ctx, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, p := range out {
			if p != nil {
				_ = p.Stop()
			}
		}
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
	}
	return out, nil
}
