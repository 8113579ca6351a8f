// Package mongo is the MongoDB adapter (mongo-driver v2), run against FerretDB here and
// against MongoDB replica sets beyond one machine.
//
// The budget is one document decremented by findOneAndUpdate with the condition in the
// filter ({_id, balance: {$gt: 0}}, $inc -1, return the document after): no document
// matched means rejected. Registers are one document per key; CAS is an update whose
// filter holds the expected value. Idempotent operations push their op id onto an array
// in the same document, in the same single-document update, with the filter requiring
// that the id is not there yet; a retry that matches nothing looks the id up to tell a
// replay from a rejection. Single-document updates are atomic in MongoDB and FerretDB, so
// no transaction is needed (FerretDB has none).
//
// Each session is its own mongo.Client with a pool of at most one connection. The driver
// also keeps a monitoring connection per server, which only ever sends hello; a session's
// Conn is the local address of the connection that last carried any other command.
package mongo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/indoubt/indoubt/workloads"
)

// Config says how to reach the server and how the driver behaves.
type Config struct {
	// URI is the connection string ("mongodb://127.0.0.1:27017/"). Required.
	URI string
	// Database holds the adapter's collections (budget, registers); "" means "indoubt".
	Database string
	// DriverRetry leaves the driver's retryable writes and reads at their defaults (on:
	// one retry after a network error or a retryable server error; the driver applies
	// them to replica sets and sharded clusters only, never to a standalone server such as
	// FerretDB). When false they are off, as are adaptive retries, so every attempt the
	// caller sees is one request on the wire.
	DriverRetry bool
	// Majority sets write concern majority and, for register reads, read concern
	// linearizable: what a replica set needs for the register workload's guarantees.
	// Leave it off for a standalone server.
	Majority bool
	// Timeout is the driver's client-side operation timeout (CSOT), which also bounds
	// server selection; 0 leaves the driver's defaults and the context in charge.
	Timeout time.Duration
}

// Client is an open adapter. It implements budget.Store; Register returns the register
// store over the same server. Client is safe for concurrent use; its sessions are not.
type Client struct {
	cfg   Config
	db    string
	admin *mongo.Client
}

// Open connects and pings the server. The client it returns uses its own pool for Reset
// and Balance; sessions dial their own connections.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.URI == "" {
		return nil, errors.New("open mongo: no URI")
	}
	c := &Client{cfg: cfg, db: cfg.Database}
	if c.db == "" {
		c.db = "indoubt"
	}
	admin, err := mongo.Connect(c.options(nil))
	if err != nil {
		return nil, fmt.Errorf("open mongo: %w", err)
	}
	if err := admin.Ping(ctx, nil); err != nil {
		_ = admin.Disconnect(context.Background())
		return nil, fmt.Errorf("open mongo: %w", err)
	}
	c.admin = admin
	return c, nil
}

// Close disconnects the client's pool. Sessions are closed by their owners.
func (c *Client) Close() error { return c.admin.Disconnect(context.Background()) }

func (c *Client) options(dialer options.ContextDialer) *options.ClientOptions {
	o := options.Client().ApplyURI(c.cfg.URI)
	if dialer != nil {
		o.SetDialer(dialer)
	}
	if !c.cfg.DriverRetry {
		o.SetRetryWrites(false).SetRetryReads(false).SetMaxAdaptiveRetries(0)
	}
	if c.cfg.Majority {
		o.SetWriteConcern(writeconcern.Majority())
	}
	if c.cfg.Timeout > 0 {
		o.SetTimeout(c.cfg.Timeout)
	}
	return o
}

func (c *Client) collection(client *mongo.Client, name string) *mongo.Collection {
	return client.Database(c.db).Collection(name)
}

// session is one worker's mongo.Client with at most one pooled connection.
type session struct {
	c      *Client
	client *mongo.Client
	addr   atomic.Pointer[string]
}

func (c *Client) newSession(ctx context.Context) (*session, error) {
	s := &session{c: c}
	o := c.options(sessionDialer{s}).SetMaxPoolSize(1).SetMinPoolSize(0)
	client, err := mongo.Connect(o)
	if err != nil {
		return nil, fmt.Errorf("mongo session: %w", Classify(err))
	}
	s.client = client
	// Check out the one connection now, so the first operation's invocation already has
	// a connection to name.
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongo session: %w", Classify(err))
	}
	return s, nil
}

// Conn returns the local address of the connection that last carried a command other
// than hello: the session's pooled connection, not the driver's monitoring one.
func (s *session) Conn() string {
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Close disconnects the session's client.
func (s *session) Close() error { return s.client.Disconnect(context.Background()) }

type sessionDialer struct{ s *session }

func (d sessionDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: conn, s: d.s, local: conn.LocalAddr().String()}, nil
}

// trackedConn tells the session its local address once it carries a command: the driver
// dials monitoring and pooled connections through the same dialer, and only pooled ones
// carry anything but hello.
type trackedConn struct {
	net.Conn
	s       *session
	local   string
	carrier atomic.Bool
}

func (c *trackedConn) Write(b []byte) (int, error) {
	if c.carrier.Load() || carriesCommand(b) {
		c.carrier.Store(true)
		c.s.addr.Store(&c.local)
	}
	return c.Conn.Write(b)
}

// carriesCommand reports whether b starts an OP_MSG whose command is not a handshake or
// monitoring hello. The driver writes each message with one Write. Layout: a 16-byte
// header (length, request id, response to, opcode 2013), 4 bytes of flags, a body
// section (kind 0) holding one BSON document whose first element names the command.
func carriesCommand(b []byte) bool {
	const opMsg = 2013
	if len(b) < 27 || binary.LittleEndian.Uint32(b[12:16]) != opMsg || b[20] != 0 {
		return false
	}
	name := b[26:]
	for i, ch := range name {
		if ch == 0 {
			name = name[:i]
			switch string(name) {
			case "hello", "isMaster", "ismaster":
				return false
			}
			return true
		}
	}
	return false
}

// The driver's error labels that leave an operation's outcome unknown, besides
// NetworkError, which is named by the network error underneath.
var unknownLabels = []struct {
	label  string
	reason workloads.Reason
}{
	{"RetryableWriteError", "retryable-write"},
	{"UnknownTransactionCommitResult", "unknown-commit"},
}

// Classify wraps an error from mongo-driver in the contract of package workloads:
//   - no server selected, a dial error, a disconnected client: definite, nothing was sent;
//   - an error labelled NetworkError, RetryableWriteError or UnknownTransactionCommitResult,
//     a timeout (context deadline, CSOT, maxTimeMS) or a canceled context: unknown;
//   - a write concern error: unknown (the write applied on the primary, and may be lost);
//   - WriteConflict (code 112) or a TransientTransactionError: conflict;
//   - any other server error (duplicate key, bad value, unknown operator): definite, with
//     the code name or number as the reason;
//   - anything else: unknown.
//
// Classify returns nil for nil and never wraps mongo.ErrNoDocuments, which callers handle
// first.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var opErr *net.OpError
	switch {
	case errors.As(err, new(topology.ServerSelectionError)):
		return workloads.Definite(err, "server-selection")
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return workloads.Definite(err, workloads.ReasonDial)
	case errors.Is(err, mongo.ErrClientDisconnected):
		return workloads.Definite(err, workloads.ReasonClientClosed)
	}
	var se mongo.ServerError
	isServer := errors.As(err, &se)
	if isServer {
		if se.HasErrorLabel("NetworkError") {
			return workloads.Unknown(err, networkReason(err))
		}
		for _, l := range unknownLabels {
			if se.HasErrorLabel(l.label) {
				return workloads.Unknown(err, l.reason)
			}
		}
	}
	switch {
	case mongo.IsTimeout(err):
		return workloads.Unknown(err, workloads.ReasonTimeout)
	case errors.Is(err, context.Canceled):
		return workloads.Unknown(err, workloads.ReasonCanceled)
	case mongo.IsNetworkError(err):
		return workloads.Unknown(err, networkReason(err))
	}
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil {
		return workloads.Unknown(err, "write-concern")
	}
	if isServer {
		switch {
		case se.HasErrorCode(112):
			return workloads.Conflict(err, workloads.ReasonWriteConflict)
		case se.HasErrorLabel("TransientTransactionError"):
			return workloads.Conflict(err, "transient-transaction")
		case mongo.IsDuplicateKeyError(err):
			return workloads.Definite(err, workloads.ServerCode("DuplicateKey"))
		}
		return workloads.Definite(err, serverReason(err))
	}
	return workloads.Unknown(err, "")
}

// networkReason names a lost connection as every store does, from the network error
// the driver wraps.
func networkReason(err error) workloads.Reason {
	if r := workloads.NetReason(err); r != "" {
		return r
	}
	return workloads.ReasonConnLost
}

// serverReason names a server error by its code name, else its code.
func serverReason(err error) workloads.Reason {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		if ce.Name != "" {
			return workloads.ServerCode(ce.Name)
		}
		return workloads.ServerCode(fmt.Sprintf("code-%d", ce.Code))
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return workloads.ServerCode(fmt.Sprintf("code-%d", we.WriteErrors[0].Code))
	}
	return workloads.ServerCode("")
}

// readConcern is the read concern of register reads.
func (c *Client) readConcern() *readconcern.ReadConcern {
	if c.cfg.Majority {
		return readconcern.Linearizable()
	}
	return nil
}
