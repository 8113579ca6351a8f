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

// rawCodec passes messages as bytes, for a service declared without generated code.
type rawCodec struct{}

func (rawCodec) Name() string                  { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}

// TestGRPCCutsReturnFlowControl cuts the responses of five calls that each answer 30
// KiB, on a client whose connection window is fixed at 64 KiB: the DATA the proxy drops
// never reaches the client, which so never credits it back; unless the proxy returns
// that credit to the server, two cuts exhaust the window and every later call waits.
// All the calls after the cuts complete on the same connection.
func TestGRPCCutsReturnFlowControl(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Big",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out := make([]byte, 30<<10)
			return &out, nil
		}}},
	}, struct{}{})
	go gs.Serve(ln)
	defer gs.Stop()
	api := apitest.GRPC(t, ln.Addr().String())
	api.Arm("response-cut:1,max=5")
	conn, err := grpc.NewClient("passthrough:///"+api.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialConnWindowSize(64<<10), grpc.WithInitialWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var codesSeen []codes.Code
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, resp := []byte{}, []byte{}
		err := conn.Invoke(ctx, "/test.Big/Get", &req, &resp, grpc.ForceCodec(rawCodec{}))
		cancel()
		codesSeen = append(codesSeen, status.Code(err))
		if err == nil && len(resp) != 30<<10 {
			t.Fatalf("a response of %d bytes", len(resp))
		}
	}
	for i, c := range codesSeen {
		if (i < 5) == (c == codes.OK) {
			t.Fatalf("codes %v: want the five cut calls to fail and the five after them to complete", codesSeen)
		}
	}
}
