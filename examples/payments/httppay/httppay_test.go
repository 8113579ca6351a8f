package httppay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/examples/payments/httppay"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/apitest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

func TestMain(m *testing.M) {
	code := indoubttest.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// service starts the payments API (naive or idempotent) on a real net/http server
// over a PostgreSQL database of the test's own, with the commit-aware proxy for HTTP in
// front of it. The API reaches its database directly: the faults are at the API.
func service(t *testing.T, idempotent bool) (api *indoubttest.Server, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := pgtest.Postgres(t)
	pool, err := pgxpool.New(ctx, db.DirectDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := httppay.Setup(ctx, pool); err != nil {
		t.Fatal(err)
	}
	svc := httptest.NewServer(&httppay.Handler{Pool: pool, Idempotent: idempotent})
	t.Cleanup(svc.Close)
	return apitest.HTTP(t, svc.Listener.Addr().String()), pool
}

// client reaches the API through the proxy with the URL it would use in production.
func client(api *indoubttest.Server) *httppay.Client {
	return &httppay.Client{Base: "http://payments.internal", HTTP: &http.Client{Transport: apitest.Transport(api)}}
}

// drive makes workers×each payments, each recorded as an exactly-once "apply" whose op
// id is the Idempotency-Key, then reads the payments per key from the database.
func drive(t *testing.T, api *indoubttest.Server, pool *pgxpool.Pool, workers, each int) *indoubttest.Recorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := indoubttest.NewRecorder(t, api)
	c := client(api)
	var wg sync.WaitGroup
	for range workers {
		w := rec.Worker()
		wg.Go(func() {
			for range each {
				op := w.Invoke("apply", nil)
				res, err := c.Pay(httppay.OnConn(payments.OnRetry(ctx, op.Retried), op.Conn, op.Retried), op.ID(), 5)
				var refused *httppay.StatusError
				switch {
				case err == nil:
					op.Ok(map[string]any{"payment": res.Payment.ID, "replayed": res.Replayed})
				case errors.As(err, &refused):
					op.Fail(err)
				default:
					op.Done(nil, err)
				}
			}
		})
	}
	wg.Wait()
	api.Disarm()
	paid, err := httppay.Paid(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	rec.Read("read", checker.ExactlyOnceState(paid))
	return rec
}

// TestNaiveUnderResponseCut: the naive API inserts a payment per request, so a retry of
// a request whose 201 was cut pays twice; the check fails naming each duplicated key,
// with the cut response as its proof, in results.json's evidence.requests as judged
// from the run directory (and again from its files alone) and in the report.
func TestNaiveUnderResponseCut(t *testing.T) {
	api, pool := service(t, false)
	api.Arm("response-cut:0.2,match=^POST /payments$")
	rep := indoubttest.Evaluate(t, drive(t, api, pool, 4, 15), indoubttest.ExactlyOnce())
	if rep.Verdict != checker.Invalid || !rep.Found("duplicate") {
		t.Fatalf("verdict %v, anomalies %v: want duplicates", rep.Verdict, rep.Anomalies)
	}
	paid, err := httppay.Paid(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	want := duplicated(t, paid, cutKeys(t, api.Events()))
	holdRequests(t, rep.RunDir, want)
	for _, w := range want {
		if !strings.Contains(rep.Text, w) {
			t.Errorf("the report does not say %q:\n%s", w, rep.Text)
		}
	}
}

// TestIdempotentUnderResponseCut: the idempotent API answers a retry from the key's
// stored response; every payment is made once, and the judge names each replay.
func TestIdempotentUnderResponseCut(t *testing.T) {
	api, pool := service(t, true)
	api.Arm("response-cut:0.2")
	rep := indoubttest.Check(t, drive(t, api, pool, 4, 15), indoubttest.ExactlyOnce())
	if rep.Verdict != checker.Valid {
		return
	}
	want := replays(cutKeys(t, api.Events()))
	holdRequests(t, rep.RunDir, want)
	for _, w := range want {
		if !strings.Contains(rep.Text, w) {
			t.Errorf("the report does not say %q:\n%s", w, rep.Text)
		}
	}
}

// TestWithoutFaults: both versions are valid when nothing is cut.
func TestWithoutFaults(t *testing.T) {
	for _, idem := range []bool{false, true} {
		api, pool := service(t, idem)
		indoubttest.Check(t, drive(t, api, pool, 2, 10), indoubttest.ExactlyOnce())
	}
}

// TestReusedKeyWithAnotherBody: a key reused with another body is refused with 422, as
// the service answers it, also when the first request's 201 was cut and replayed; the
// key paid once.
func TestReusedKeyWithAnotherBody(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api, pool := service(t, true)
	api.Arm("response-cut:1,max=1")
	c := client(api)
	first, err := c.Pay(ctx, "order-7", 5)
	if err != nil || !first.Replayed {
		t.Fatalf("first payment: %+v, %v; want it answered by a replay after its 201 was cut", first, err)
	}
	_, err = c.Pay(ctx, "order-7", 9)
	var refused *httppay.StatusError
	if !errors.As(err, &refused) || refused.Status != http.StatusUnprocessableEntity || !strings.Contains(refused.Body, "another request") {
		t.Fatalf("the same key with another amount: %v; want 422 naming the other request", err)
	}
	paid, err := httppay.Paid(ctx, pool)
	if err != nil || paid["order-7"] != 1 || len(paid) != 1 {
		t.Fatalf("paid %v (%v), want order-7 once", paid, err)
	}
	if evs := api.Events(); len(evs) != 1 || evs[0].Request.Status != 201 {
		t.Fatalf("events %+v, want the one cut 201", evs)
	}
}
