// Package httppay is a payments API, the kind a mobile or service client calls and
// retries: POST /payments with a JSON body and an Idempotency-Key header, answered 201
// with the payment, on Go's net/http over PostgreSQL. It comes in two versions:
//
//   - Naive inserts a payment for every request. When the response is lost after the
//     handler committed (a response-cut), the client's retry inserts it again: the
//     customer pays twice.
//   - Idempotent honours the key (the IETF httpapi draft's Idempotency-Key, Stripe's
//     convention): the first request with a key stores the key, a hash of the request
//     and the response in the same transaction as the payment; a retry with the same
//     key and body is answered from the stored response with the header
//     Idempotent-Replayed: true, and changes nothing; the same key with another body
//     is refused with 422 Unprocessable Content.
//
// Client is the caller: it sends the key and retries any error and any 5xx response,
// as such clients do. GET /paid answers the payments per key, for a final read
// through the service's own API. Its tests (httppay_test.go) drive both versions through
// indoubttest/apitest under response-cut and check the payments by key, exactly once.
package httppay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments"
)

// Schema creates the tables: one row per payment, tagged with the key of the request
// that made it, and one row per idempotency key the idempotent version has seen.
const Schema = `
create table if not exists payments (
	id     bigserial primary key,
	key    text not null,
	amount bigint not null
);
create table if not exists idempotency_keys (
	key          text primary key,
	request_hash text not null,
	status       int not null,
	response     text not null
);`

// Setup creates the tables through pool.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, Schema)
	return err
}

// Payment is the body of a 201: the payment made.
type Payment struct {
	ID     int64  `json:"id"`
	Key    string `json:"key"`
	Amount int64  `json:"amount"`
}

type request struct {
	Amount int64 `json:"amount"`
}

// Handler serves POST /payments. Idempotent selects the version; Pool is the database.
type Handler struct {
	Pool       *pgxpool.Pool
	Idempotent bool
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/paid" {
		h.paid(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/payments" {
		http.Error(w, "only POST /payments and GET /paid", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	var req request
	if err != nil || json.Unmarshal(body, &req) != nil || req.Amount <= 0 {
		http.Error(w, "want a JSON body with a positive amount", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "an Idempotency-Key header is required", http.StatusBadRequest)
		return
	}
	var status int
	var resp []byte
	var replayed bool
	if h.Idempotent {
		status, resp, replayed, err = h.payOnce(r.Context(), key, body, req)
	} else {
		status, resp, err = h.pay(r.Context(), h.Pool, key, req)
	}
	if err != nil {
		http.Error(w, "payment failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	w.Write(resp)
}

type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pay inserts the payment and returns the 201 that describes it.
func (h *Handler) pay(ctx context.Context, db execer, key string, req request) (int, []byte, error) {
	p := Payment{Key: key, Amount: req.Amount}
	if err := db.QueryRow(ctx, "insert into payments (key, amount) values ($1, $2) returning id", key, req.Amount).Scan(&p.ID); err != nil {
		return 0, nil, err
	}
	b, err := json.Marshal(p)
	return http.StatusCreated, b, err
}

// payOnce makes the payment and stores its key and response in one transaction, or
// answers from what the key stored. A concurrent request with the same key waits on
// the key's row until the first commits, then replays it.
func (h *Handler) payOnce(ctx context.Context, key string, body []byte, req request) (status int, resp []byte, replayed bool, err error) {
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	err = pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		var stored string
		err := tx.QueryRow(ctx, `insert into idempotency_keys (key, request_hash, status, response) values ($1, $2, 0, '')
			on conflict (key) do nothing returning key`, key, hash).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			// The key was used before: answer as it was answered, if it was the same
			// request.
			var storedHash, storedResp string
			if err := tx.QueryRow(ctx, "select request_hash, status, response from idempotency_keys where key = $1", key).Scan(&storedHash, &status, &storedResp); err != nil {
				return err
			}
			if storedHash != hash {
				status, resp = http.StatusUnprocessableEntity, []byte(`{"error":"this Idempotency-Key was used with another request"}`)
				return nil
			}
			resp, replayed = []byte(storedResp), true
			return nil
		}
		if err != nil {
			return err
		}
		if status, resp, err = h.pay(ctx, tx, key, req); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "update idempotency_keys set status = $2, response = $3 where key = $1", key, status, string(resp))
		return err
	})
	return status, resp, replayed, err
}

// paid answers GET /paid: the payments per key, as a JSON object, for a final read
// through the service's own API (indoubt exec --final-cmd).
func (h *Handler) paid(w http.ResponseWriter, r *http.Request) {
	paid, err := Paid(r.Context(), h.Pool)
	if err != nil {
		http.Error(w, "read failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(paid)
}

// Paid returns how many payments each key made: the final state an exactly-once check
// holds the requests to.
func Paid(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, error) {
	rows, err := pool.Query(ctx, "select key, count(*) from payments group by key")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// Client calls the API at Base through HTTP (http.DefaultClient when nil).
type Client struct {
	Base string
	HTTP *http.Client
}

// Result is what the API answered to a payment.
type Result struct {
	Payment Payment
	// Replayed is true when the API answered from the key's stored response
	// (Idempotent-Replayed: true): the payment was made once, by an earlier attempt.
	Replayed bool
}

// StatusError is a response the client does not retry: a 4xx, the API's definite
// refusal.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

type connHook struct{}

type hooks struct {
	conn func(string)
	lost func(error)
}

// errTransportRetry is what OnConn's lost is told when net/http's Transport sends a
// request again on a new connection by itself: it does so for a request with an
// Idempotency-Key whose reused connection was lost before the response.
var errTransportRetry = errors.New("connection lost before the response; net/http's Transport sent the request again")

// OnConn returns ctx carrying conn, which Pay calls with the local address of the
// connection each attempt uses (indoubttest's Op.Conn, which ties the proxy's faults to
// the attempt they hit), and lost, which it calls when net/http's Transport sent the
// request again by itself on a new connection (indoubttest's Op.Retried): an attempt
// the caller would not see otherwise.
func OnConn(ctx context.Context, conn func(addr string), lost func(error)) context.Context {
	return context.WithValue(ctx, connHook{}, hooks{conn, lost})
}

// Pay pays amount under key, retrying any error and any 5xx (payments.Retry: the
// "retry any error" wrapper) with the same key and body. A 4xx is returned at once as
// a *StatusError.
func (c *Client) Pay(ctx context.Context, key string, amount int64) (Result, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	body := fmt.Sprintf(`{"amount":%d}`, amount)
	var refused *StatusError
	res, err := payments.Retry(ctx, func(ctx context.Context) (Result, error) {
		if refused != nil {
			return Result{}, nil
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.Base, "/")+"/payments", strings.NewReader(body))
		if err != nil {
			return Result{}, err
		}
		if h, ok := ctx.Value(connHook{}).(hooks); ok {
			conns := 0
			req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) {
					if conns++; conns > 1 && h.lost != nil {
						// net/http's Transport sent the request again by itself.
						h.lost(errTransportRetry)
					}
					h.conn(info.Conn.LocalAddr().String())
				},
			}))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := hc.Do(req)
		if err != nil {
			return Result{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return Result{}, err
		}
		switch {
		case resp.StatusCode >= 500:
			return Result{}, &StatusError{resp.StatusCode, strings.TrimSpace(string(b))}
		case resp.StatusCode != http.StatusCreated:
			refused = &StatusError{resp.StatusCode, strings.TrimSpace(string(b))}
			return Result{}, nil
		}
		r := Result{Replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
		if err := json.Unmarshal(b, &r.Payment); err != nil {
			return Result{}, fmt.Errorf("201 with a body that is not a payment: %w", err)
		}
		return r, nil
	})
	if refused != nil {
		return Result{}, refused
	}
	return res, err
}
