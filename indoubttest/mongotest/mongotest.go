// Package mongotest gives a test a MongoDB database of its own behind indoubt's
// commit-aware proxy. It links mongo-driver v2 and FerretDB, nothing of the other stores.
//
//	srv := mongotest.Mongo(t)    // srv.DSN: mongodb://proxy/; srv.Database: the test's database
//	srv.Arm("commit-cut:0.2")
//
// The server is FerretDB 1.24 (SQLite storage) run inside the test binary, launched once
// per binary, or the MongoDB-wire server INDOUBT_MONGO_DSN names. Every test gets a
// database of its own, one that did not exist before it, dropped after it: a test
// never touches a database it did not create. Call indoubttest.Main from TestMain to
// stop the server when the tests end.
//
// FerretDB is a real server with guarantees of its own: version 1.24.2 loses concurrent
// updates of one document (see docs/findings.md in the repository). A test of your code on it finds
// that too; give each worker its own documents when that is not what is under test.
package mongotest

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	"github.com/indoubt/indoubt/internal/servers/ferret"
	indoubtmongo "github.com/indoubt/indoubt/stores/mongo"
)

// EnvDSN names the environment variable that points the tests at an existing
// MongoDB-wire server (mongodb://host:port/) instead of FerretDB in process.
const EnvDSN = "INDOUBT_MONGO_DSN"

var server = &serve.SharedServer{Env: EnvDSN, Timeout: time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		f, err := ferret.Start(ctx, ferret.Options{})
		if err != nil {
			return "", nil, err
		}
		return f.URI, f.Stop, nil
	},
}

// Mongo returns a database of the test's own (srv.Database) behind a commit-aware
// proxy; srv.DSN reaches the server through the proxy, srv.DirectDSN without. Open the
// client with a direct connection (the DSNs say directConnection=true), so that the
// driver does not look for replica-set members behind the proxy's back. The error
// rules are those of the stores/mongo adapter. opts configure the Server
// (indoubttest.Seed).
func Mongo(tb testing.TB, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	base := server.Need(tb, "mongotest: launch FerretDB")
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "mongodb" || u.Host == "" {
		tb.Fatalf("mongotest: %s: want mongodb://host:port/, got an unparseable URL", EnvDSN)
	}
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	direct := u.String()
	name := serve.DatabaseName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(direct).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	defer c.Disconnect(ctx)
	// A database is created by its first write, so a name that exists belongs to
	// someone else: the test refuses it rather than drop it after.
	names, err := c.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		tb.Fatalf("mongotest: list databases: %v", err)
	}
	if slices.Contains(names, name) {
		tb.Fatalf("mongotest: database %s exists already: a test uses only a database it creates", name)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongo.Connect(options.Client().ApplyURI(direct).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			tb.Errorf("mongotest: drop database %s: %v", name, err)
			return
		}
		defer c.Disconnect(ctx)
		if err := c.Database(name).Drop(ctx); err != nil {
			tb.Errorf("mongotest: drop database %s: %v", name, err)
		}
	})
	return serve.NewServer(tb, serve.Target{
		Store:      "mongo",
		DirectAddr: u.Host,
		DirectDSN:  direct,
		Database:   name,
		Protocol:   toxics.Mongo{},
		Options:    opts,
		Classify:   indoubtmongo.Classify,
	}).(*indoubttest.Server)
}
