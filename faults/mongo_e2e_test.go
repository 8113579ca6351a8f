package faults

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/faults/internal/faultstest"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/ferret"
)

// startFerretDB launches a FerretDB (in process, SQLite) of the test's own, stopped when
// the test ends.
func startFerretDB(t *testing.T) *ferret.FerretDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := ferret.Start(ctx, ferret.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stop ferretdb: %v", err)
		}
	})
	return f
}

// dialLog remembers the local address of every connection a driver dials.
type dialLog struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func (d *dialLog) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.addrs[c.LocalAddr().String()] = true
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialLog) has(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addrs[addr]
}

// mongoVia connects mongo-driver through addr with retryable writes and reads off and
// one pooled connection (the driver adds its own monitoring connection).
func mongoVia(t *testing.T, addr string) (*mongo.Client, *dialLog) {
	t.Helper()
	d := &dialLog{addrs: map[string]bool{}}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").
		SetRetryWrites(false).SetRetryReads(false).SetMaxPoolSize(1).SetDialer(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c, d
}

func TestMongoCommitFaultsWithDriver(t *testing.T) {
	f := startFerretDB(t)
	ctx := context.Background()
	direct, err := mongo.Connect(options.Client().ApplyURI(f.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Disconnect(ctx)
	balance := func(coll, id string) int64 {
		var d struct {
			Balance int64 `bson:"balance"`
		}
		if err := direct.Database("indoubt").Collection(coll).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d.Balance
	}
	ops := []struct {
		name, prefix string
		do           func(c *mongo.Collection, id string) error
	}{
		{"findOneAndUpdate", "{findAndModify: ", func(c *mongo.Collection, id string) error {
			return c.FindOneAndUpdate(ctx,
				bson.D{{Key: "_id", Value: id}, {Key: "balance", Value: bson.D{{Key: "$gt", Value: 0}}}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int64(-1)}}}},
				options.FindOneAndUpdate().SetReturnDocument(options.After)).Err()
		}},
		{"updateOne with upsert", "{update: ", func(c *mongo.Collection, id string) error {
			_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int64(-1)}}}}, options.UpdateOne().SetUpsert(true))
			return err
		}},
	}
	for _, op := range ops {
		for _, fl := range commitFaults {
			t.Run(fl.kind.String()+" "+op.name, func(t *testing.T) {
				id := fmt.Sprintf("budget-%d", rand.Uint32())
				if _, err := direct.Database("indoubt").Collection("budget").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "balance", Value: int64(10)}}); err != nil {
					t.Fatal(err)
				}
				px, log := startProtoProxy(t, f.Addr, toxics.Mongo{}, 1)
				c, dials := mongoVia(t, px.Addr())
				coll := c.Database("indoubt").Collection("budget")
				// Unfaulted first: the handshake, the first hello and ping are not commits.
				if err := c.Ping(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if err := op.do(coll, id); err != nil {
					t.Fatalf("unfaulted: %v", err)
				}
				fl.arm(px.Faults())
				err := op.do(coll, id)
				if !mongo.IsNetworkError(err) {
					t.Fatalf("faulted: error %v (%T), want a network error", err, err)
				}
				e, truth := fl.aftermath(t, balance("budget", id), log.All())
				if e.Kind != fl.kind || e.Truth != truth || !dials.has(e.Conn) || !strings.HasPrefix(e.Statement, op.prefix) || e.Protocol != "mongo" {
					t.Errorf("event %+v, want kind %v truth %v, a conn the driver dialed, statement %s...", e, fl.kind, truth, op.prefix)
				}
				if e.Txn == nil || !e.Txn.Wrote || e.Txn.Seq == 0 || !strings.HasPrefix(e.Txn.Text, op.prefix) {
					t.Errorf("event's transaction %+v, want a numbered write %s...", e.Txn, op.prefix)
				}
				if fl.applied && !strings.Contains(e.Tag, "ok: 1") {
					t.Errorf("cut's tag %q does not show the proof", e.Tag)
				}
			})
		}
	}
}

// A write the server refuses ends the armed cut unfired: the client gets the error, and
// the cut waits for the next commit.
func TestMongoWriteErrorIsReleased(t *testing.T) {
	f := startFerretDB(t)
	ctx := context.Background()
	px, log := startProtoProxy(t, f.Addr, toxics.Mongo{}, 1)
	c, _ := mongoVia(t, px.Addr())
	coll := c.Database("indoubt").Collection("dups")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	px.Faults().Cut.Set(1, 1)
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	if !mongo.IsDuplicateKeyError(err) || len(log.All()) != 0 {
		t.Fatalf("duplicate insert: %v, events %v; want the server's duplicate key error, no fault", err, log.All())
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); !mongo.IsNetworkError(err) || len(log.All()) != 1 {
		t.Fatalf("next insert: %v, events %v; want it cut", err, log.All())
	}
}

// TestMongoManyCutConnections faults a thousand connections from concurrent raw OP_MSG
// clients, each inserting a document of its own, and checks that FerretDB holds exactly
// the documents of the connections whose fault was a cut, that every event names a
// client that lost its connection, and that no goroutine outlives the proxy. (Each
// connection writes its own document because FerretDB 1.24 loses concurrent updates of
// one document: see TestFerretDBLosesConcurrentIncrements.)
func TestMongoManyCutConnections(t *testing.T) {
	f := startFerretDB(t)
	coll := fmt.Sprintf("cuts_%d", rand.Uint32())
	// Create the database and the collection first: FerretDB opens a database's SQLite
	// pool, and its goroutine, on the first write.
	if _, err := rawMongo(f.Addr, bson.D{{Key: "create", Value: coll}, {Key: "$db", Value: "indoubt"}}); err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()
	px, log := startProtoProxy(t, f.Addr, toxics.Mongo{}, 9)
	px.Faults().Mixed.Set(1, 0)
	const conns = 1000
	idOf := faultstest.CutConnections(t, conns, func(i int) (string, error) {
		insert := bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(i)}}}}, {Key: "$db", Value: "indoubt"}}
		return rawMongoExpectCut(px.Addr(), insert)
	})
	evs := log.All()
	if len(evs) != conns {
		t.Errorf("%d events for %d faulted connections", len(evs), conns)
	}
	// The event's statement names the document; its connection names a client that lost
	// its connection. The address alone does not name the document: 1000 connections
	// in a row reuse ephemeral ports.
	applied := map[int32]bool{}
	for _, e := range evs {
		if _, ok := idOf[e.Conn]; !ok {
			t.Fatalf("event %+v names no client that lost its connection", e)
		}
		m := mongoDocID.FindStringSubmatch(e.Statement)
		if m == nil {
			t.Fatalf("event statement %q names no document", e.Statement)
		}
		id, _ := strconv.Atoi(m[1])
		if e.Truth == toxics.Applied {
			applied[int32(id)] = true
		}
	}
	if n := len(applied); n < conns/3 || n > 2*conns/3 {
		t.Errorf("%d of %d mixed faults were cuts, want about half", n, conns)
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	// FerretDB ends each connection's goroutines once it sees the close.
	goleak.VerifyNone(t, ignore)
	reply, err := rawMongo(f.Addr, bson.D{{Key: "find", Value: coll}, {Key: "batchSize", Value: int32(conns + 1)}, {Key: "$db", Value: "indoubt"}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cursor struct {
			ID         int64 `bson:"id"`
			FirstBatch []struct {
				ID int32 `bson:"_id"`
			} `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil || got.Cursor.ID != 0 {
		t.Fatalf("read the documents: %v, cursor %d", err, got.Cursor.ID)
	}
	stored := map[int32]bool{}
	for _, d := range got.Cursor.FirstBatch {
		stored[d.ID] = true
	}
	for id := range applied {
		if !stored[id] {
			t.Errorf("connection %d was cut after its insert committed, but its document is missing", id)
		}
	}
	for id := range stored {
		if !applied[id] {
			t.Errorf("document %d is stored, but its connection's insert was dropped", id)
		}
	}
}

// mongoDocID finds the _id of the one document an insert event's statement carries.
var mongoDocID = regexp.MustCompile(`_id\D{0,4}?(\d+)`)

// TestFerretDBLosesConcurrentIncrements records a property of the server, not of the
// proxy: FerretDB 1.24 on SQLite applies an update as read, modify, write without
// isolation, so concurrent $inc of one document through findAndModify lose increments.
// If a FerretDB upgrade makes it atomic this test fails: then the budget workload on
// FerretDB stops finding lost decrements, and the notes must change.
func TestFerretDBLosesConcurrentIncrements(t *testing.T) {
	f := startFerretDB(t)
	id := fmt.Sprintf("probe-%d", rand.Uint32())
	if _, err := rawMongo(f.Addr, bson.D{{Key: "insert", Value: "counters"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}, {Key: "n", Value: int32(0)}}}}, {Key: "$db", Value: "indoubt"}}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	inc := bson.D{{Key: "findAndModify", Value: "counters"}, {Key: "query", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}}, {Key: "$db", Value: "indoubt"}}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := rawMongo(f.Addr, inc); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	reply, err := rawMongo(f.Addr, bson.D{{Key: "find", Value: "counters"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "$db", Value: "indoubt"}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cursor struct {
			FirstBatch []struct {
				N int64 `bson:"n"`
			} `bson:"firstBatch"`
		} `bson:"cursor"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil || len(got.Cursor.FirstBatch) != 1 {
		t.Fatalf("read the counter: %v %s", err, bson.Raw(reply))
	}
	n := got.Cursor.FirstBatch[0].N
	t.Logf("%d acknowledged increments from %d connections left n = %d", workers*each, workers, n)
	if n >= workers*each {
		t.Errorf("no increment lost: FerretDB's updates are atomic now")
	}
}

// rawOpMsg encodes cmd as an OP_MSG with one body section.
func rawOpMsg(reqID int32, cmd bson.D) ([]byte, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(16+4+1+len(body)))
	b = binary.LittleEndian.AppendUint32(b, uint32(reqID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 2013)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, 0)
	return append(b, body...), nil
}

// readOpMsg reads one OP_MSG reply and returns its body.
func readOpMsg(r io.Reader) ([]byte, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n < 21 || n > 48_000_000 || binary.LittleEndian.Uint32(hdr[12:]) != 2013 {
		return nil, fmt.Errorf("reply header %x", hdr)
	}
	rest := make([]byte, n-16)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, err
	}
	if rest[4] != 0 {
		return nil, fmt.Errorf("reply section kind %d", rest[4])
	}
	return rest[5:], nil
}

// rawMongo runs one command on a new connection and returns the reply's body.
func rawMongo(addr string, cmd bson.D) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg, err := rawOpMsg(1, cmd)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	body, err := readOpMsg(c)
	if err != nil {
		return nil, err
	}
	if ok, _ := bson.Raw(body).Lookup("ok").AsFloat64OK(); ok != 1 {
		return nil, fmt.Errorf("command failed: %s", bson.Raw(body))
	}
	return body, nil
}

// rawMongoExpectCut sends cmd on a new connection and expects the connection to end
// without a reply. It returns the connection's local address.
func rawMongoExpectCut(addr string, cmd bson.D) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg, err := rawOpMsg(7, cmd)
	if err != nil {
		return "", err
	}
	if _, err := c.Write(msg); err != nil {
		return "", err
	}
	body, err := readOpMsg(c)
	if err == nil {
		return "", fmt.Errorf("got reply %s: no fault", bson.Raw(body))
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", err
	}
	return c.LocalAddr().String(), nil
}

// TestMongoGarbageNeverPanics sends random bytes through the proxy from either side: the
// client's to a real FerretDB, and a listener's that answers with random bytes.
func TestMongoGarbageNeverPanics(t *testing.T) {
	f := startFerretDB(t)
	insert := bson.D{{Key: "insert", Value: "after"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}, {Key: "$db", Value: "indoubt"}}
	checkProxyGarbage(t, proxyGarbage{
		upstream: f.Addr, proto: toxics.Mongo{}, seed: 6,
		plausible: func(b []byte) {
			// A plausible header, to get past the first check.
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			binary.LittleEndian.PutUint32(b[12:], 2013)
		},
		write: func(addr string) error {
			_, err := rawMongo(addr, insert)
			return err
		},
		stmt: `insert: "after"`,
	})
}

// With every commit point dropped from the first byte on, mongo-driver's handshake and
// monitoring (hello, isMaster), ping, buildInfo and reads go through; the first write,
// the adapter's findAndModify, is the one dropped, and endSessions at disconnect passes.
func TestMongoDefaultPointsSkipHandshakeAndReads(t *testing.T) {
	f := startFerretDB(t)
	ctx := context.Background()
	px, log := startProtoProxy(t, f.Addr, toxics.Mongo{}, 1)
	px.Faults().Drop.Set(1, 0)
	c, _ := mongoVia(t, px.Addr())
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Err(); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	coll := c.Database("indoubt").Collection("budget")
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "absent"}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("find: %v", err)
	}
	if n := len(log.All()); n != 0 {
		t.Fatalf("%d faults before the first write: %+v", n, log.All())
	}
	err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "absent"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: -1}}}}).Err()
	if !mongo.IsNetworkError(err) {
		t.Fatalf("findOneAndUpdate: %v, want it dropped", err)
	}
	if err := c.Disconnect(ctx); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
	if evs := log.All(); len(evs) != 1 || !strings.HasPrefix(evs[0].Statement, "{findAndModify: ") {
		t.Fatalf("events %+v, want the findAndModify dropped", evs)
	}
}
