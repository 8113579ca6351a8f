// Package ferret launches FerretDB, a MongoDB-wire server written in Go, inside the
// process. It is apart from package servers so that a binary that launches PostgreSQL or
// Redis links neither FerretDB nor its SQLite, MySQL and MongoDB packages.
package ferret

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"

	"github.com/indoubt/indoubt/internal/servers"
)

// FerretDB handlers (storage backends) for Options.
const (
	SQLite     = "sqlite"
	PostgreSQL = "postgresql"
)

// Version is the FerretDB release linked into this binary.
const Version = "1.24.2"

// Options configures Start. The zero value is ready to use: SQLite
// storage in a temporary directory.
type Options struct {
	// PostgreSQLURL, when set, stores the data in that PostgreSQL database (handler
	// "postgresql") instead of SQLite. The database must exist.
	PostgreSQLURL string
	// Dir is the parent of the temporary directory (SQLite files and the log); ""
	// means os.TempDir().
	Dir string
	// Keep leaves the temporary directory in place after Stop, or after a failed start.
	Keep bool
	// LogPath, if set, is where FerretDB's log goes (appended to, never removed). ""
	// means ferretdb.log in the temporary directory.
	LogPath string
	// LogLevel is the least level logged; the zero value is slog.LevelInfo. FerretDB
	// logs each connection at info and each broken one at warn.
	LogLevel slog.Level
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
}

// FerretDB is a FerretDB server running inside this process, speaking the MongoDB wire
// protocol on a loopback port. Its fields are read-only. Stop ends it.
type FerretDB struct {
	Addr    string // "127.0.0.1:PORT"
	Port    int
	URI     string // "mongodb://127.0.0.1:PORT/"
	Handler string // SQLite or PostgreSQL
	Dir     string // the temporary directory: SQLite files (with the sqlite handler) and the log
	LogPath string

	cancel context.CancelFunc
	done   chan error

	keep     bool
	log      *os.File
	stopOnce sync.Once
	stopErr  error
}

// How long Stop waits for FerretDB to close its connections and its backend. FerretDB
// itself gives connected clients a few seconds to leave.
const ferretStopGrace = 15 * time.Second

// Start starts FerretDB in this process on a free port of 127.0.0.1 and returns
// once it accepts connections. ctx bounds the startup only: once started, the server runs
// until Stop. On error nothing is left running and, unless opt.Keep, nothing is left on
// disk. FerretDB is linked in, so it is never missing.
func Start(ctx context.Context, opt Options) (*FerretDB, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ferretdb: %w", err)
	}
	f := &FerretDB{LogPath: opt.LogPath, Handler: SQLite, keep: opt.Keep}
	dir, err := f.makeTempDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	f.Dir = dir
	if opt.PostgreSQLURL != "" {
		f.Handler = PostgreSQL
	}
	if f.LogPath == "" {
		f.LogPath = filepath.Join(dir, "ferretdb.log")
	}
	if err := f.start(ctx, opt); err != nil {
		return nil, f.abandon(err)
	}
	return f, nil
}

func (f *FerretDB) start(ctx context.Context, opt Options) error {
	t0 := time.Now()
	if err := f.openLog(f.LogPath); err != nil {
		return err
	}
	cfg := &ferretdb.Config{
		// Port 0: the kernel picks a free port while FerretDB binds, so no race.
		Listener: ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:   slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: opt.LogLevel})),
		Handler:  f.Handler,
	}
	if f.Handler == PostgreSQL {
		cfg.PostgreSQLURL = opt.PostgreSQLURL
	} else {
		// A directory URI: FerretDB keeps one SQLite file per database in it.
		cfg.SQLiteURL = (&url.URL{Scheme: "file", Opaque: f.Dir + "/"}).String()
	}
	// New binds the listener; Run serves until its context ends.
	srv, err := ferretdb.New(cfg)
	if err != nil {
		return fmt.Errorf("ferretdb: %w", redactURL(err, opt.PostgreSQLURL))
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := srv.Run(runCtx)
		close(exited)
		f.done <- err
	}()
	u, err := url.Parse(srv.MongoDBURI())
	if err != nil {
		f.halt()
		return fmt.Errorf("ferretdb: uri: %w", err)
	}
	f.Addr = u.Host
	_, port, err := net.SplitHostPort(f.Addr)
	if err == nil {
		f.Port, err = strconv.Atoi(port)
	}
	if err != nil {
		f.halt()
		return fmt.Errorf("ferretdb: address %q: %w", f.Addr, err)
	}
	f.URI = "mongodb://" + f.Addr + "/"
	if err := servers.WaitTCP(ctx, f.Addr, exited); err != nil {
		f.halt()
		return fmt.Errorf("ferretdb: %w", err)
	}
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, "ferretdb: %s (%s) ready on %s in %v\n", Version, f.Handler, f.Addr, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// redactURL removes the PostgreSQL URL (it may hold a password) from err's text.
func redactURL(err error, pgURL string) error {
	if pgURL == "" {
		return err
	}
	u, perr := url.Parse(pgURL)
	if perr != nil || u.User == nil {
		return err
	}
	if _, has := u.User.Password(); !has {
		return err
	}
	return errors.New("start with the postgresql handler failed (error text withheld: it may hold the URL's password)")
}

// halt stops Run and waits for it, within the grace period.
func (f *FerretDB) halt() error {
	f.cancel()
	select {
	case err := <-f.done:
		return err
	case <-time.After(ferretStopGrace):
		return fmt.Errorf("ferretdb did not stop within %v", ferretStopGrace)
	}
}

// Stop closes the listener and every connection, waits for FerretDB to close its backend
// (up to 15 s, after the few seconds FerretDB gives connected clients), then removes the
// temporary directory unless Keep was set. Close clients first for a quick stop. It may
// be called more than once and concurrently; every call returns the first one's result.
func (f *FerretDB) Stop() error {
	f.stopOnce.Do(func() { f.stopErr = errors.Join(f.halt(), f.cleanup()) })
	return f.stopErr
}

// makeTempDir makes the server's temporary directory under parent ("" means
// os.TempDir()), marked as this process's so that it is reaped should the process die,
// and returns its absolute path.
func (f *FerretDB) makeTempDir(parent string) (string, error) {
	dir, err := servers.MakeOwnedTempDir(parent, "ferretdb")
	if err != nil {
		return "", fmt.Errorf("ferretdb: %w", err)
	}
	return dir, nil
}

func (f *FerretDB) openLog(path string) error {
	log, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ferretdb: log: %w", err)
	}
	f.log = log
	return nil
}

// abandon cleans up after a failed start and returns err, naming the kept directory.
func (f *FerretDB) abandon(err error) error {
	_ = f.cleanup()
	if f.keep && f.Dir != "" {
		err = fmt.Errorf("%w (kept %s)", err, f.Dir)
	}
	return err
}

// cleanup closes the log and, unless keep, removes the temporary directory.
func (f *FerretDB) cleanup() error {
	var errs []error
	if f.log != nil {
		errs = append(errs, f.log.Close())
		f.log = nil
	}
	if !f.keep && f.Dir != "" {
		if err := os.RemoveAll(f.Dir); err != nil {
			errs = append(errs, fmt.Errorf("ferretdb: %w", err))
		}
	}
	return errors.Join(errs...)
}
