package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/servers"
)

const cleanHelp = `indoubt clean: remove what killed runs and launched servers left behind.

A launched server lives in a temporary directory (indoubt-postgres-PID-...,
indoubt-redis-PID-..., ...) that indoubt removes when it stops the server. When indoubt
itself is killed (SIGKILL, a crash) the server dies with it but the directory stays;
the next launch removes such directories, and clean does it now. Only directories
whose launching process is gone are touched; a server process still running from one
(its parent-death signal failed) is killed first. Directories kept on purpose (Keep)
are removed too. So are the network namespaces of a topology launched with --network
isolated (indoubt-PID-...: its nodes, their nftables rules, the bridge and its veths)
whose process is gone, with any process still running in them.

A run writes its directory as --out/.NAME.partial and renames it NAME when complete; a
run killed before that leaves the hidden .partial directory, which no reader takes for
a result. clean removes those of indoubt's own runs whose process is gone (each holds
a marker naming its process and start time) from --out (default: runs, when it
exists); a live run's, and any other directory, are left alone.

Usage: indoubt clean [--dry-run] [--dir DIR] [--out DIR]

Example:
  indoubt clean --dry-run     # list only
  indoubt clean
  indoubt clean --out /data/runs
`

func cleanCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("clean", cleanHelp, stdout)
	dryRun := fs.Bool("dry-run", false, "list what would be removed, remove nothing")
	dir := fs.String("dir", "", "the parent directory of the servers' directories (default: the system's temporary directory)")
	out := fs.String("out", "", "the runs directory whose killed runs' .partial directories to remove (default: runs, when it exists)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("clean: unexpected argument %q (see indoubt clean --help)", fs.Arg(0))
	}
	// Resolved first: a server of a leftover is known by the absolute path it works
	// in, and a relative --dir matched none (the directory was removed, its server left
	// running in it).
	if err := absPaths(dir, out); err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	left, err := servers.FindLeftovers(*dir)
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	runs := *out
	if runs == "" {
		if fi, err := os.Stat("runs"); err == nil && fi.IsDir() {
			runs = "runs"
		}
	}
	if runs != "" {
		partial, err := servers.FindLeftovers(runs)
		if err != nil {
			return fmt.Errorf("clean: --out: %w", err)
		}
		for _, l := range partial {
			// Only unpublished runs: the servers' directories are --dir's.
			if strings.HasSuffix(filepath.Base(l.Dir), ".partial") && !slices.ContainsFunc(left, func(o servers.Leftover) bool { return o.Dir == l.Dir }) {
				left = append(left, l)
			}
		}
	}
	nets, err := netns.FindLeftovers()
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	if len(left) == 0 && len(nets) == 0 {
		fmt.Fprintln(stdout, "nothing to clean")
		return nil
	}
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	var errs []error
	for _, l := range nets {
		if !*dryRun {
			if err := l.Remove(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		fmt.Fprintf(stdout, "%s %s\n", verb, l)
	}
	for _, l := range left {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("clean: %w", err)
		}
		what := fmt.Sprintf("%s (%s, launched by gone pid %d", l.Dir, byteSize(l.Bytes), l.Owner)
		if strings.HasSuffix(filepath.Base(l.Dir), ".partial") {
			what = fmt.Sprintf("%s (%s, an unfinished run of gone pid %d", l.Dir, byteSize(l.Bytes), l.Owner)
		}
		if l.Kept {
			what += ", kept"
		}
		if l.Server > 0 {
			what += fmt.Sprintf(", server pid %d still running", l.Server)
		}
		what += ")"
		if !*dryRun {
			if err := l.Remove(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		console.Fprintf(stdout, "%s %s\n", verb, what)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	return nil
}

// byteSize renders a byte count for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
