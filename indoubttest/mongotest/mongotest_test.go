package mongotest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/mongotest"
	"github.com/indoubt/indoubt/workloads"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

func connect(t *testing.T, dsn string) *mongo.Client {
	c, err := mongo.Connect(options.Client().ApplyURI(dsn).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

// An insert through the proxy, cut after FerretDB applied it: the proxy says applied,
// the direct connection finds the document, and the next test's database is empty.
func TestMongo(t *testing.T) {
	var first string
	t.Run("cut", func(t *testing.T) {
		srv := mongotest.Mongo(t)
		first = srv.Database
		ctx := context.Background()
		srv.Arm("commit-cut:1,max=1")
		_, err := connect(t, srv.DSN).Database(srv.Database).Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}})
		if err == nil {
			t.Fatal("the insert succeeded through a cut")
		}
		ev := srv.Events()
		if len(ev) != 1 || ev[0].Truth != toxics.Applied {
			t.Fatalf("events %+v, want one applied cut", ev)
		}
		n, err := connect(t, srv.DirectDSN).Database(srv.Database).Collection("c").CountDocuments(ctx, bson.D{})
		if err != nil || n != 1 {
			t.Fatalf("%d documents (%v), want the one the cut applied", n, err)
		}
	})
	t.Run("next", func(t *testing.T) {
		srv := mongotest.Mongo(t)
		if srv.Database == first {
			t.Fatalf("database %s reused", first)
		}
		n, err := connect(t, srv.DirectDSN).Database(first).Collection("c").CountDocuments(context.Background(), bson.D{})
		if err != nil || n != 0 {
			t.Fatalf("the previous test's database holds %d documents (%v), want it dropped", n, err)
		}
	})
}

// exactlyOnce reads the final state of a collection whose documents are tagged by op id
// in _id: each present once at most, by the key's uniqueness.
func exactlyOnce(t *testing.T, c *mongo.Collection) checker.ExactlyOnceState {
	t.Helper()
	cur, err := c.Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	st := checker.ExactlyOnceState{}
	for _, d := range docs {
		st[d.ID]++
	}
	return st
}

// An insert cut after FerretDB applied it, then a retry that fails definitely before it
// is sent (server selection, its deadline spent): the operation is unknown, not failed,
// since its first attempt applied; the check holds, and says why.
func TestWorstOfAttemptsOnMongo(t *testing.T) {
	srv := mongotest.Mongo(t)
	coll := connect(t, srv.DSN).Database(srv.Database).Collection("orders")
	srv.Arm("commit-cut:1,max=1")
	rec := indoubttest.NewRecorder(t, srv)
	op := rec.Worker().Invoke("apply", nil)
	_, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: op.ID()}})
	if err == nil {
		t.Fatal("the insert succeeded through a cut")
	}
	op.Retried(err)
	spent, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-spent.Done()
	_, err = coll.InsertOne(spent, bson.D{{Key: "_id", Value: op.ID()}})
	if srv.Classify(err) == nil || workloads.Classify(srv.Classify(err)) != workloads.ClassDefinite {
		t.Fatalf("the retry's error %v is not a definite failure by the store's rules: the case is not exercised", err)
	}
	op.Done(nil, err)
	srv.Disarm()
	rec.Read("read", exactlyOnce(t, connect(t, srv.DirectDSN).Database(srv.Database).Collection("orders")))
	r := indoubttest.Check(t, rec, indoubttest.ExactlyOnce())
	if r.Verdict != checker.Valid {
		t.Fatalf("verdict %v:\n%s", r.Verdict, r.Text)
	}
	if !strings.Contains(r.Text, "unknown, not failed: 1 operation ("+op.ID()+")") {
		t.Errorf("the report does not say why the operation is unknown:\n%s", r.Text)
	}
}

// Idempotent inserts keyed by the op id: a retry after a cut meets the duplicate key
// (E11000) and answers from it. Every such operation is a replay, none is applied
// twice.
func TestDuplicateKeyIsAReplayOnMongo(t *testing.T) {
	srv := mongotest.Mongo(t)
	coll := connect(t, srv.DSN).Database(srv.Database).Collection("orders")
	srv.Arm("commit-cut:0.4")
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	for range 10 {
		op := w.Invoke("apply", nil)
		var err error
		replayed := false
		for i := range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: op.ID()}})
			cancel()
			if mongo.IsDuplicateKeyError(err) {
				err, replayed = nil, true // inserted before: the reply was lost
			}
			if err == nil || i == 4 {
				break
			}
			op.Retried(err)
		}
		op.Done(map[string]bool{"replayed": replayed}, err)
	}
	srv.Disarm()
	rec.Read("read", exactlyOnce(t, connect(t, srv.DirectDSN).Database(srv.Database).Collection("orders")))
	r := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
	if r.Verdict != checker.Valid {
		t.Fatalf("verdict %v:\n%s", r.Verdict, r.Text)
	}
	replays := 0
	for _, c := range r.Claims {
		if c.Kind != indoubttest.ClaimReplay {
			t.Errorf("%s claimed %s: %s", c.Op, c.Kind, c.Sentence)
			continue
		}
		replays++
	}
	if replays == 0 {
		t.Fatalf("no replay under commit-cut:0.4 over 10 inserts (%d faults):\n%s", r.Faults, r.Text)
	}
}
