package mongotest_test

import (
	"context"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/mongotest"
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
