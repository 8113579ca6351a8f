package ferret_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/indoubt/indoubt/internal/servers/ferret"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func TestStartFerretDBSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := ferret.Start(ctx, ferret.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()
	if !strings.HasPrefix(f.Addr, "127.0.0.1:") || f.Port == 0 || f.URI != "mongodb://"+f.Addr+"/" {
		t.Errorf("Addr %q, Port %d, URI %q: want a loopback port and its URI", f.Addr, f.Port, f.URI)
	}
	if f.Handler != ferret.SQLite {
		t.Errorf("Handler = %q, want sqlite", f.Handler)
	}

	client := mongoRoundTrip(ctx, t, f.URI)
	// The data lives in the temporary directory, as SQLite files.
	if files, _ := filepath.Glob(filepath.Join(f.Dir, "*.sqlite")); len(files) == 0 {
		entries, _ := os.ReadDir(f.Dir)
		t.Errorf("no SQLite file in %s: %v", f.Dir, entries)
	}
	if err := client.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}

	stopped = true
	servertest.StopCleanly(t, f.Stop, f.Dir)
	if c, err := net.DialTimeout("tcp", f.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", f.Addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Logf("dial after Stop: %v", err)
	}
}

// mongoRoundTrip connects a MongoDB client to uri, writes a document into servertest.c
// and reads it back; the caller disconnects the client.
func mongoRoundTrip(ctx context.Context, t *testing.T, uri string) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	coll := client.Database("servertest").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got struct{ V string }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil || got.V != "x" {
		t.Fatalf("find: %+v, %v", got, err)
	}
	return client
}

func TestStartFerretDBPostgreSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := postgres.Start(ctx, postgres.Options{})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	f, err := ferret.Start(ctx, ferret.Options{PostgreSQLURL: pg.DSN})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if f.Handler != ferret.PostgreSQL {
		t.Errorf("Handler = %q, want postgresql", f.Handler)
	}
	client := mongoRoundTrip(ctx, t, f.URI)
	defer client.Disconnect(ctx)
	// FerretDB keeps each MongoDB database as a PostgreSQL schema.
	psql := exec.Command(filepath.Join(pg.BinDir, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port),
		"-U", postgres.User, "-d", postgres.Database, "-Atc",
		"select count(*) from information_schema.schemata where schema_name = 'servertest'")
	psql.Env = append(os.Environ(), "PGPASSWORD="+pg.Password)
	out, err := psql.CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "1" {
		t.Errorf("schema servertest in PostgreSQL: count %q, want 1", out)
	}
}
