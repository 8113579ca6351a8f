package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

var _ register.Store = (*Registers)(nil)

// Registers is the register store over a Client's server: one document per key in the
// collection "registers", {_id: key, value, ops: [op id ...]}, where ops lists the
// idempotent writes and successful idempotent CASes applied to it. Get it from
// Client.Register.
type Registers struct{ c *Client }

// Register returns the register store over the same server and configuration.
func (c *Client) Register() *Registers { return &Registers{c} }

func (r *Registers) coll(client *mongo.Client) *mongo.Collection {
	o := options.Collection()
	if rc := r.c.readConcern(); rc != nil {
		o.SetReadConcern(rc)
	}
	return client.Database(r.c.db).Collection("registers", o)
}

// Reset deletes every register document.
func (r *Registers) Reset(ctx context.Context) error {
	if _, err := r.coll(r.c.admin).DeleteMany(ctx, bson.D{}); err != nil {
		return fmt.Errorf("reset registers: %w", Classify(err))
	}
	return nil
}

// Session dials one worker's connection.
func (r *Registers) Session(ctx context.Context) (register.Session, error) {
	s, err := r.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &registerSession{session: s, coll: r.coll(s.client)}, nil
}

type registerSession struct {
	*session
	coll *mongo.Collection
}

type registerDoc struct {
	Value int64 `bson:"value"`
}

// Read is a findOne by _id, on the primary (the driver's default read preference), with
// read concern linearizable under Config.Majority.
func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return 0, false, err
	}
	var d registerDoc
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: key}},
		options.FindOne().SetProjection(bson.D{{Key: "value", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", key, Classify(err))
	}
	return d.Value, true, nil
}

// upsertRaces bounds the retries of an idempotent write whose upsert lost the race to
// insert the key's document.
const upsertRaces = 3

// Write is an upsert by _id. With Idempotent the filter also requires the op id absent
// from ops and the update pushes it; when that matches nothing the upsert's insert fails
// on the duplicate _id, and a lookup tells a replay from a race with another writer.
func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	if err := workloads.Start(ctx); err != nil {
		return err
	}
	filter := bson.D{{Key: "_id", Value: key}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: value}}}}
	upsert := options.UpdateOne().SetUpsert(true)
	if !req.Idempotent {
		_, err := s.coll.UpdateOne(ctx, filter, update, upsert)
		if mongo.IsDuplicateKeyError(err) {
			// Two upserts raced to insert the document; this one inserted nothing.
			return workloads.Conflict(fmt.Errorf("write %s: %w", key, err), "upsert-race")
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", key, Classify(err))
		}
		return nil
	}
	if req.OpID == "" {
		return errors.New("write: idempotent request without op id")
	}
	filter = append(filter, bson.E{Key: "ops", Value: bson.D{{Key: "$ne", Value: req.OpID}}})
	update = append(update, bson.E{Key: "$push", Value: bson.D{{Key: "ops", Value: req.OpID}}})
	for range upsertRaces {
		_, err := s.coll.UpdateOne(ctx, filter, update, upsert)
		if err == nil {
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("write %s: %w", key, Classify(err))
		}
		recorded, err := s.recorded(ctx, key, req.OpID)
		if err != nil {
			return workloads.Unknown(fmt.Errorf("write %s: look up op %s: %w", key, req.OpID, err), "lookup")
		}
		if recorded {
			return nil
		}
	}
	return workloads.Conflict(fmt.Errorf("write %s: upsert lost %d races to insert the document", key, upsertRaces), "upsert-race")
}

// CAS is an update whose filter holds the expected value. With Idempotent the filter
// also requires the op id absent and the update pushes it; when that matches nothing a
// lookup tells a replay of a successful CAS from a mismatch. Failed CASes are not
// recorded: they changed nothing, so running one again is as good as replaying it.
func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return false, err
	}
	filter := bson.D{{Key: "_id", Value: key}, {Key: "value", Value: from}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: to}}}}
	if req.Idempotent {
		if req.OpID == "" {
			return false, errors.New("cas: idempotent request without op id")
		}
		filter = append(filter, bson.E{Key: "ops", Value: bson.D{{Key: "$ne", Value: req.OpID}}})
		update = append(update, bson.E{Key: "$push", Value: bson.D{{Key: "ops", Value: req.OpID}}})
	}
	res, err := s.coll.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, fmt.Errorf("cas %s: %w", key, Classify(err))
	}
	if res.MatchedCount == 1 || !req.Idempotent {
		return res.MatchedCount == 1, nil
	}
	recorded, err := s.recorded(ctx, key, req.OpID)
	if err != nil {
		return false, workloads.Unknown(fmt.Errorf("cas %s: look up op %s: %w", key, req.OpID, err), "lookup")
	}
	return recorded, nil
}

// recorded reports whether op is in the ops of key's document.
func (s *registerSession) recorded(ctx context.Context, key, op string) (bool, error) {
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "ops", Value: op}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
