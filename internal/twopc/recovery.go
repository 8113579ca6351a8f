package twopc

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// InDoubt is one transaction prepared on one participant and not yet finished.
type InDoubt struct {
	GID         string        `json:"gid"`
	Participant int           `json:"participant"`
	Prepared    time.Time     `json:"prepared"`
	Age         time.Duration `json:"age_ns"`
	// Locks counts the locks it holds in pg_locks: a prepared transaction's locks have
	// no pid and share the virtual transaction of its own transactionid lock. (Its row
	// locks live in the rows themselves and show only as blocked writers.)
	Locks int `json:"locks"`
}

// ListInDoubt lists the transactions prepared on every participant whose gid starts
// with prefix, in gid then participant order.
func ListInDoubt(ctx context.Context, parts []*pgxpool.Pool, prefix string) ([]InDoubt, error) {
	var out []InDoubt
	for i, p := range parts {
		rows, err := p.Query(ctx, `
			SELECT x.gid, x.prepared, now() - x.prepared,
			       (SELECT count(*) FROM pg_locks l WHERE l.pid IS NULL AND l.virtualtransaction =
			          (SELECT t.virtualtransaction FROM pg_locks t WHERE t.pid IS NULL
			           AND t.locktype = 'transactionid' AND t.transactionid = x.transaction LIMIT 1))
			FROM pg_prepared_xacts x
			WHERE x.database = current_database() AND starts_with(x.gid, $1)`, prefix)
		if err != nil {
			return nil, fmt.Errorf("participant %d: list prepared: %w", i, err)
		}
		for rows.Next() {
			d := InDoubt{Participant: i}
			if err := rows.Scan(&d.GID, &d.Prepared, &d.Age, &d.Locks); err != nil {
				rows.Close()
				return nil, fmt.Errorf("participant %d: list prepared: %w", i, err)
			}
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("participant %d: list prepared: %w", i, err)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].GID != out[b].GID {
			return out[a].GID < out[b].GID
		}
		return out[a].Participant < out[b].Participant
	})
	return out, nil
}

// Resolution is what recovery did to one in-doubt transaction on one participant.
type Resolution struct {
	GID         string   `json:"gid"`
	Participant int      `json:"participant"`
	Decision    Decision `json:"decision"`
	// Logged is true when the decision came from the log, false when presumed (or,
	// for the naive coordinator, assumed).
	Logged bool   `json:"logged"`
	Err    string `json:"error,omitempty"`
}

// Recover finishes every transaction prepared on the participants under prefix. Logged:
// a gid whose commit the log at logPath records is committed, any other is rolled back
// (presumed abort: a commit decision is logged before any participant commits, so no
// participant can have committed a gid the log does not hold). Naive: everything
// prepared is committed, whatever the log says. It uses nothing the coordinator held in
// memory, so it runs after a crash the same as after a clean run, and running it twice
// is harmless. The error reports a participant that could not be listed or a log that
// could not be read; a gid that could not be finished is in its Resolution.
func Recover(ctx context.Context, parts []*pgxpool.Pool, mode Mode, logPath, prefix string) ([]Resolution, error) {
	decisions := map[string]Record{}
	if mode == Logged {
		var err error
		if decisions, err = ReadLog(logPath); err != nil {
			return nil, err
		}
	}
	doubt, err := ListInDoubt(ctx, parts, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Resolution, 0, len(doubt))
	for _, d := range doubt {
		r := Resolution{GID: d.GID, Participant: d.Participant, Decision: Abort}
		if rec, ok := decisions[d.GID]; ok {
			r.Decision, r.Logged = rec.Decision, true
		}
		if mode == Naive {
			r.Decision, r.Logged = Commit, false
		}
		verb := "ROLLBACK PREPARED"
		if r.Decision == Commit {
			verb = "COMMIT PREPARED"
		}
		if _, err := parts[d.Participant].Exec(ctx, verb+" '"+quote(d.GID)+"'"); err != nil && !notPrepared(err) {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	return out, nil
}

// quote escapes a gid for a string literal: PREPARE TRANSACTION and its kin take no
// parameters.
func quote(gid string) string { return strings.ReplaceAll(gid, "'", "''") }
