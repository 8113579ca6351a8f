package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var _ budget.Store = (*Client)(nil)

// The budget's keys: the balance, and the op ids' outcomes ("applied:balance").
func (c *Client) balanceKey() string           { return c.prefix + "/budget/balance" }
func (c *Client) budgetOpKey(id string) string { return c.prefix + "/budget/ops/" + id }

// Mechanism names the atomic mechanism for the report.
func (c *Client) Mechanism() string { return "Txn comparing the balance's mod revision" }

// Reset sets the balance and deletes the recorded op ids in one Txn.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	_, err := c.admin.Txn(ctx).Then(
		clientv3.OpPut(c.balanceKey(), strconv.FormatInt(amount, 10)),
		clientv3.OpDelete(c.prefix+"/budget/ops/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return fmt.Errorf("reset budget: %w", Classify(err))
	}
	return nil
}

// Balance reads the balance, linearizably whatever the sessions' reads.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	resp, err := c.admin.Get(ctx, c.balanceKey())
	if err != nil {
		return 0, fmt.Errorf("read balance: %w", Classify(err))
	}
	if len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("read balance: %w", budget.ErrNoAccount)
	}
	return strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
}

// Session opens one worker's client.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &budgetSession{s}, nil
}

type budgetSession struct{ *session }

// casRounds bounds the read-and-compare rounds of one decrement.
const casRounds = 64

// Decrement reads the balance and its mod revision, then commits a Txn that puts the
// balance less one if the mod revision is still the one read (and, with an op id,
// records the outcome if the id is not recorded yet). A balance that moved in between
// wrote nothing, and the decrement reads again, up to 64 rounds; after that it is a
// conflict. The read is linearizable: a decrement never acts on a stale balance,
// whatever the register's reads.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	if err := workloads.Start(ctx); err != nil {
		return budget.Outcome{}, err
	}
	if req.Idempotent && req.OpID == "" {
		return budget.Outcome{}, errors.New("decrement: idempotent request without op id")
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	for range casRounds {
		o, err := s.decrementOnce(rctx, req)
		if !errors.Is(err, errMoved) {
			return o, err
		}
	}
	return budget.Outcome{}, workloads.Conflict(fmt.Errorf("decrement: the balance moved under each of %d rounds", casRounds), workloads.ReasonCASConflict)
}

// errMoved is a round of a decrement that lost its compare: nothing was written.
var errMoved = errors.New("the balance moved since it was read")

// decrementOnce is one round of Decrement.
func (s *budgetSession) decrementOnce(rctx context.Context, req workloads.Request) (budget.Outcome, error) {
	bk := s.c.balanceKey()
	ops := []clientv3.Op{clientv3.OpGet(bk)}
	if req.Idempotent {
		ops = append(ops, clientv3.OpGet(s.c.budgetOpKey(req.OpID)))
	}
	// One read-only Txn: the balance and the op id's record at one revision.
	got, err := s.cli.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		// Nothing was written by this read, so its failure is definite for the
		// decrement, whatever it was for the read.
		// (The cause is kept as text: its chain would carry its own class.)
		return budget.Outcome{}, workloads.Definite(fmt.Errorf("decrement: read balance: %s", err), workloads.ReasonOf(Classify(err)))
	}
	bal := got.Responses[0].GetResponseRange()
	if bal == nil || len(bal.Kvs) == 0 {
		return budget.Outcome{}, fmt.Errorf("decrement: %w", budget.ErrNoAccount)
	}
	if req.Idempotent {
		if rec := got.Responses[1].GetResponseRange(); rec != nil && len(rec.Kvs) == 1 {
			o, err := parseOutcome(string(rec.Kvs[0].Value))
			if err != nil {
				return budget.Outcome{}, fmt.Errorf("decrement: op %s: %w", req.OpID, err)
			}
			o.Replayed = true
			return o, nil
		}
	}
	b, err := strconv.ParseInt(string(bal.Kvs[0].Value), 10, 64)
	if err != nil {
		return budget.Outcome{}, fmt.Errorf("decrement: balance %q: %w", bal.Kvs[0].Value, err)
	}
	o := budget.Outcome{Applied: b > 0, Balance: b}
	if o.Applied {
		o.Balance = b - 1
	}
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(bk), "=", bal.Kvs[0].ModRevision)}
	var then []clientv3.Op
	if o.Applied {
		then = append(then, clientv3.OpPut(bk, strconv.FormatInt(o.Balance, 10)))
	}
	if req.Idempotent {
		ok := s.c.budgetOpKey(req.OpID)
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(ok), "=", 0))
		then = append(then, clientv3.OpPut(ok, formatOutcome(o)))
	}
	if len(then) == 0 {
		// A rejection at zero without an op id to record: the read was the decision.
		return o, nil
	}
	resp, err := s.cli.Txn(rctx).If(conds...).Then(then...).Commit()
	if err != nil {
		return budget.Outcome{}, fmt.Errorf("decrement: %w", Classify(err))
	}
	if !resp.Succeeded {
		return budget.Outcome{}, errMoved
	}
	return o, nil
}

func formatOutcome(o budget.Outcome) string {
	a := "0"
	if o.Applied {
		a = "1"
	}
	return a + ":" + strconv.FormatInt(o.Balance, 10)
}

func parseOutcome(s string) (budget.Outcome, error) {
	a, b, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(b, 10, 64)
	if !ok || err != nil || a != "0" && a != "1" {
		return budget.Outcome{}, fmt.Errorf("recorded outcome %q is not applied:balance", s)
	}
	return budget.Outcome{Applied: a == "1", Balance: n}, nil
}
