package powerfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// Appends through an O_APPEND descriptor go to the backing file by kernel passthrough,
// without a Write to powerfs; what was fsynced survives a power loss, and what was
// appended after the last fsync, on any of the file's descriptors, is cut off. With
// NoPassthrough the same appends come to Write, with the same durable result.
func TestAppendsPassThrough(t *testing.T) {
	for _, pass := range []bool{true, false} {
		name := "passthrough"
		if !pass {
			name = "journaled"
		}
		t.Run(name, func(t *testing.T) {
			f, mnt := mountT(t, &Options{NoPassthrough: !pass})
			path := filepath.Join(mnt, "log")
			head := pattern(5000, 'a')
			// Made as Redis makes its AOF: created for appending, written, fsynced,
			// its directory fsynced.
			log1, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			w0 := f.Stats().Writes
			if _, err := log1.Write(head); err != nil {
				t.Fatal(err)
			}
			if err := log1.Sync(); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt)
			log2, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			synced := pattern(3000, 'b')
			for _, chunk := range [][]byte{synced[:1000], synced[1000:]} {
				if _, err := log1.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			if err := log2.Sync(); err != nil { // any descriptor's fsync makes the file durable
				t.Fatal(err)
			}
			for i := range 20 {
				if _, err := log2.Write(pattern(700, byte('c'+i))); err != nil {
					t.Fatal(err)
				}
			}
			s := f.Stats()
			if s.PendingBytes != 20*700 || s.PendingFiles != 1 {
				t.Errorf("stats after 20 unsynced appends of 700 bytes: %+v", s)
			}
			if passed := s.Writes == w0; passed != pass {
				t.Errorf("%d write requests reached powerfs for 23 appends; passthrough wanted: %v", s.Writes-w0, pass)
			}
			log1.Close()
			log2.Close()
			powerLoss(t, f)
			checkContent(t, path, append(slices.Clone(head), synced...))
		})
	}
}

// A file opened for appending also meets other changes: overwrites and truncates
// through other descriptors, before, after or (journaled, without passthrough) while it
// is open for appending. The journal undoes them all in order with the appends. While
// appends pass through, the file can be read but not opened for overwriting: the kernel
// would let those writes escape the journal.
func TestAppendsAmongOtherChanges(t *testing.T) {
	for _, pass := range []bool{true, false} {
		f, mnt := mountT(t, &Options{NoPassthrough: !pass})
		path := filepath.Join(mnt, "log")
		head := pattern(9000, 'a')
		log, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Write(head); err != nil {
			t.Fatal(err)
		}
		if err := log.Sync(); err != nil {
			t.Fatal(err)
		}
		syncDir(t, mnt)
		appended := pattern(4000, 'x')
		if _, err := log.Write(appended); err != nil {
			t.Fatal(err)
		}
		if got := content(t, path); !bytes.Equal(got, append(slices.Clone(head), appended...)) {
			t.Errorf("passthrough %v: a reader sees %d bytes, want the head and the appends", pass, len(got))
		}
		rw, err := os.OpenFile(path, os.O_RDWR, 0)
		if pass {
			if !errors.Is(err, syscall.ETXTBSY) {
				t.Errorf("opening for overwrite while appends pass through: %v, want ETXTBSY", err)
			}
			if err == nil {
				rw.Close()
			}
		} else if err != nil {
			t.Errorf("opening for overwrite with NoPassthrough: %v", err)
		} else {
			if _, err := rw.WriteAt(pattern(10, 'W'), 9000); err != nil {
				t.Error(err)
			}
			rw.Close()
		}
		log.Close()
		modify(t, path, 0, false, func(fl *os.File) error {
			if _, err := fl.WriteAt(pattern(100, 'Q'), 50); err != nil {
				return err
			}
			return fl.Truncate(6000)
		})
		modify(t, path, os.O_APPEND, false, func(fl *os.File) error {
			_, err := fl.Write(pattern(2000, 'y'))
			return err
		})
		powerLoss(t, f)
		checkContent(t, path, head)
	}
}

// A torn power loss keeps a page-aligned prefix of what was appended since the last
// fsync: the durable content whole, then some pages of the growth, never a byte past
// a page boundary that was not whole.
func TestAppendsTear(t *testing.T) {
	f, mnt := mountT(t, nil)
	path := filepath.Join(mnt, "log")
	head := pattern(4096+100, 'a')
	tail := pattern(5*4096, 'T')
	kept := map[int]bool{}
	for seed := range uint64(16) {
		writeFile(t, path, head, true)
		syncDir(t, mnt)
		modify(t, path, os.O_APPEND, false, func(fl *os.File) error {
			_, err := fl.Write(tail)
			return err
		})
		if err := f.PowerLoss(PowerLossOptions{Tear: true, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		got := content(t, path)
		if len(got) < len(head) || !bytes.Equal(got[:len(head)], head) || !bytes.Equal(got[len(head):], tail[:len(got)-len(head)]) {
			t.Fatalf("seed %d: %d bytes kept, not the synced head and a prefix of the appends", seed, len(got))
		}
		if len(got) != len(head) && len(got) != len(head)+len(tail) && len(got)%4096 != 0 {
			t.Fatalf("seed %d: kept %d bytes, not at a page boundary", seed, len(got))
		}
		kept[len(got)] = true
	}
	if len(kept) < 3 {
		t.Errorf("16 seeds kept only lengths %v; want at least 3 different ones", kept)
	}
}
