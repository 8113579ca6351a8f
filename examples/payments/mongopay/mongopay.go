// Package mongopay is the payments service on MongoDB (mongo-driver v2): a ledger in
// which each charge is a document, and the balance is the credits less the charges.
// Naive inserts a new document per attempt and retries any error; Idempotent makes the
// charge's key the document's _id, so that a retry of a charge that was applied meets a
// duplicate key error, which it takes as "already charged".
//
// Why a ledger rather than a balance field decremented with $inc: the examples run on
// FerretDB 1.24, which has no multi-document transactions and loses concurrent updates
// of one document (README, Findings). A balance document updated by every worker
// would fail the check for that reason alone, idempotent or not. One insert per charge
// is atomic on its own and is never a concurrent update, so only the retries are under
// test. The price: nothing refuses a charge when the credits run out.
package mongopay

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/examples/payments"
)

// Open connects to dsn with the driver's retryable writes off: the service owns its
// retries (a standalone server, which FerretDB is, has none anyway).
func Open(dsn string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(dsn).SetRetryWrites(false).SetRetryReads(false))
}

// Ledger is the account: Credits to start with, and the charges collection.
type Ledger struct {
	Credits int64
	Charges *mongo.Collection
}

// Naive records a charge as a new document per attempt and retries any error.
type Naive struct{ Ledger }

// Idempotent records a charge as the document whose _id is its key.
type Idempotent struct{ Ledger }

var (
	_ payments.Service = (*Naive)(nil)
	_ payments.Service = (*Idempotent)(nil)
)

// Charge records a charge; key is ignored.
func (s *Naive) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		// The driver gives the document a fresh ObjectID: a retry is another charge.
		_, err := s.Charges.InsertOne(ctx, bson.D{{Key: "amount", Value: 1}})
		return payments.Receipt{Applied: err == nil, Balance: -1}, err
	})
}

// Charge records the charge with _id key, once.
func (s *Idempotent) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		_, err := s.Charges.InsertOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "amount", Value: 1}})
		if mongo.IsDuplicateKeyError(err) {
			err = nil // charged before: the reply was lost
		}
		return payments.Receipt{Applied: err == nil, Balance: -1}, err
	})
}

// Balance returns the credits less the charges recorded.
func (l *Ledger) Balance(ctx context.Context) (int64, error) {
	n, err := l.Charges.CountDocuments(ctx, bson.D{})
	return l.Credits - n, err
}
