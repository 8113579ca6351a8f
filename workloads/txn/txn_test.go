package txn

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/indoubt/indoubt/workloads"
)

// refusingStore is a Store whose sessions fail the test if a transaction reaches them.
type refusingStore struct{ t *testing.T }

func (s refusingStore) Reset(context.Context) error { return nil }
func (s refusingStore) Session(context.Context) (Session, error) {
	return refusingSession(s), nil
}
func (s refusingStore) Guarantee() Guarantee { return Guarantee{Models: []string{"serializable"}} }

type refusingSession struct{ t *testing.T }

func (s refusingSession) Conn() string { return "" }
func (s refusingSession) Close() error { return nil }
func (s refusingSession) Txn(context.Context, workloads.Request, Txn) (Txn, int, error) {
	s.t.Error("an idempotent transaction reached the store")
	return nil, 0, nil
}

func TestIdempotentTransactionRefusedBeforeTheStore(t *testing.T) {
	for _, name := range []workloads.Name{workloads.ListAppend, workloads.RWRegister} {
		t.Run(string(name), func(t *testing.T) {
			w, err := New(name, refusingStore{t}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			wk, err := w.Worker(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			call := wk.Next(rand.New(rand.NewPCG(1, 2)))
			_, err = wk.Do(context.Background(), call, workloads.Request{OpID: "op-1", Idempotent: true})
			if err == nil || errors.Is(err, workloads.ErrUnknown) || errors.Is(err, workloads.ErrConflict) {
				t.Fatalf("got %v, want a definite failure", err)
			}
			if got, want := workloads.ReasonOf(err), workloads.Reason("no-idempotent"); got != want {
				t.Errorf("reason %q, want %q", got, want)
			}
		})
	}
}
