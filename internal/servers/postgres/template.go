package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/indoubt/indoubt/internal/servers"
)

// Copies of one cluster.
//
// A fresh cluster costs initdb (about a second of CPU and of wall time here, most of
// it bootstrapping the catalogs) and a single-user CREATE DATABASE (a fifth of a second
// more); a copy of the 46 MB the two leave costs a tenth. A process that launches many
// servers (a suite of cases, a shrink's candidate runs, a test package) asks for
// ShareInitdb: the first Start with a set of binaries makes a cluster that way, in a
// temporary directory of its own, and every Start after copies it into the server's
// directory. Each copy then gets the launch's own password, set by a single-user ALTER
// ROLE before the server listens, so that no two servers share a password and the
// template's is never used. Nothing else differs: a copy is the same bytes initdb and
// CREATE DATABASE wrote, with the same settings, and a server started on it is started
// as on a cluster of its own. The copies share the template's system identifier
// (pg_control), as a standby shares its primary's; nothing of indoubt's reads it.
//
// The template's directory has the owner marker of every launched server's (named
// indoubt-postgres-template-PID-...): the last release removes it, and should the
// process die first, a later launch or `indoubt clean` does.

var shared struct {
	mu        sync.Mutex
	users     int
	templates map[string]*template // by the binaries' directory
}

// template is one initdb'd cluster that Start copies.
type template struct {
	once    sync.Once
	err     error
	dir     string // its temporary directory, removed at the last release
	dataDir string
	// copying is held for reading while a Start copies dataDir, and for writing while
	// the last release removes it.
	copying sync.RWMutex
}

// ShareInitdb makes every Start in this process, until the returned release is
// called, copy one cluster made once per set of binaries instead of running initdb
// (see above). Calls nest: the templates are removed when the last release is
// called, which returns the first error removing them. Call release before the
// process exits: a template is a temporary directory like a server's.
func ShareInitdb() (release func() error) {
	shared.mu.Lock()
	shared.users++
	shared.mu.Unlock()
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() { err = unshare() })
		return err
	}
}

// unshare drops one user of the templates and removes them after the last.
func unshare() error {
	shared.mu.Lock()
	shared.users--
	var gone []*template
	if shared.users == 0 {
		for _, t := range shared.templates {
			gone = append(gone, t)
		}
		shared.templates = nil
	}
	shared.mu.Unlock()
	var errs []error
	for _, t := range gone {
		t.copying.Lock()
		if t.dir != "" {
			if err := os.RemoveAll(t.dir); err != nil {
				errs = append(errs, fmt.Errorf("postgres: remove template: %w", err))
			}
		}
		t.copying.Unlock()
	}
	return errors.Join(errs...)
}

// sharedTemplate returns the template of the binaries in bin, made on first use, or
// nil when no ShareInitdb is in force. Its copying lock is held for reading: the
// caller unlocks it after the copy.
func sharedTemplate(ctx context.Context, bin string, acct servers.Account) (*template, error) {
	shared.mu.Lock()
	if shared.users == 0 {
		shared.mu.Unlock()
		return nil, nil
	}
	if shared.templates == nil {
		shared.templates = map[string]*template{}
	}
	t := shared.templates[bin]
	if t == nil {
		t = &template{}
		shared.templates[bin] = t
	}
	t.copying.RLock()
	shared.mu.Unlock()
	t.once.Do(func() { t.err = t.make(ctx, bin, acct) })
	if t.err != nil {
		t.copying.RUnlock()
		// Not kept: the next Start tries again (the failure may have been this one's
		// context, cancelled).
		shared.mu.Lock()
		if shared.templates[bin] == t {
			delete(shared.templates, bin)
		}
		shared.mu.Unlock()
		if t.dir != "" {
			_ = os.RemoveAll(t.dir)
		}
		return nil, t.err
	}
	return t, nil
}

// make runs initdb and CREATE DATABASE in a temporary directory of the template's own,
// as a Start without a template does.
func (t *template) make(ctx context.Context, bin string, acct servers.Account) error {
	s := &Server{BinDir: bin, inst: servers.Instance{Name: "postgres-template"}}
	dir, err := s.inst.MakeTempDir("", acct)
	if err != nil {
		return err
	}
	t.dir = dir
	if err := acct.Own(dir); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	s.Dir, s.DataDir = dir, filepath.Join(dir, "data")
	s.LogPath = filepath.Join(dir, "initdb.log")
	if err := s.inst.OpenLog(s.LogPath); err != nil {
		return err
	}
	defer s.inst.Log().Close()
	if s.Password, err = servers.NewPassword(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := s.initCluster(ctx, acct); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	t.dataDir = s.DataDir
	return nil
}

// copyTo makes p's data directory a copy of the template, with p's password.
func (t *template) copyTo(ctx context.Context, p *Server, acct servers.Account) error {
	if err := copyTree(t.dataDir, p.DataDir, acct); err != nil {
		return fmt.Errorf("postgres: copy the template cluster: %w", err)
	}
	// The password goes on standard input, never in an argument that ps would show;
	// single-user mode does not echo it, and the statement is not logged.
	alter := fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'\n", User, strings.ReplaceAll(p.Password, "'", "''"))
	return p.run(ctx, acct, strings.NewReader(alter), "postgres", "--single", "-D", p.DataDir, Database)
}
