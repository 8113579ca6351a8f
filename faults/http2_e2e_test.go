package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestHTTP2H2CCutOnARealService sends POSTs one after another over one HTTP/2
// connection (h2c, prior knowledge) to a real net/http service through the proxy, with
// a cut pinned at the second: that POST fails on the client although the service
// handled it, the event names its stream and the 201 it answered, and the client's
// next request, on a new connection, succeeds.
func TestHTTP2H2CCutOnARealService(t *testing.T) {
	var handled atomic.Int64
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
		w.WriteHeader(http.StatusCreated)
	}), Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	defer srv.Close()

	evs := &eventLog{}
	px, err := Start(Options{Upstream: ln.Addr().String(), Protocol: toxics.HTTP2{}, Events: evs.add})
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
// client gets Unavailable, the event names the method and the 200 the server sent, and
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
	if fmt.Sprint(codesSeen) != fmt.Sprint([]codes.Code{codes.OK, codes.Unavailable, codes.OK}) {
		t.Fatalf("codes %v, want OK, Unavailable, OK", codesSeen)
	}
	got := evs.all()
	if len(got) != 1 || got[0].Request == nil || got[0].Request.Path != "/grpc.health.v1.Health/Check" || got[0].Request.Status != 200 || got[0].Tag != ":status 200 (grpc)" {
		t.Fatalf("events %+v, want the cut of Check's 200", got)
	}
}
