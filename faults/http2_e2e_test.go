package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/indoubt/indoubt/faults/toxics"
)

// h2cService is a real net/http service speaking HTTP/2 without TLS; its handler
// counts the requests it handled, and holds each in the handler while hold (when set)
// says so.
func h2cService(t *testing.T, handled *atomic.Int64, hold func(*http.Request)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		handled.Add(1)
		if hold != nil {
			hold(r)
		}
		// A header whose value is new in every response: the service's HPACK encoder
		// adds it to the dynamic table each time, so a client that missed one header
		// block would read the next ones wrong.
		w.Header().Set("X-Handled", r.URL.Path)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "handled %s", r.URL.Path)
	}), Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestHTTP2OnlyTheMatchedStreamIsCut puts eight POSTs in flight at once on one HTTP/2
// connection (h2c) to a real net/http service, held in the handler until all eight
// are there; the cut matches one path. That request fails, the seven others complete,
// the service handled all eight, one connection carried them all, and the next
// request on it succeeds.
func TestHTTP2OnlyTheMatchedStreamIsCut(t *testing.T) {
	var handled atomic.Int64
	release := make(chan struct{})
	addr := h2cService(t, &handled, func(r *http.Request) {
		if r.URL.Path != "/payments/0" && r.URL.Path != "/payments/9" {
			<-release
		}
	})
	evs := &eventLog{}
	var conns atomic.Int64
	px, err := Start(Options{Upstream: addr, Protocol: toxics.HTTP2{}, Events: evs.add,
		Match: func(text string) bool { return text == "POST /payments/4" }})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	px.Faults().Cut.Set(1, 0)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		conns.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	do := func(i int) error {
		resp, err := c.Post(fmt.Sprintf("http://%s/payments/%d", px.Addr(), i), "application/json", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 || string(b) != fmt.Sprintf("handled /payments/%d", i) || resp.Header.Get("X-Handled") != fmt.Sprintf("/payments/%d", i) {
			return fmt.Errorf("%s %q (X-Handled %q)", resp.Status, b, resp.Header.Get("X-Handled"))
		}
		return nil
	}
	// One request first, so that the eight share its connection.
	if err := do(0); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 9)
	var wg sync.WaitGroup
	for i := 1; i <= 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = do(i) }()
	}
	for deadline := time.Now().Add(15 * time.Second); handled.Load() < 9 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i := 1; i <= 8; i++ {
		if (errs[i] != nil) != (i == 4) {
			t.Errorf("request %d: %v; want only the fourth to fail", i, errs[i])
		}
	}
	if err := do(9); err != nil {
		t.Errorf("the request after the cut: %v", err)
	}
	got := evs.all()
	if len(got) != 1 || got[0].Request == nil || got[0].Request.Path != "/payments/4" || got[0].Request.Status != 201 {
		t.Fatalf("events %+v, want the cut of /payments/4's 201", got)
	}
	if n, c := handled.Load(), conns.Load(); n != 10 || c != 1 {
		t.Fatalf("handled %d on %d connections, want 10 on one", n, c)
	}
}

// TestHTTP2H2CCutOnARealService sends POSTs one after another over HTTP/2 (h2c, prior
// knowledge) to a real net/http service through the proxy, with a cut pinned at the
// second: that POST fails on the client although the service handled it, and the
// event names its stream and the 201 it answered. With CutConnection the connection
// goes with it; the next request, on a new one, succeeds.
func TestHTTP2H2CCutOnARealService(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut connection %v", whole), func(t *testing.T) { testH2CCut(t, whole) })
	}
}

func testH2CCut(t *testing.T, whole bool) {
	var handled atomic.Int64
	addr := h2cService(t, &handled, nil)
	evs := &eventLog{}
	px, err := Start(Options{Upstream: addr, Protocol: toxics.HTTP2{CutConnection: whole}, Events: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	if err := px.Faults().Listed.Add(toxics.Pin{Kind: toxics.CommitCut, Point: 2}); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var failed []int
	for i := 1; i <= 4; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+px.Addr()+"/payments", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			failed = append(failed, i)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST %d: %s", i, resp.Status)
		}
	}
	got := evs.all()
	if fmt.Sprint(failed) != "[2]" || len(got) != 1 {
		t.Fatalf("failed POSTs %v, events %+v: want the second alone, one event", failed, got)
	}
	want := toxics.Request{Method: "POST", Path: "/payments", Status: 201, Stream: 3}
	if r := got[0].Request; r == nil || *r != want || got[0].Protocol != "http2" {
		t.Fatalf("event %+v request %+v, want %+v", got[0], got[0].Request, want)
	}
	if n := handled.Load(); n != 4 {
		t.Fatalf("the service handled %d POSTs, want 4 (the cut one too)", n)
	}
}

// TestHTTP2GRPCCut cuts the response of a unary call to a real grpc-go server: the
// client gets an error, the event names the method and the 200 the server sent, and
// the client's next call succeeds.
func TestHTTP2GRPCCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(ln)
	defer gs.Stop()

	evs := &eventLog{}
	px, err := Start(Options{Upstream: ln.Addr().String(), Protocol: toxics.HTTP2{}, Events: evs.add,
		Match: func(text string) bool { return strings.HasSuffix(text, "/grpc.health.v1.Health/Check") }})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	px.Faults().Listed.Add(toxics.Pin{Kind: toxics.CommitCut, Point: 2})
	conn, err := grpc.NewClient("passthrough:///"+px.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := healthpb.NewHealthClient(conn)
	var codesSeen []codes.Code
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		codesSeen = append(codesSeen, status.Code(err))
	}
	// The stream alone is reset (RST_STREAM INTERNAL_ERROR): grpc-go says Internal,
	// and the connection carries the next call.
	if fmt.Sprint(codesSeen) != fmt.Sprint([]codes.Code{codes.OK, codes.Internal, codes.OK}) {
		t.Fatalf("codes %v, want OK, Internal, OK", codesSeen)
	}
	got := evs.all()
	if len(got) != 1 || got[0].Request == nil || got[0].Request.Path != "/grpc.health.v1.Health/Check" || got[0].Request.Status != 200 || got[0].Tag != ":status 200 (grpc)" {
		t.Fatalf("events %+v, want the cut of Check's 200", got)
	}
}

// TestHTTP2ManyStreamCuts runs 8 workers of 25 unary calls each on one grpc-go client
// connection to a real grpc-go server, with the response of a call cut at 0.3: every
// call either completes or fails with the reset of its own stream (Internal), never
// with the connection's loss (Unavailable) or a stalled window (DeadlineExceeded), and
// the failed calls are exactly the cut ones.
func TestHTTP2ManyStreamCuts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(ln)
	defer gs.Stop()
	evs := &eventLog{}
	px, err := Start(Options{Upstream: ln.Addr().String(), Protocol: toxics.HTTP2{}, Seed: 3, Events: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	px.Faults().Cut.Set(0.3, 0)
	conn, err := grpc.NewClient("passthrough:///"+px.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := healthpb.NewHealthClient(conn)
	var mu sync.Mutex
	count := map[codes.Code]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := cl.Check(ctx, &healthpb.HealthCheckRequest{})
				cancel()
				mu.Lock()
				count[status.Code(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cuts := len(evs.all())
	if count[codes.OK]+count[codes.Internal] != 200 || count[codes.Internal] != cuts || cuts == 0 {
		t.Fatalf("codes %v with %d cuts: want every call OK or Internal, Internal once per cut", count, cuts)
	}
	if px.Faults().Cut.Fired() != int64(cuts) {
		t.Fatalf("fired %d, events %d", px.Faults().Cut.Fired(), cuts)
	}
}

// TestHTTP2ManyStreamCutsH2C is TestHTTP2ManyStreamCuts with Go's own HTTP/2 client and
// server, every response carrying a header of its own (so that the service's HPACK
// encoder adds an entry for each): every POST completes with its own header or fails
// alone, the failures are the cuts, and one connection carries them all.
func TestHTTP2ManyStreamCutsH2C(t *testing.T) {
	var handled atomic.Int64
	addr := h2cService(t, &handled, nil)
	evs := &eventLog{}
	px, err := Start(Options{Upstream: addr, Protocol: toxics.HTTP2{}, Seed: 4, Events: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	var conns atomic.Int64
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		conns.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	// One request before the cuts are armed, so that the workers share its connection
	// instead of each dialing one while none is up.
	resp, err := c.Post("http://"+px.Addr()+"/warm", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	px.Faults().Cut.Set(0.3, 0)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				path := fmt.Sprintf("/payments/%d-%d", w, i)
				resp, err := c.Post("http://"+px.Addr()+path, "application/json", strings.NewReader("{}"))
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 || string(b) != "handled "+path || resp.Header.Get("X-Handled") != path {
					t.Errorf("%s: %s %q (X-Handled %q)", path, resp.Status, b, resp.Header.Get("X-Handled"))
				}
			}
		})
	}
	wg.Wait()
	cuts := len(evs.all())
	if int(failed.Load()) != cuts || cuts == 0 || handled.Load() != 201 || conns.Load() != 1 {
		t.Fatalf("%d failed, %d cuts, %d handled, %d connections: want the failures to be the cuts, 201 handled, one connection",
			failed.Load(), cuts, handled.Load(), conns.Load())
	}
}
