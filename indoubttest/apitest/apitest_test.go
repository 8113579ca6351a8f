package apitest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/apitest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

// TestHTTP arms one response-cut, matched by method and path, in front of a real
// net/http service: a GET passes, the first POST /orders fails on the client after
// the service handled it, the next succeeds; the event names the request and its 201.
func TestHTTP(t *testing.T) {
	var handled atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost {
			handled.Add(1)
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer svc.Close()
	api := apitest.HTTP(t, svc.Listener.Addr().String())
	if !strings.HasPrefix(api.DSN, "http://127.0.0.1:") || api.DirectDSN != svc.URL {
		t.Fatalf("DSN %q, DirectDSN %q: want the proxy's base URL and the service's", api.DSN, api.DirectDSN)
	}
	api.Arm("response-cut:1,max=1,match=^POST /orders$")
	c := &http.Client{Transport: apitest.Transport(api)}
	if resp, err := c.Get("http://shop.internal/orders"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	var errs []error
	for range 2 {
		// A new connection each time, so that the Transport does not resend.
		req, _ := http.NewRequest(http.MethodPost, "http://shop.internal/orders", strings.NewReader("{}"))
		req.Close = true
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errs = append(errs, err)
	}
	if errs[0] == nil || errs[1] != nil || handled.Load() != 2 {
		t.Fatalf("POSTs %v, handled %d: want the first cut after the service handled it, the second through", errs, handled.Load())
	}
	evs := api.Events()
	if len(evs) != 1 || evs[0].Request == nil || evs[0].Request.Path != "/orders" || evs[0].Request.Status != 201 {
		t.Fatalf("events %+v, want the cut of POST /orders's 201", evs)
	}
}

// TestGRPC arms one response-cut in front of a real grpc-go server: the second call
// fails, the first and third succeed on the same client.
func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(ln)
	defer gs.Stop()
	api := apitest.GRPC(t, ln.Addr().String())
	conn, err := grpc.NewClient("passthrough:///"+api.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := healthpb.NewHealthClient(conn)
	check := func() codes.Code {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	first := check()
	api.Arm("response-cut:1,max=1,match=/grpc.health.v1.Health/Check$")
	second, third := check(), check()
	if first != codes.OK || second == codes.OK || third != codes.OK {
		t.Fatalf("codes %v %v %v: want the second alone to fail", first, second, third)
	}
	if evs := api.Events(); len(evs) != 1 || evs[0].Request == nil || evs[0].Request.Stream == 0 {
		t.Fatalf("events %+v, want one cut naming its stream", evs)
	}
}
