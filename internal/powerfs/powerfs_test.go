package powerfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountT mounts a powerfs on a fresh backing directory and unmounts it when the test
// ends, failed or not. Without FUSE the test is skipped, unless CI=true.
func mountT(t testing.TB, opts *Options) (*FS, string) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	base := t.TempDir()
	// Servers run as an unprivileged user, which must reach the mountpoint.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	backing, mnt := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
		if err := unix.Statfs(mnt, &unix.Statfs_t{}); err == nil {
			var st, parent unix.Stat_t
			if unix.Stat(mnt, &st) == nil && unix.Stat(base, &parent) == nil && st.Dev != parent.Dev {
				t.Errorf("%s is still a mount after Unmount", mnt)
			}
		}
	})
	return f, mnt
}

func writeFile(t testing.TB, path string, data []byte, sync bool) {
	t.Helper()
	fl, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fl.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
}

// modify opens path read-write, runs do, fsyncs if asked, and closes it.
func modify(t testing.TB, path string, flags int, sync bool, do func(*os.File) error) {
	t.Helper()
	fl, err := os.OpenFile(path, os.O_RDWR|flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := do(fl); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fl.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t testing.TB, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// durableFile makes path exist, with data, durably.
func durableFile(t testing.TB, path string, data []byte) {
	t.Helper()
	writeFile(t, path, data, true)
	syncDir(t, filepath.Dir(path))
}

func powerLoss(t testing.TB, f *FS) {
	t.Helper()
	if err := f.PowerLoss(PowerLossOptions{}); err != nil {
		t.Fatal(err)
	}
}

// content returns the file's bytes, or nil if it does not exist.
func content(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}

func checkContent(t testing.TB, path string, want []byte) {
	t.Helper()
	got := content(t, path)
	switch {
	case want == nil && got != nil:
		t.Errorf("%s: exists with %d bytes, want it gone", filepath.Base(path), len(got))
	case want != nil && got == nil:
		t.Errorf("%s: gone, want %d bytes", filepath.Base(path), len(want))
	case !bytes.Equal(got, want):
		t.Errorf("%s: %d bytes %q..., want %d bytes %q...", filepath.Base(path), len(got), head(got), len(want), head(want))
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

func TestPowerLoss(t *testing.T) {
	old := pattern(3*4096+100, 'a')
	cases := []struct {
		name string
		// run changes the mount; check looks at it after the power loss.
		run, check func(t *testing.T, mnt string)
	}{
		{"synced data survive", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"unsynced overwrite reverts to the synced content", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			writeFile(t, filepath.Join(mnt, "f"), []byte("new"), false)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"append without fsync is lost", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), os.O_APPEND, false, func(f *os.File) error {
				_, err := f.Write(pattern(10000, 'z'))
				return err
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"append with fsync survives", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), os.O_APPEND, true, func(f *os.File) error {
				_, err := f.Write([]byte("tail"))
				return err
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), append(slices.Clone(old), "tail"...))
		}},
		{"overwrite in the middle is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, false, func(f *os.File) error {
				if _, err := f.WriteAt(pattern(5000, 'Q'), 3000); err != nil {
					return err
				}
				_, err := f.WriteAt([]byte("again"), 4000) // over the first unsynced write
				return err
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"sparse write past the end is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, false, func(f *os.File) error {
				_, err := f.WriteAt([]byte("far"), 1<<20)
				return err
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"synced sparse write survives with its hole", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, true, func(f *os.File) error {
				_, err := f.WriteAt([]byte("far"), 1<<20)
				return err
			})
		}, func(t *testing.T, mnt string) {
			want := make([]byte, 1<<20+3)
			copy(want, old)
			copy(want[1<<20:], "far")
			checkContent(t, filepath.Join(mnt, "f"), want)
		}},
		{"truncate shorter without fsync is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			if err := os.Truncate(filepath.Join(mnt, "f"), 10); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"truncate longer then write, without fsync, is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, false, func(f *os.File) error {
				if err := f.Truncate(100000); err != nil {
					return err
				}
				_, err := f.WriteAt([]byte("x"), 50000)
				return err
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"truncate with fsync survives", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, true, func(f *os.File) error { return f.Truncate(10) })
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old[:10])
		}},
		{"O_TRUNC reopen and rewrite without fsync is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			writeFile(t, filepath.Join(mnt, "f"), []byte("short"), false)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"O_TRUNC reopen and rewrite with fsync survives", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			writeFile(t, filepath.Join(mnt, "f"), []byte("short"), true)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), []byte("short"))
		}},
		{"fdatasync counts as fsync for data", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			modify(t, filepath.Join(mnt, "f"), 0, false, func(f *os.File) error {
				if _, err := f.WriteAt([]byte("DATA"), 0); err != nil {
					return err
				}
				return unix.Fdatasync(int(f.Fd()))
			})
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), append([]byte("DATA"), old[4:]...))
		}},
		{"new file synced but not its directory vanishes", func(t *testing.T, mnt string) {
			writeFile(t, filepath.Join(mnt, "new"), old, true)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "new"), nil)
		}},
		{"new file with its directory synced but not itself is empty", func(t *testing.T, mnt string) {
			writeFile(t, filepath.Join(mnt, "new"), old, false)
			syncDir(t, mnt)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "new"), []byte{})
		}},
		{"rename without directory fsync keeps the old name", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "a"), old)
			if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
				t.Fatal(err)
			}
			modify(t, filepath.Join(mnt, "b"), 0, true, func(*os.File) error { return nil })
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "a"), old)
			checkContent(t, filepath.Join(mnt, "b"), nil)
		}},
		{"rename with directory fsync takes the new name", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "a"), old)
			if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "a"), nil)
			checkContent(t, filepath.Join(mnt, "b"), old)
		}},
		{"rename over a file without directory fsync restores both", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "a"), old)
			durableFile(t, filepath.Join(mnt, "b"), []byte("bee"))
			// The atomic-replace idiom, missing its last step.
			writeFile(t, filepath.Join(mnt, "a.tmp"), []byte("next"), true)
			if err := os.Rename(filepath.Join(mnt, "a.tmp"), filepath.Join(mnt, "b")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "a"), old)
			checkContent(t, filepath.Join(mnt, "b"), []byte("bee"))
			checkContent(t, filepath.Join(mnt, "a.tmp"), nil)
		}},
		{"atomic replace with directory fsync survives", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "b"), []byte("bee"))
			writeFile(t, filepath.Join(mnt, "b.tmp"), []byte("next"), true)
			if err := os.Rename(filepath.Join(mnt, "b.tmp"), filepath.Join(mnt, "b")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "b"), []byte("next"))
			checkContent(t, filepath.Join(mnt, "b.tmp"), nil)
		}},
		{"rename into another directory is durable by the target's fsync", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			durableFile(t, filepath.Join(mnt, "a"), old) // also makes d durable
			if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "d", "a")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, filepath.Join(mnt, "d"))
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "a"), nil)
			checkContent(t, filepath.Join(mnt, "d", "a"), old)
		}},
		{"rename between directories is durable by the source's fsync too", func(t *testing.T, mnt string) {
			for _, d := range []string{"d1", "d2"} {
				if err := os.Mkdir(filepath.Join(mnt, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			syncDir(t, mnt)
			durableFile(t, filepath.Join(mnt, "d1", "a"), old)
			if err := os.Rename(filepath.Join(mnt, "d1", "a"), filepath.Join(mnt, "d2", "b")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, filepath.Join(mnt, "d1"))
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "d1", "a"), nil)
			checkContent(t, filepath.Join(mnt, "d2", "b"), old)
		}},
		{"a durable directory rename carries its children's pending changes", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			durableFile(t, filepath.Join(mnt, "d", "kept"), old) // d made durable too
			syncDir(t, mnt)
			writeFile(t, filepath.Join(mnt, "d", "new"), old, true) // its entry pending in d
			if err := os.Rename(filepath.Join(mnt, "d"), filepath.Join(mnt, "e")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "e", "kept"), old)
			checkContent(t, filepath.Join(mnt, "e", "new"), nil)
			if _, err := os.Stat(filepath.Join(mnt, "d")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat d: %v, want it gone", err)
			}
		}},
		{"an undone directory rename takes its children back", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			durableFile(t, filepath.Join(mnt, "d", "kept"), old)
			syncDir(t, mnt)
			if err := os.Rename(filepath.Join(mnt, "d"), filepath.Join(mnt, "e")); err != nil {
				t.Fatal(err)
			}
			durableFile(t, filepath.Join(mnt, "e", "new"), []byte("n")) // durable in the directory
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "d", "kept"), old)
			checkContent(t, filepath.Join(mnt, "d", "new"), []byte("n"))
			if _, err := os.Stat(filepath.Join(mnt, "e")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat e: %v, want it gone", err)
			}
		}},
		{"RENAME_EXCHANGE without directory fsync is undone", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "a"), []byte("A"))
			durableFile(t, filepath.Join(mnt, "b"), []byte("B"))
			err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(mnt, "a"), unix.AT_FDCWD, filepath.Join(mnt, "b"), unix.RENAME_EXCHANGE)
			if err != nil {
				t.Fatal(err)
			}
			checkContent(t, filepath.Join(mnt, "a"), []byte("B"))
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "a"), []byte("A"))
			checkContent(t, filepath.Join(mnt, "b"), []byte("B"))
		}},
		{"unlink without directory fsync brings the file back", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			if err := os.Remove(filepath.Join(mnt, "f")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"unlink after an unsynced write brings back the synced content", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			writeFile(t, filepath.Join(mnt, "f"), []byte("scribble"), false)
			if err := os.Remove(filepath.Join(mnt, "f")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
		{"unlink with directory fsync is durable", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			if err := os.Remove(filepath.Join(mnt, "f")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
		}, func(t *testing.T, mnt string) {
			checkContent(t, filepath.Join(mnt, "f"), nil)
		}},
		{"mkdir without parent fsync vanishes with its synced content", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o750); err != nil {
				t.Fatal(err)
			}
			durableFile(t, filepath.Join(mnt, "d", "f"), old)
		}, func(t *testing.T, mnt string) {
			if _, err := os.Stat(filepath.Join(mnt, "d")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat d: %v, want it gone", err)
			}
		}},
		{"mkdir with parent fsync survives", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o750); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
			durableFile(t, filepath.Join(mnt, "d", "f"), old)
		}, func(t *testing.T, mnt string) {
			fi, err := os.Stat(filepath.Join(mnt, "d"))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
				t.Errorf("stat d: %v %v, want a directory with mode 0750", fi, err)
			}
			checkContent(t, filepath.Join(mnt, "d", "f"), old)
		}},
		{"rmdir without parent fsync brings the directory back", func(t *testing.T, mnt string) {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o710); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
			if err := os.Remove(filepath.Join(mnt, "d")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			fi, err := os.Stat(filepath.Join(mnt, "d"))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o710 {
				t.Errorf("stat d: %v %v, want a directory with mode 0710", fi, err)
			}
		}},
		{"symlink and hard link follow their directory", func(t *testing.T, mnt string) {
			durableFile(t, filepath.Join(mnt, "f"), old)
			if err := os.Symlink("f", filepath.Join(mnt, "s")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(mnt, "f"), filepath.Join(mnt, "h")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, mnt string) {
			for _, name := range []string{"s", "h"} {
				if _, err := os.Lstat(filepath.Join(mnt, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("lstat %s: %v, want it gone", name, err)
				}
			}
			checkContent(t, filepath.Join(mnt, "f"), old)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, mnt := mountT(t, nil)
			c.run(t, mnt)
			powerLoss(t, f)
			c.check(t, mnt)
			if s := f.Stats(); s.PendingBytes != 0 || s.PendingEntries != 0 || s.PendingFiles != 0 {
				t.Errorf("after power loss: %+v, want nothing pending", s)
			}
			names, err := os.ReadDir(mnt)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range names {
				if e.Name() == trashName {
					t.Errorf("the mount lists %s", trashName)
				}
			}
		})
	}
}

// A power loss with tearing keeps, of an unsynced write, a prefix ending at a page
// boundary; the seed decides which, and the same seed decides the same.
func TestPowerLossTears(t *testing.T) {
	f, mnt := mountT(t, nil)
	path := filepath.Join(mnt, "f")
	old := pattern(4*4096, 'a')
	durableFile(t, path, old)
	upd := pattern(3*4096, 'N')
	const off = 2048 // not page-aligned: the kept prefixes end at 4096, 8192, 12288
	results := map[int]bool{}
	for seed := range uint64(24) {
		var got [2][]byte
		for i := range got {
			modify(t, path, 0, false, func(fl *os.File) error {
				_, err := fl.WriteAt(upd, off)
				return err
			})
			if err := f.PowerLoss(PowerLossOptions{Tear: true, Seed: seed}); err != nil {
				t.Fatal(err)
			}
			got[i] = content(t, path)
			writeFile(t, path, old, true) // back to the start, durably
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Fatalf("seed %d: two power losses kept different bytes", seed)
		}
		kept := -1
		for _, end := range []int{off, 4096, 8192, 12288, off + len(upd)} {
			want := slices.Clone(old)
			copy(want[off:end], upd)
			if bytes.Equal(got[0], want) {
				kept = end
			}
		}
		if kept < 0 {
			t.Fatalf("seed %d: kept bytes are no page-aligned prefix of the write", seed)
		}
		results[kept] = true
	}
	if len(results) < 3 {
		t.Errorf("24 seeds kept only prefixes ending at %v; want at least 3 different ones", results)
	}
}

func TestPowerLossRefusesOpenFiles(t *testing.T) {
	f, mnt := mountT(t, &Options{OpenWait: 50 * time.Millisecond})
	path := filepath.Join(mnt, "f")
	durableFile(t, path, []byte("synced"))
	fl, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	if _, err := fl.WriteAt([]byte("UNSYNC"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.PowerLoss(PowerLossOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("PowerLoss with an open file: %v, want ErrBusy", err)
	}
	if got := content(t, path); string(got) != "UNSYNC" {
		t.Errorf("after a refused power loss the file holds %q, want it unchanged", got)
	}
	if s := f.Stats(); s.PendingBytes != 6 || s.PendingFiles != 1 {
		t.Errorf("stats %+v, want 6 bytes in 1 file pending", s)
	}
	fl.Close()
	powerLoss(t, f)
	checkContent(t, path, []byte("synced"))
}

func TestStats(t *testing.T) {
	f, mnt := mountT(t, nil)
	path := filepath.Join(mnt, "f")
	writeFile(t, path, pattern(1000, 'a'), false)
	s := f.Stats()
	if s.PendingBytes != 1000 || s.PendingFiles != 1 || s.PendingEntries != 1 || s.Writes == 0 {
		t.Errorf("after an unsynced create and write: %+v", s)
	}
	modify(t, path, 0, true, func(fl *os.File) error {
		_, err := fl.WriteAt([]byte("xyz"), 10) // keeps 3 old bytes
		return err
	})
	syncDir(t, mnt)
	s = f.Stats()
	if s.PendingBytes != 0 || s.PendingFiles != 0 || s.PendingEntries != 0 || s.FileSyncs == 0 || s.DirSyncs == 0 {
		t.Errorf("after fsync of the file and its directory: %+v", s)
	}
}

func TestMountRefusesBadDirs(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if _, err := Mount(filepath.Join(dir, "nope"), dir, nil); err == nil {
		t.Fatal("Mount of a missing backing directory succeeded")
	}
	inner := filepath.Join(dir, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mnt := range []string{dir, inner} {
		if f, err := Mount(dir, mnt, nil); err == nil {
			f.Unmount()
			t.Errorf("Mount of %s on %s succeeded, want refused", dir, mnt)
		}
	}
}

// Under the Ordered rule any fsync commits the entry changes made before it, but not
// those made after, and data still needs its own file's fsync.
func TestOrderedEntries(t *testing.T) {
	f, mnt := mountT(t, &Options{Entries: Ordered})
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "d", "a"), []byte("synced"), true) // commits d and d/a
	if err := os.Rename(filepath.Join(mnt, "d", "a"), filepath.Join(mnt, "d", "b")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "other"), []byte("x"), true) // commits the rename too
	writeFile(t, filepath.Join(mnt, "late"), []byte("unsynced"), false)
	powerLoss(t, f)
	checkContent(t, filepath.Join(mnt, "d", "a"), nil)
	checkContent(t, filepath.Join(mnt, "d", "b"), []byte("synced"))
	checkContent(t, filepath.Join(mnt, "other"), []byte("x"))
	checkContent(t, filepath.Join(mnt, "late"), nil)
}

// Unmount with a file still open detaches the mount lazily instead of failing, and the
// backing directory keeps the current, unsynced, state: a clean shutdown.
func TestUnmountWhileBusyIsLazy(t *testing.T) {
	f, mnt := mountT(t, nil)
	path := filepath.Join(mnt, "f")
	writeFile(t, path, []byte("unsynced"), false)
	fl, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatalf("Unmount with a file open: %v", err)
	}
	fl.Close()
	if got := content(t, filepath.Join(f.Backing(), "f")); string(got) != "unsynced" {
		t.Errorf("backing file after Unmount holds %q, want the current content", got)
	}
	if _, err := os.Stat(filepath.Join(f.Backing(), trashName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trash after Unmount: %v, want it removed", err)
	}
	if err := f.PowerLoss(PowerLossOptions{}); err == nil {
		t.Error("PowerLoss after Unmount succeeded, want an error")
	}
}

// A server started while the mount is up must not inherit the FUSE connection: it would
// keep the connection alive after this process dies.
func TestFuseDescriptorClosesOnExec(t *testing.T) {
	mountT(t, nil)
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || target != "/dev/fuse" {
			continue
		}
		found++
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil {
			t.Fatal(err)
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("/dev/fuse descriptor %d is inherited by exec", fd)
		}
	}
	if found == 0 {
		t.Error("no /dev/fuse descriptor while mounted")
	}
}

// TestNoExtendedAttributes: extended attributes are refused as on a filesystem without
// them, and writes still work and are journaled (the kernel no longer asks for
// security.capability before each one).
func TestNoExtendedAttributes(t *testing.T) {
	f, mnt := mountT(t, nil)
	p := filepath.Join(mnt, "x")
	if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, "user.k", []byte("v"), 0); !errors.Is(err, unix.ENOTSUP) {
		t.Errorf("setxattr: got %v, want ENOTSUP", err)
	}
	if _, err := unix.Getxattr(p, "user.k", make([]byte, 16)); !errors.Is(err, unix.ENOTSUP) {
		t.Errorf("getxattr: got %v, want ENOTSUP", err)
	}
	if got := f.Stats().Writes; got < 1 {
		t.Errorf("writes journaled: %d, want at least 1", got)
	}
}
