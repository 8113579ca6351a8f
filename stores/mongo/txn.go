package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var _ txn.Store = (*Txns)(nil)

// Txns is the list-append or rw-register store on a Client's server, one document a
// key in the collection "txn_list_append" or "txn_rw_register": {_id: key, list:
// [values]} or {_id: key, value: v}. A transaction touches one key (the workload's
// single-key transactions) and runs as one single-document command, the only unit
// MongoDB makes atomic without a multi-document transaction (which FerretDB does not
// have):
//   - reads only: findOne;
//   - writes only: updateOne with upsert ($push of every appended value with $each, or
//     $set of the last written one);
//   - reads and writes: findOneAndUpdate with upsert, returning the document as it was
//     before the update; each read's result is that document with the transaction's own
//     earlier writes applied.
//
// Get it from Client.Txns.
type Txns struct {
	c     *Client
	model workloads.Name
}

// Txns returns the store for model (workloads.ListAppend or workloads.RWRegister) over
// the same server and configuration.
func (c *Client) Txns(model workloads.Name) (*Txns, error) {
	if model != workloads.ListAppend && model != workloads.RWRegister {
		return nil, fmt.Errorf("mongo: no transactional model %q (want list-append or rw-register)", model)
	}
	return &Txns{c: c, model: model}, nil
}

func (t *Txns) coll(client *mongo.Client) *mongo.Collection {
	name := "txn_list_append"
	if t.model == workloads.RWRegister {
		name = "txn_rw_register"
	}
	o := options.Collection()
	if rc := t.c.readConcern(); rc != nil {
		o.SetReadConcern(rc)
	}
	return client.Database(t.c.db).Collection(name, o)
}

// Guarantee is what MongoDB documents for single-document operations: each is atomic,
// and on one server (or with majority writes and linearizable reads on a replica set)
// they are linearizable, so single-key transactions are checked for strict
// serializability. Nothing is promised of two documents together, and no transaction
// touches two.
func (t *Txns) Guarantee() txn.Guarantee {
	return txn.Guarantee{
		Mechanism: "one single-document command a transaction (findOne, updateOne, findOneAndUpdate returning the document before)",
		Models:    []string{"strict-serializable"},
		Promise:   "MongoDB makes every single-document operation atomic, and a standalone server or a replica set with majority writes and linearizable reads makes them linearizable; nothing is promised across documents",
		SingleKey: true,
		// One document is one register, linearizable by the promise above, and a
		// transaction's write follows its read in the one command.
		LinearizableKeys: true, SequentialKeys: true, WFRKeys: true,
	}
}

// Reset deletes every document of the model's collection.
func (t *Txns) Reset(ctx context.Context) error {
	if _, err := t.coll(t.c.admin).DeleteMany(ctx, bson.D{}); err != nil {
		return fmt.Errorf("reset transaction keys: %w", Classify(err))
	}
	return nil
}

// Session dials one worker's connection.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) {
	s, err := t.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &txnSession{session: s, t: t, coll: t.coll(s.client)}, nil
}

type txnSession struct {
	*session
	t    *Txns
	coll *mongo.Collection
}

// txnDoc is a key's document: its list, or its register's value when Found.
type txnDoc struct {
	List  []int64 `bson:"list"`
	Value *int64  `bson:"value"`
}

// Txn runs t as one single-document command. A transaction of more than one key is
// refused before anything is sent: this store has no way to make it atomic.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	if len(t) == 0 {
		return t, 0, nil
	}
	keys := t.Keys()
	if len(keys) != 1 {
		return nil, 0, workloads.Definite(fmt.Errorf("mongo: a transaction of %d keys; this store runs one document a transaction", len(keys)), "multi-key")
	}
	key := keys[0]
	list := s.t.model == workloads.ListAppend
	var appends []int64
	var last int64
	writes, reads := false, false
	for _, m := range t {
		switch m.F {
		case txn.Append:
			appends, writes = append(appends, m.Value), true
		case txn.Write:
			last, writes = m.Value, true
		default:
			reads = true
		}
	}
	filter := bson.D{{Key: "_id", Value: key}}
	var update bson.D
	if list {
		update = bson.D{{Key: "$push", Value: bson.D{{Key: "list", Value: bson.D{{Key: "$each", Value: appends}}}}}}
	} else {
		update = bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: last}}}}
	}
	var before txnDoc
	switch {
	case !writes:
		err := s.coll.FindOne(ctx, filter).Decode(&before)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, 0, fmt.Errorf("read key %d: %w", key, Classify(err))
		}
	case !reads:
		if _, err := s.coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true)); err != nil {
			return nil, 0, s.writeErr(key, err)
		}
		return t, 0, nil
	default:
		o := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)
		err := s.coll.FindOneAndUpdate(ctx, filter, update, o).Decode(&before)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, 0, s.writeErr(key, err)
		}
	}
	state := append([]int64{}, before.List...)
	val, found := int64(0), before.Value != nil
	if found {
		val = *before.Value
	}
	for i := range t {
		m := &t[i]
		switch m.F {
		case txn.Append:
			state = append(state, m.Value)
		case txn.Write:
			val, found = m.Value, true
		default:
			m.Done = true
			if list {
				m.List = append([]int64{}, state...)
			} else {
				m.Value, m.Found = val, found
			}
		}
	}
	return t, 0, nil
}

// writeErr classifies the error of a command that writes. Two upserts of a document
// not there yet can race to insert it; the loser changed nothing and may run again.
func (s *txnSession) writeErr(key int64, err error) error {
	if mongo.IsDuplicateKeyError(err) {
		return workloads.Conflict(fmt.Errorf("transaction on key %d: %w", key, err), "upsert-race")
	}
	return fmt.Errorf("transaction on key %d: %w", key, Classify(err))
}
