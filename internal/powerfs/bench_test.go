package powerfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeFsyncLoop appends n blocks of 4 KiB to a new file in dir, fsyncing after each, as
// a log with synchronous commits does, and returns the time it took.
func writeFsyncLoop(tb testing.TB, dir string, n int) time.Duration {
	return writeLoop(tb, dir, n, true)
}

// writeLoop appends n blocks of 4 KiB to a new file in dir, with an fsync after each if
// sync, and returns the time it took.
func writeLoop(tb testing.TB, dir string, n int, sync bool) time.Duration {
	tb.Helper()
	fl, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(fl.Name())
	defer fl.Close()
	block := pattern(4096, 'b')
	t0 := time.Now()
	for range n {
		if _, err := fl.Write(block); err != nil {
			tb.Fatal(err)
		}
		if !sync {
			continue
		}
		if err := fl.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	return time.Since(t0)
}

// BenchmarkWriteFsync measures a 4 KiB write+fsync loop on powerfs, and the same loop on
// the plain backing directory in the same run; "plain/powerfs" is the throughput of
// powerfs relative to the plain directory (1 = as fast, 0.5 = half as fast).
func BenchmarkWriteFsync(b *testing.B) {
	for _, c := range []struct {
		name string
		opts Options
	}{{"fsync-simulated", Options{}}, {"fsync-forwarded", Options{SyncBacking: true}}} {
		b.Run(c.name, func(b *testing.B) {
			f, mnt := mountT(b, &c.opts)
			b.ResetTimer()
			onFS := writeFsyncLoop(b, mnt, b.N)
			b.StopTimer()
			plain := writeFsyncLoop(b, f.Backing(), b.N)
			b.ReportMetric(float64(plain)/float64(onFS), "plain/powerfs")
			b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
		})
	}
}

// BenchmarkWrite measures 4 KiB appends without fsync, the cost of the FUSE round trip
// and the undo log alone, against the plain backing directory in the same run.
func BenchmarkWrite(b *testing.B) {
	f, mnt := mountT(b, nil)
	b.ResetTimer()
	onFS := writeLoop(b, mnt, b.N, false)
	b.StopTimer()
	plain := writeLoop(b, f.Backing(), b.N, false)
	b.ReportMetric(float64(plain)/float64(onFS), "plain/powerfs")
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
}
