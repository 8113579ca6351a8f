// Package mongopay is the payments service on MongoDB (mongo-driver v2): a ledger in
// which each charge is a document, and the balance is the credits less the charges.
// Naive inserts a new document per attempt and retries any error; Idempotent makes the
// charge's key the document's _id, so that a retry of a charge that was applied meets a
// duplicate key error, which it takes as "already charged".
//
// Why a ledger rather than a balance field decremented with $inc: the examples run on
// FerretDB 1.24, which has no multi-document transactions and loses concurrent updates
// of one document (docs/findings.md). A balance document updated by every worker
// would fail the check for that reason alone, idempotent or not. One insert per charge
// is atomic on its own and is never a concurrent update, so only the retries are under
// test. The price: nothing refuses a charge when the credits run out.
package mongopay

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/examples/payments"
)

// Open connects to dsn with the driver's retryable writes off: the service owns its
// retries (a standalone server, which FerretDB is, has none anyway).
//
// Its waits are bounded. After a lost connection the driver clears its pool, marks the
// server unknown and cancels its monitor's check; every operation then waits in server
// selection until the monitor's next check succeeds. With the driver's defaults a
// check that does not answer (a machine under load) holds that wait for the connect
// timeout, 30 s, and the next regular check comes 10 s later, while selection itself
// waits up to 30 s: an operation whose caller set no deadline stalls for as long, and
// one that did fails with "server selection error: context deadline exceeded" having
// sent nothing. Here a check gives up after 5 s, the monitor looks again every second,
// selection waits 5 s at most, and no operation runs longer than 10 s.
func Open(dsn string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(dsn).SetRetryWrites(false).SetRetryReads(false).
		SetConnectTimeout(5 * time.Second).SetHeartbeatInterval(time.Second).
		SetServerSelectionTimeout(5 * time.Second).SetTimeout(10 * time.Second))
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
			// Charged before: the reply was lost.
			return payments.Receipt{Applied: true, Balance: -1, Replayed: true}, nil
		}
		return payments.Receipt{Applied: err == nil, Balance: -1}, err
	})
}

// Balance returns the credits less the charges recorded.
func (l *Ledger) Balance(ctx context.Context) (int64, error) {
	n, err := l.Charges.CountDocuments(ctx, bson.D{})
	return l.Credits - n, err
}
