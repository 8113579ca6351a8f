package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var _ txn.Store = (*Txns)(nil)

// Txns is the list-append or rw-register store: key k of the model is
// PREFIX/txn/MODEL/k, holding a list as comma-separated decimals ("" for none) or a
// register as one decimal. A transaction reads every key it touches in one read-only
// Txn (one revision, linearizable), computes its reads and writes from that, and, when
// it writes, commits one Txn that puts the written keys if none of the keys it touched
// has changed since (each key's mod revision compared with the one read, 0 for a key
// that was absent). A compare that fails wrote nothing: a conflict. Get it from
// Client.Txns.
type Txns struct {
	c     *Client
	model string
}

// Txns returns the store of the transactional workload model (list-append or
// rw-register) over the client's cluster.
func (c *Client) Txns(model workloads.Name) (*Txns, error) {
	if model != workloads.ListAppend && model != workloads.RWRegister {
		return nil, fmt.Errorf("etcd: no transactional model %q (want list-append or rw-register)", model)
	}
	return &Txns{c: c, model: string(model)}, nil
}

func (t *Txns) key(k int64) string {
	return t.c.prefix + "/txn/" + t.model + "/" + strconv.FormatInt(k, 10)
}

// Guarantee is etcd's: every Txn is applied through Raft in one total order consistent
// with real time (linearizable), and the commit's compares make the reads still hold at
// the revision the writes apply at: strict serializability.
func (t *Txns) Guarantee() txn.Guarantee {
	return txn.Guarantee{
		Mechanism: "one read-only Txn of the keys, then a Txn comparing each key's mod revision that puts the writes",
		Models:    []string{"strict-serializable"},
		Promise:   "etcd applies each Txn atomically in one linearizable order, and the commit's compares abort it when a key it read changed since the read",
		// Each key is linearizable on its own; writes follow their transaction's reads.
		LinearizableKeys: true, SequentialKeys: true, WFRKeys: true,
	}
}

// Reset deletes every key of the model: one range delete.
func (t *Txns) Reset(ctx context.Context) error {
	if _, err := t.c.admin.Delete(ctx, t.c.prefix+"/txn/"+t.model+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("reset transaction keys: %w", Classify(err))
	}
	return nil
}

// Session opens one worker's client.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) {
	s, err := t.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &txnSession{session: s, t: t}, nil
}

type txnSession struct {
	*session
	t *Txns
}

// keyState is one key as a transaction sees it: what it read, with what it wrote since.
type keyState struct {
	rev     int64 // mod revision read, 0 when absent
	list    []int64
	value   int64
	found   bool
	written bool
}

// Txn runs t: the reads, then, when t writes, the compare-and-put.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	keys := t.Keys()
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(s.t.key(k))
	}
	got, err := s.cli.Txn(rctx).Then(gets...).Commit()
	if err != nil {
		// Nothing was written: definite for the transaction (the cause kept as text).
		c := Classify(err)
		return nil, 0, workloads.Definite(fmt.Errorf("txn: read: %s", err), workloads.ReasonOf(c))
	}
	if len(got.Responses) != len(keys) {
		return nil, 0, workloads.Definite(fmt.Errorf("txn: read %d keys, %d answers", len(keys), len(got.Responses)), workloads.ReasonBadReply)
	}
	list := s.t.model == string(workloads.ListAppend)
	state := map[int64]*keyState{}
	for i, k := range keys {
		st := &keyState{list: []int64{}}
		if r := got.Responses[i].GetResponseRange(); r != nil && len(r.Kvs) == 1 {
			kv := r.Kvs[0]
			st.rev, st.found = kv.ModRevision, true
			if list {
				if st.list, err = parseList(string(kv.Value)); err != nil {
					return nil, 0, workloads.Definite(fmt.Errorf("txn: key %d: %w", k, err), workloads.ReasonBadReply)
				}
			} else if st.value, err = strconv.ParseInt(string(kv.Value), 10, 64); err != nil {
				return nil, 0, workloads.Definite(fmt.Errorf("txn: key %d: %w", k, err), workloads.ReasonBadReply)
			}
		}
		state[k] = st
	}
	for i, m := range t {
		st := state[m.Key]
		switch m.F {
		case txn.Read:
			if list {
				t[i].List = append([]int64{}, st.list...)
			} else {
				t[i].Value, t[i].Found = st.value, st.found
			}
			t[i].Done = true
		case txn.Append:
			st.list, st.written = append(st.list, m.Value), true
		case txn.Write:
			st.value, st.found, st.written = m.Value, true, true
		}
	}
	if t.ReadOnly() {
		return t, 0, nil
	}
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	for _, k := range keys {
		st := state[k]
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.t.key(k)), "=", st.rev))
		if !st.written {
			continue
		}
		v := strconv.FormatInt(st.value, 10)
		if list {
			v = formatList(st.list)
		}
		puts = append(puts, clientv3.OpPut(s.t.key(k), v))
	}
	resp, err := s.cli.Txn(rctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("txn: commit: %w", Classify(err))
	}
	if !resp.Succeeded {
		return nil, 0, workloads.Conflict(errors.New("txn: a key changed since it was read"), workloads.ReasonCASConflict)
	}
	return t, 0, nil
}

func formatList(l []int64) string {
	parts := make([]string, len(l))
	for i, v := range l {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(parts, ",")
}

func parseList(s string) ([]int64, error) {
	out := []int64{}
	if s == "" {
		return out, nil
	}
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}
