package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var _ budget.Store = (*Client)(nil)

// The budget document: {_id: "budget", balance, initial, ops: [op id ...], naive}.
// initial is the balance Reset set; ops lists the idempotent decrements that applied, in
// order; naive is set by the first decrement that was not idempotent. Since Reset only
// decrements follow, the k-th recorded decrement (from 0) left initial-k-1, as long as
// none was naive: that is how a replay recovers the original balance without storing it
// (a single update cannot write the value it is about to compute).
const budgetID = "budget"

// Mechanism names the atomic mechanism for the report.
func (c *Client) Mechanism() string {
	return "findOneAndUpdate with the condition in the filter"
}

func (c *Client) budget(client *mongo.Client) *mongo.Collection {
	return c.collection(client, "budget")
}

// Reset replaces the budget document, creating it if needed.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	doc := bson.D{
		{Key: "_id", Value: budgetID},
		{Key: "balance", Value: amount},
		{Key: "initial", Value: amount},
		{Key: "ops", Value: bson.A{}},
	}
	_, err := c.budget(c.admin).ReplaceOne(ctx, bson.D{{Key: "_id", Value: budgetID}}, doc,
		options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("reset budget: %w", Classify(err))
	}
	return nil
}

type budgetDoc struct {
	Balance int64    `bson:"balance"`
	Initial int64    `bson:"initial"`
	Ops     []string `bson:"ops"`
	Naive   bool     `bson:"naive"`
}

// Balance reads the balance; it errs, wrapping budget.ErrNoAccount, when the budget's
// document is not there.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	var d budgetDoc
	err := c.budget(c.admin).FindOne(ctx, bson.D{{Key: "_id", Value: budgetID}},
		options.FindOne().SetProjection(bson.D{{Key: "balance", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, fmt.Errorf("read balance: %w", budget.ErrNoAccount)
	}
	if err != nil {
		return 0, fmt.Errorf("read balance: %w", Classify(err))
	}
	return d.Balance, nil
}

// Session dials one worker's connection.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &budgetSession{s}, nil
}

type budgetSession struct{ *session }

// Decrement is one findOneAndUpdate. A rejection reports balance 0: the filter failed on
// balance > 0 and only Reset raises it. With Idempotent, a decrement that matched nothing
// reads the document to tell a replay (its op id recorded) from a rejection.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	if err := workloads.Start(ctx); err != nil {
		return budget.Outcome{}, err
	}
	filter := bson.D{{Key: "_id", Value: budgetID}, {Key: "balance", Value: bson.D{{Key: "$gt", Value: 0}}}}
	update := bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: -1}}}}
	if req.Idempotent {
		if req.OpID == "" {
			return budget.Outcome{}, errors.New("decrement: idempotent request without op id")
		}
		filter = append(filter, bson.E{Key: "ops", Value: bson.D{{Key: "$ne", Value: req.OpID}}})
		update = append(update, bson.E{Key: "$push", Value: bson.D{{Key: "ops", Value: req.OpID}}})
	} else {
		update = append(update, bson.E{Key: "$set", Value: bson.D{{Key: "naive", Value: true}}})
	}
	coll := s.c.budget(s.client)
	var d budgetDoc
	// No projection: FerretDB 1.24 refuses one on findAndModify (NotImplemented), so the
	// whole document comes back, op ids included.
	err := coll.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().
		SetReturnDocument(options.After)).Decode(&d)
	switch {
	case err == nil:
		return budget.Outcome{Applied: true, Balance: d.Balance}, nil
	case !errors.Is(err, mongo.ErrNoDocuments):
		return budget.Outcome{}, fmt.Errorf("decrement: %w", Classify(err))
	case !req.Idempotent:
		return budget.Outcome{Applied: false, Balance: 0}, nil
	}

	// Nothing matched: the op id is recorded (a replay), or the balance is 0. Whichever it
	// was stays true until Reset, so a later read tells.
	err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: budgetID}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return budget.Outcome{}, errors.New("decrement: budget not set")
	}
	if err != nil {
		// This attempt certainly matched nothing, but whether an earlier attempt of the
		// same op applied is what the lookup was for: the operation's outcome is unknown,
		// whatever the lookup's error says.
		return budget.Outcome{}, workloads.Unknown(fmt.Errorf("decrement: look up op %s: %w", req.OpID, err), "lookup")
	}
	k := slices.Index(d.Ops, req.OpID)
	if k < 0 {
		return budget.Outcome{Applied: false, Balance: 0}, nil
	}
	bal := d.Initial - int64(k) - 1
	if d.Naive {
		bal = -1
	}
	return budget.Outcome{Applied: true, Balance: bal, Replayed: true}, nil
}
