// Package etcdcounter is a counter kept in etcd and raised through etcd's gRPC API (KV
// Range and Txn), the way a service raises a counter or a balance in a key-value store:
// read the value and its mod_revision, then a Txn that writes value+1 only if the key's
// mod_revision is still the one read. It comes in two versions:
//
//   - Naive retries the whole read-and-Txn after any error. When the Txn's response is
//     lost after etcd applied it (a response-cut at the API layer), the retry reads the
//     raised value and raises it again: the counter counts one increment twice.
//   - Once writes a request key (req/<id>) in the same Txn, compared absent, and a
//     retry that finds it answers with the value it recorded: a replay, not a second
//     increment.
//
// It speaks gRPC directly (google.golang.org/grpc with a codec of raw bytes, the
// messages of etcd's api/v3 etcdserverpb encoded with protowire), so that it needs no
// etcd client module; the field numbers are etcd's rpc.proto and kv.proto.
package etcdcounter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protowire"
)

// Retries is how many attempts of an increment may fail (an error) before it gives up;
// a read again because another client raised the counter first is not one.
const Retries = 10

// Client raises counters in one etcd through its gRPC API.
type Client struct {
	conn *grpc.ClientConn
	// OnRetry, when set, is called with the error of each attempt that is retried.
	OnRetry func(error)
	// OnConn, when set, is called after each call with the local address of the
	// connection it used (indoubttest's Op.Conn, which ties the proxy's faults to the
	// attempt they hit).
	OnConn func(addr string)
}

// Dial returns a client of the etcd whose client URL is at addr (host:port, plain
// HTTP/2: etcd serves gRPC on its client port).
func Dial(addr string) (*Client, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// raw is the codec of messages already encoded: *[]byte both ways.
type raw struct{}

func (raw) Name() string { return "proto" }

func (raw) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T", v)
	}
	return *b, nil
}

func (raw) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (c *Client) invoke(ctx context.Context, method string, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var resp []byte
	var p peer.Peer
	err := c.conn.Invoke(ctx, "/etcdserverpb.KV/"+method, &req, &resp, grpc.ForceCodec(raw{}), grpc.Peer(&p))
	if c.OnConn != nil && p.LocalAddr != nil {
		c.OnConn(p.LocalAddr.String())
	}
	return resp, err
}

// Get returns the counter at key (0 when absent) and its mod_revision (0 when absent).
func (c *Client) Get(ctx context.Context, key string) (value, modRevision int64, err error) {
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType) // RangeRequest.key
	req = protowire.AppendString(req, key)
	resp, err := c.invoke(ctx, "Range", req)
	if err != nil {
		return 0, 0, err
	}
	kvs, err := fields(resp, 2) // RangeResponse.kvs
	if err != nil || len(kvs) == 0 {
		return 0, 0, err
	}
	kv, err := parse(kvs[0])
	if err != nil {
		return 0, 0, err
	}
	value, err = strconv.ParseInt(string(kv.bytes[5]), 10, 64) // KeyValue.value
	if err != nil {
		return 0, 0, fmt.Errorf("%s holds %q, not a counter", key, kv.bytes[5])
	}
	return value, int64(kv.varints[3]), nil // KeyValue.mod_revision
}

// compare targets (etcd's Compare.CompareTarget).
const (
	targetVersion = 0
	targetMod     = 2
)

// cmp encodes Compare{result: EQUAL, target, key, version or mod_revision: n}.
func cmp(target int, key string, n int64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.VarintType) // target
	b = protowire.AppendVarint(b, uint64(target))
	b = protowire.AppendTag(b, 3, protowire.BytesType) // key
	b = protowire.AppendString(b, key)
	field := protowire.Number(4) // version
	if target == targetMod {
		field = 6 // mod_revision
	}
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(n))
}

// put encodes RequestOp{request_put: PutRequest{key, value}}.
func put(key, value string) []byte {
	var p []byte
	p = protowire.AppendTag(p, 1, protowire.BytesType)
	p = protowire.AppendString(p, key)
	p = protowire.AppendTag(p, 2, protowire.BytesType)
	p = protowire.AppendString(p, value)
	var op []byte
	op = protowire.AppendTag(op, 2, protowire.BytesType)
	return protowire.AppendBytes(op, p)
}

// txn runs TxnRequest{compare, success} and returns whether it succeeded.
func (c *Client) txn(ctx context.Context, compares, success [][]byte) (bool, error) {
	var req []byte
	for _, m := range compares {
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, m)
	}
	for _, m := range success {
		req = protowire.AppendTag(req, 2, protowire.BytesType)
		req = protowire.AppendBytes(req, m)
	}
	resp, err := c.invoke(ctx, "Txn", req)
	if err != nil {
		return false, err
	}
	m, err := parse(resp)
	return m.varints[2] == 1, err // TxnResponse.succeeded
}

// IncrementNaive raises the counter at key by one and returns the value it wrote,
// retrying the read and the Txn after any error: the naive version.
func (c *Client) IncrementNaive(ctx context.Context, key string) (int64, error) {
	var err, lost error
	for failed, moved := 0, 0; failed < Retries && moved < maxMoved; {
		var v, rev int64
		var ok bool
		if v, rev, err = c.Get(ctx, key); err == nil {
			ok, err = c.txn(ctx, [][]byte{cmp(targetMod, key, rev)}, [][]byte{put(key, strconv.FormatInt(v+1, 10))})
			if err == nil && ok {
				return v + 1, nil
			}
			if err == nil {
				// Another client raised it first: read again.
				moved++
				err = ErrMoved
				continue
			}
		}
		failed++
		lost = err
		c.retried(err, failed)
	}
	return 0, gaveUp(err, lost)
}

// gaveUp is the error of an increment that gave up: ErrMoved only when no attempt
// failed with an error (one that did may have applied, and its error says so).
func gaveUp(last, lost error) error {
	if lost != nil {
		return lost
	}
	return last
}

// maxMoved bounds the reads again after another client raised the counter first.
const maxMoved = 1000

// ErrMoved is the error of an increment that gave up because the counter kept moving
// under it, with no attempt that failed otherwise: it certainly did not apply.
var ErrMoved = errors.New("the counter kept moving: not raised")

// IncrementOnce raises the counter at key by one as request id, once whatever the
// retries: the Txn also writes req/<id> with the value it wrote, compared absent. It
// returns the value the increment wrote, and replayed when an earlier attempt had
// applied it (its response was lost) and this one changed nothing.
func (c *Client) IncrementOnce(ctx context.Context, key, id string) (wrote int64, replayed bool, err error) {
	marker := "req/" + id
	var lost error
	for failed, moved := 0, 0; failed < Retries && moved < maxMoved; {
		var v, rev int64
		var ok bool
		if v, rev, err = c.Get(ctx, key); err == nil {
			ok, err = c.txn(ctx,
				[][]byte{cmp(targetMod, key, rev), cmp(targetVersion, marker, 0)},
				[][]byte{put(key, strconv.FormatInt(v+1, 10)), put(marker, strconv.FormatInt(v+1, 10))})
			if err == nil && ok {
				return v + 1, false, nil
			}
			if err == nil {
				// The counter moved, or the request was applied before: which?
				var done int64
				if done, _, err = c.Get(ctx, marker); err == nil && done > 0 {
					return done, true, nil
				}
				if err == nil {
					moved++
					err = ErrMoved
					continue
				}
			}
		}
		failed++
		lost = err
		c.retried(err, failed)
	}
	return 0, false, gaveUp(err, lost)
}

// retried reports the failed-th failed attempt, if another follows, and pauses.
func (c *Client) retried(err error, failed int) {
	if c.OnRetry != nil && failed < Retries {
		c.OnRetry(err)
	}
	time.Sleep(time.Duration(failed) * time.Millisecond)
}

// message is the fields of a protobuf message this package reads: the last varint
// and the last bytes value of each field number.
type message struct {
	varints map[protowire.Number]uint64
	bytes   map[protowire.Number][]byte
}

func parse(b []byte) (message, error) {
	m := message{varints: map[protowire.Number]uint64{}, bytes: map[protowire.Number][]byte{}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, errors.New("etcd response does not decode")
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return m, errors.New("etcd response does not decode")
			}
			m.varints[num], b = v, b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return m, errors.New("etcd response does not decode")
			}
			m.bytes[num], b = v, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return m, errors.New("etcd response does not decode")
			}
			b = b[n:]
		}
	}
	return m, nil
}

// fields returns every bytes value of field num, in order (a repeated message).
func fields(b []byte, num protowire.Number) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		n0, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errors.New("etcd response does not decode")
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(n0, typ, b)
		if n < 0 {
			return nil, errors.New("etcd response does not decode")
		}
		if n0 == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			out = append(out, v)
		}
		b = b[n:]
	}
	return out, nil
}
