package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

var _ register.Store = (*Registers)(nil)

// Registers is the register store: integer registers as keys PREFIX/register/KEY
// holding decimal values. With Request.Idempotent, a write or a compare-and-set records
// its op id (PREFIX/register-ops/ID, the outcome as "1" or "0") in the same Txn as its
// effect, and a retry that finds it recorded reports that outcome instead of acting
// again. Get it from Client.Register.
type Registers struct{ c *Client }

// Register returns the register store over the client's cluster.
func (c *Client) Register() *Registers { return &Registers{c} }

// RegisterMechanism describes the operations for the report.
func (r *Registers) RegisterMechanism() string {
	return fmt.Sprintf("Put, %s Get, compare-and-set by Txn (compare value)", r.c.cfg.Reads)
}

func (r *Registers) key(k string) string    { return r.c.prefix + "/register/" + k }
func (r *Registers) opKey(id string) string { return r.c.prefix + "/register-ops/" + id }

// Reset deletes every register and recorded op id: two range deletes.
func (r *Registers) Reset(ctx context.Context) error {
	for _, p := range []string{r.c.prefix + "/register/", r.c.prefix + "/register-ops/"} {
		if _, err := r.c.admin.Delete(ctx, p, clientv3.WithPrefix()); err != nil {
			return fmt.Errorf("reset registers: %w", Classify(err))
		}
	}
	return nil
}

// Session opens one worker's client.
func (r *Registers) Session(ctx context.Context) (register.Session, error) {
	s, err := r.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &registerSession{session: s, r: r}, nil
}

type registerSession struct {
	*session
	r *Registers
}

// Read is a Get, linearizable or serializable as configured.
func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return 0, false, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.r.key(key), s.readOpts()...)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", key, Classify(err))
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: value %q is not an integer: %w", key, resp.Kvs[0].Value, err)
	}
	return n, true, nil
}

// Write is a Put, or with an op id a Txn that puts unless the id is recorded and
// records it.
func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	if err := workloads.Start(ctx); err != nil {
		return err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	v := strconv.FormatInt(value, 10)
	var err error
	if req.Idempotent {
		if req.OpID == "" {
			return errors.New("write: idempotent request without op id")
		}
		ok := s.r.opKey(req.OpID)
		_, err = s.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(ok), "=", 0)).
			Then(clientv3.OpPut(s.r.key(key), v), clientv3.OpPut(ok, "1")).
			Commit()
	} else {
		_, err = s.cli.Put(rctx, s.r.key(key), v)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", key, Classify(err))
	}
	return nil
}

// CAS is a Txn: if the register holds from, put to. With an op id the outcome is
// recorded in the same Txn (a failed compare records "0" in a nested Txn), and a
// recorded outcome is returned instead of comparing again.
func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return false, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	k := s.r.key(key)
	same := clientv3.Compare(clientv3.Value(k), "=", strconv.FormatInt(from, 10))
	put := clientv3.OpPut(k, strconv.FormatInt(to, 10))
	if !req.Idempotent {
		resp, err := s.cli.Txn(rctx).If(same).Then(put).Commit()
		if err != nil {
			return false, fmt.Errorf("cas %s: %w", key, Classify(err))
		}
		return resp.Succeeded, nil
	}
	if req.OpID == "" {
		return false, errors.New("cas: idempotent request without op id")
	}
	ok := s.r.opKey(req.OpID)
	fresh := clientv3.Compare(clientv3.CreateRevision(ok), "=", 0)
	// Fresh and the same: put and record 1. Otherwise, in a nested Txn: fresh (the
	// value differs) records 0; recorded, read the outcome.
	resp, err := s.cli.Txn(rctx).
		If(fresh, same).
		Then(put, clientv3.OpPut(ok, "1")).
		Else(clientv3.OpTxn([]clientv3.Cmp{fresh}, []clientv3.Op{clientv3.OpPut(ok, "0")}, []clientv3.Op{clientv3.OpGet(ok)})).
		Commit()
	if err != nil {
		return false, fmt.Errorf("cas %s: %w", key, Classify(err))
	}
	if resp.Succeeded {
		return true, nil
	}
	if len(resp.Responses) != 1 || resp.Responses[0].GetResponseTxn() == nil {
		return false, workloads.Unknown(fmt.Errorf("cas %s: Txn answered %d responses, not the nested Txn's", key, len(resp.Responses)), workloads.ReasonBadReply)
	}
	inner := resp.Responses[0].GetResponseTxn()
	if inner.Succeeded {
		return false, nil
	}
	if len(inner.Responses) != 1 || inner.Responses[0].GetResponseRange() == nil || len(inner.Responses[0].GetResponseRange().Kvs) != 1 {
		return false, workloads.Unknown(fmt.Errorf("cas %s: the recorded outcome of op %s could not be read", key, req.OpID), workloads.ReasonBadReply)
	}
	switch v := string(inner.Responses[0].GetResponseRange().Kvs[0].Value); v {
	case "1":
		return true, nil
	case "0":
		return false, nil
	default:
		return false, workloads.Unknown(fmt.Errorf("cas %s: recorded outcome %q of op %s is not 0 or 1", key, v, req.OpID), workloads.ReasonBadReply)
	}
}
