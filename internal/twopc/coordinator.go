package twopc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Mode is how a coordinator decides and how its recovery resolves what is in doubt.
type Mode string

// The modes.
const (
	// Logged writes each commit decision to the fsynced decision log before any
	// participant commits, and recovers from the log: a gid the log says committed is
	// committed everywhere, any other is rolled back (presumed abort).
	Logged Mode = "logged"
	// Naive keeps no log and recovers by committing every transaction it finds
	// prepared. It breaks atomicity when a crash leaves a transaction prepared on one
	// participant and never prepared on another: kept for showing that the checker
	// catches it.
	Naive Mode = "naive"
)

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	return choice.Parse("coordinator", Mode(s), Logged, Naive)
}

// ErrCrashed is returned by Do once the coordinator has crashed (Crash): the
// transaction was abandoned where it stood, or never started.
var ErrCrashed = errors.New("coordinator crashed")

// Outcome is what Do tells its caller of one transaction.
type Outcome uint8

// The outcomes.
const (
	// Committed: the commit decision was made (and, when Logged, is on disk). Some
	// participants may still hold it prepared: recovery commits them.
	Committed Outcome = 1 + iota
	// Aborted: no commit decision was made, and none will be.
	Aborted
	// Abandoned: the coordinator crashed in the middle; recovery decides.
	Abandoned
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Abandoned:
		return "abandoned"
	}
	return "?"
}

// Branch is one participant's part of a distributed transaction: Work runs inside the
// participant's open transaction block on conn.
type Branch struct {
	Participant int
	Work        func(ctx context.Context, conn *pgx.Conn) error
}

// Coordinator runs two-phase commit over PostgreSQL participants: BEGIN and the work on
// every participant, PREPARE TRANSACTION on each in turn, the decision (written to the
// log and fsynced when Logged), then COMMIT PREPARED on each. A phase-two error leaves
// the remaining participants prepared for Recover: after a lost connection the
// coordinator cannot tell which participants it reached, and recovery is the one place
// that finishes a decided transaction. It is safe for concurrent use.
type Coordinator struct {
	parts []*pgxpool.Pool
	mode  Mode
	log   *Log // nil when Naive

	crashed atomic.Bool
	// dead is cancelled crashGrace after Crash: it ends the work phase of a transaction
	// still in it (one waiting for a lock), as the coordinator's dying sessions would.
	dead   context.Context
	killed context.CancelFunc
	mu     sync.Mutex // guards rng
	rng    *rand.Rand
	// Stops counts the transactions abandoned at each crash point, by Point.
	stops [numPoints]atomic.Int64
}

// Point is where in the protocol a crash abandoned a transaction.
type Point int

// The crash points, in protocol order.
const (
	BeforePrepare  Point = iota // nothing prepared: every participant rolls back
	MidPrepare                  // some participants prepared, some never will
	BeforeDecision              // every participant prepared, no decision recorded
	AfterDecision               // the decision recorded, no participant told
	numPoints
)

func (p Point) String() string {
	return [...]string{"before-prepare", "mid-prepare", "before-decision", "after-decision"}[p]
}

// New returns a coordinator over the participants' pools. log is required when mode is
// Logged and ignored when Naive. seed drives the crash points (see Crash).
func New(parts []*pgxpool.Pool, mode Mode, log *Log, seed int64) (*Coordinator, error) {
	if mode == Logged && log == nil {
		return nil, errors.New("coordinator: the logged coordinator needs a decision log")
	}
	if mode == Naive {
		log = nil
	}
	dead, killed := context.WithCancel(context.Background())
	return &Coordinator{parts: parts, mode: mode, log: log, dead: dead, killed: killed, rng: rand.New(rand.NewPCG(uint64(seed), 0x2bc))}, nil
}

// Crash simulates the coordinator's process dying: from now on Do starts nothing, and
// every transaction in flight is abandoned at its next protocol boundary or, by a seeded
// coin at each boundary, at a later one (never past the decision). A transaction still
// doing its work crashGrace after the crash (waiting for a lock an in-doubt transaction
// holds, for as long as lock_timeout) is abandoned there, its sessions closed. What it
// prepared stays prepared; what it had not prepared rolls back when its connection
// closes.
func (c *Coordinator) Crash() {
	if !c.crashed.Swap(true) {
		time.AfterFunc(crashGrace, c.killed)
	}
}

// crashGrace is how long after a crash a transaction may go on with its work before the
// crash ends it: long enough for work that is not waiting on a lock to reach the
// protocol's boundaries, where the seeded coins decide where it stops.
const crashGrace = 200 * time.Millisecond

// Stops returns how many transactions the crash abandoned at each point.
func (c *Coordinator) Stops() map[string]int64 {
	out := map[string]int64{}
	for p := BeforePrepare; p < numPoints; p++ {
		if n := c.stops[p].Load(); n > 0 {
			out[p.String()] = n
		}
	}
	return out
}

// stopAt reports whether a crashed coordinator abandons the transaction at p.
func (c *Coordinator) stopAt(p Point) bool {
	if !c.crashed.Load() {
		return false
	}
	stop := p == AfterDecision
	if !stop {
		c.mu.Lock()
		stop = c.rng.IntN(2) == 0
		c.mu.Unlock()
	}
	if stop {
		c.stops[p].Add(1)
	}
	return stop
}

// Do runs one distributed transaction named gid over branches (at most one per
// participant; a gid must be unique among prepared transactions). The error says why a
// transaction aborted, or is ErrCrashed when the coordinator had crashed: Abandoned
// when the transaction was under way, Aborted when it never began.
func (c *Coordinator) Do(ctx context.Context, gid string, branches []Branch) (Outcome, error) {
	if c.crashed.Load() {
		return Aborted, ErrCrashed // nothing was begun: certainly not applied
	}
	conns := make([]*pgxpool.Conn, len(branches))
	// closeOpen ends the branches whose block is still open by closing their
	// connections: the server rolls an open block back when its client goes, which is
	// also what a crashed coordinator's sessions do.
	release := func(closeOpen bool) {
		for _, pc := range conns {
			if pc == nil {
				continue
			}
			if closeOpen && pc.Conn().PgConn().TxStatus() != 'I' {
				_ = pc.Conn().Close(context.Background())
			}
			pc.Release() // pgxpool destroys a connection not idle or closed
		}
	}
	// The work phase ends with the coordinator: a crash cancels it where it stands.
	work, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(c.dead, stop)()
	abort := func(err error) (Outcome, error) {
		release(true)
		if c.crashed.Load() {
			c.stops[BeforePrepare].Add(1)
			return Abandoned, ErrCrashed
		}
		return Aborted, err
	}
	for i, b := range branches {
		pc, err := c.parts[b.Participant].Acquire(work)
		if err != nil {
			return abort(fmt.Errorf("participant %d: %w", b.Participant, err))
		}
		conns[i] = pc
		if _, err := pc.Exec(work, "BEGIN"); err != nil {
			return abort(fmt.Errorf("participant %d: begin: %w", b.Participant, err))
		}
		if err := b.Work(work, pc.Conn()); err != nil {
			return abort(fmt.Errorf("participant %d: %w", b.Participant, err))
		}
	}
	stop()

	// Phase one.
	var prepared []int
	for i, b := range branches {
		if c.stopAt(map[bool]Point{true: BeforePrepare, false: MidPrepare}[i == 0]) {
			release(true)
			return Abandoned, ErrCrashed
		}
		if _, err := conns[i].Exec(ctx, "PREPARE TRANSACTION '"+quote(gid)+"'"); err != nil {
			release(true)
			// The prepare of this branch may or may not have happened (a lost
			// connection): no decision is recorded, so it is aborted, and rolling it
			// back by name covers both cases.
			c.rollback(ctx, gid, append(prepared, b.Participant))
			return Aborted, fmt.Errorf("participant %d: prepare: %w", b.Participant, err)
		}
		prepared = append(prepared, b.Participant)
	}
	release(false)
	if c.stopAt(BeforeDecision) {
		return Abandoned, ErrCrashed
	}
	if c.log != nil {
		if err := c.log.Write(Record{GID: gid, Participants: prepared, Decision: Commit}); err != nil {
			// Whether the line reached the disk is unknown: recovery reads the log and
			// decides.
			return Abandoned, err
		}
	}
	if c.stopAt(AfterDecision) {
		return Abandoned, ErrCrashed
	}

	// Phase two.
	for _, p := range prepared {
		if _, err := c.parts[p].Exec(ctx, "COMMIT PREPARED '"+quote(gid)+"'"); err != nil {
			// Decided: the transfer is committed; recovery finishes the rest.
			return Committed, nil
		}
	}
	return Committed, nil
}

// rollback rolls gid back on parts, ignoring a participant where it is not prepared
// (it never was, or it rolled back with its session); what cannot be rolled back now
// stays for Recover, which finds no commit decision and rolls it back.
func (c *Coordinator) rollback(ctx context.Context, gid string, parts []int) {
	for _, p := range parts {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = c.parts[p].Exec(ctx, "ROLLBACK PREPARED '"+quote(gid)+"'")
		cancel()
	}
}

// notPrepared reports whether err says the gid is not prepared there (SQLSTATE 42704).
func notPrepared(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42704"
}
