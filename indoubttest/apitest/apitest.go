// Package apitest puts indoubt's commit-aware proxy in front of an HTTP or gRPC service a
// test runs, so that the test drives the service's handlers, and the client's retry
// logic, with the faults of an API layer: a response-cut lets a request reach the
// service, whose handler runs and answers, and cuts the connection as the response
// starts; a request-drop closes the connection before the service sees the request.
// The client sees the same lost connection either way, as it would after a timeout in
// production; the proxy knows which it was, and records the method, path,
// Idempotency-Key and the status the service answered (toxics.Event.Request).
//
//	svc := httptest.NewServer(handler)           // or any host:port the test started
//	srv := apitest.HTTP(t, svc.Listener.Addr().String())
//	client := &http.Client{Transport: apitest.Transport(srv)}
//	srv.Arm("response-cut:0.2,match=^POST /payments$")
//	... drive the client against srv.DSN (the base URL through the proxy) ...
//	srv.Disarm()
//
// The Server is indoubttest's: Arm, Disarm, Events, a Recorder and Check work as they do
// for a database (see package indoubttest). Its DSN is the proxy's base URL
// ("http://127.0.0.1:PORT"), DirectDSN the service's own, for set-up and final reads
// that must not be faulted. Classify treats every error of a request that may have been
// sent as unknown.
//
// Go's own client has a retry of its own that such a test meets: net/http's Transport
// sends a request again, by itself, when it carries an Idempotency-Key (or
// X-Idempotency-Key) header and its connection was reused and lost before the response
// began. After a response-cut the service may so see a keyed request twice although the
// caller saw one success: the key must mean "once" at the service, which is what these
// tests are for.
package apitest

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
)

// HTTP starts the proxy for HTTP/1.1 in front of the service at upstream (host:port)
// for the test tb, and stops it when the test ends. Every request is a point, and those
// of unsafe methods (POST, PUT, PATCH, DELETE) count by default; a match= selects by
// "METHOD /path".
func HTTP(tb testing.TB, upstream string, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	return start(tb, "http", upstream, toxics.HTTP{}, opts)
}

// GRPC starts the proxy for HTTP/2 with prior knowledge (h2c: gRPC without TLS) in
// front of the server at upstream. Every call is a point, counted by default; a match=
// selects by "POST /package.Service/Method". A cut resets the call's stream alone; the
// client's other calls on the connection go on.
func GRPC(tb testing.TB, upstream string, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	return start(tb, "grpc", upstream, toxics.HTTP2{}, opts)
}

func start(tb testing.TB, store, upstream string, proto toxics.Protocol, opts []indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		tb.Fatalf("apitest: upstream %q: want host:port", upstream)
	}
	return serve.NewServer(tb, serve.Target{
		Store:      store,
		DirectAddr: upstream,
		DirectDSN:  "http://" + upstream,
		ProxyDSN:   func(addr string) string { return "http://" + addr },
		Protocol:   proto,
		Options:    opts,
	}).(*indoubttest.Server)
}

// Transport returns an http.RoundTripper that sends every request, whatever its URL's
// host, through srv's proxy, on keep-alive connections: a client built on it reaches
// the service behind the proxy with the URLs it would use in production. Use http://
// URLs: the proxy does not see inside TLS, which passes through unfaulted.
func Transport(srv *indoubttest.Server) http.RoundTripper {
	var d net.Dialer
	addr := srv.Addr
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 16,
	}
}
