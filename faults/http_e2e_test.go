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

	"github.com/indoubt/indoubt/faults/toxics"
)

// httpService is a real net/http server on loopback whose POST handler counts the
// requests it handled, by idempotency key, and answers 201.
type httpService struct {
	addr    string
	handled atomic.Int64
	mu      sync.Mutex
	byKey   map[string]int
}

func startHTTPService(t *testing.T) *httpService {
	t.Helper()
	s := &httpService{byKey: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusOK)
			return
		}
		s.handled.Add(1)
		s.mu.Lock()
		s.byKey[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"key":%q}`, r.Header.Get("Idempotency-Key"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.addr = ln.Addr().String()
	return s
}

func startHTTPProxy(t *testing.T, upstream string, seed int64) (*Proxy, *eventLog) {
	t.Helper()
	evs := &eventLog{}
	px, err := Start(Options{Upstream: upstream, Protocol: toxics.HTTP{}, Seed: seed, Events: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px, evs
}

type eventLog struct {
	mu  sync.Mutex
	evs []toxics.Event
}

func (l *eventLog) add(e toxics.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, e)
	l.mu.Unlock()
}

func (l *eventLog) all() []toxics.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]toxics.Event(nil), l.evs...)
}

// post sends one POST on a keep-alive client; header is "" or an Idempotency-Key.
func post(ctx context.Context, c *http.Client, base, key, header string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", strings.NewReader(`{"amount":5}`))
	if err != nil {
		return 0, err
	}
	if header != "" {
		req.Header.Set(header, key)
	}
	req.Header.Set("X-Request", key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestHTTPListedFaultsOnARealService pins one fault on the third of five POSTs sent on
// one keep-alive connection to a real net/http service: a response-cut fails that
// request on the client although the service handled it (five handled, the event
// names the 201 it answered); a request-drop fails it without the service seeing it
// (four handled).
func TestHTTPListedFaultsOnARealService(t *testing.T) {
	for _, tt := range []struct {
		kind    toxics.Kind
		handled int64
		status  int
	}{{toxics.CommitCut, 5, 201}, {toxics.CommitDrop, 4, 0}} {
		t.Run(tt.kind.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			svc := startHTTPService(t)
			px, evs := startHTTPProxy(t, svc.addr, 1)
			if err := px.Faults().Listed.Add(toxics.Pin{Kind: tt.kind, Point: 3}); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			var failed []int
			for i := 1; i <= 5; i++ {
				// A GET between the POSTs shares the connection and is never a point.
				if _, err := c.Get("http://" + px.Addr() + "/health"); err != nil {
					t.Fatalf("GET %d: %v", i, err)
				}
				if code, err := post(ctx, c, "http://"+px.Addr(), fmt.Sprintf("p-%d", i), ""); err != nil {
					failed = append(failed, i)
				} else if code != 201 {
					t.Fatalf("POST %d: status %d", i, code)
				}
			}
			got := evs.all()
			if len(failed) != 1 || failed[0] != 3 || len(got) != 1 {
				t.Fatalf("failed POSTs %v, events %+v; want the third alone, one event", failed, got)
			}
			e := got[0]
			want := toxics.Request{Method: "POST", Path: "/payments", Status: tt.status}
			if e.Kind != tt.kind || e.Point != 3 || e.Protocol != "http" || e.Request == nil || *e.Request != want {
				t.Fatalf("event %+v (request %+v), want %v at point 3 naming %+v", e, e.Request, tt.kind, want)
			}
			if n := svc.handled.Load(); n != tt.handled {
				t.Fatalf("the service handled %d POSTs, want %d", n, tt.handled)
			}
		})
	}
}

// TestHTTPTransportRetriesAKeyedRequest records what Go's own client does with a cut
// response: net/http's Transport treats a request with an Idempotency-Key header as
// idempotent and, on a reused connection, sends it again by itself. The client sees
// success; the service handled that key twice. Without the header the error reaches
// the caller. The service, not the client library, must make the key mean once.
func TestHTTPTransportRetriesAKeyedRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := startHTTPService(t)
	px, evs := startHTTPProxy(t, svc.addr, 1)
	if err := px.Faults().Listed.Add(toxics.Pin{Kind: toxics.CommitCut, Point: 2}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	for i := 1; i <= 3; i++ {
		if _, err := post(ctx, c, "http://"+px.Addr(), fmt.Sprintf("k-%d", i), "Idempotency-Key"); err != nil {
			t.Fatalf("POST %d: %v; want the Transport's own retry to hide the cut", i, err)
		}
	}
	got := evs.all()
	if len(got) != 1 || got[0].Request == nil || got[0].Request.IdempotencyKey != "k-2" || got[0].Request.Status != 201 {
		t.Fatalf("events %+v, want the cut of k-2's 201", got)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.byKey["k-2"] != 2 || svc.byKey["k-1"] != 1 || svc.byKey["k-3"] != 1 {
		t.Fatalf("handled by key %v, want k-2 twice (the cut and the Transport's retry)", svc.byKey)
	}
}

// TestHTTPSeededFaultsAddUp runs concurrent keep-alive clients under mixed faults: every
// POST the service handled either reached its client or was cut, and every drop was
// never handled, so handled = answered + cut, and failures = cuts + drops.
func TestHTTPSeededFaultsAddUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := startHTTPService(t)
	px, evs := startHTTPProxy(t, svc.addr, 7)
	px.Faults().Mixed.Set(0.3, 0)
	const workers, each = 4, 25
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			for i := 0; i < each; i++ {
				if _, err := post(ctx, c, "http://"+px.Addr(), fmt.Sprintf("w%d-%d", w, i), ""); err != nil {
					failed.Add(1)
				} else {
					answered.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	cuts, drops := 0, 0
	for _, e := range evs.all() {
		if e.Kind == toxics.CommitCut {
			cuts++
		} else {
			drops++
		}
	}
	if cuts == 0 || drops == 0 {
		t.Fatalf("%d cuts and %d drops in %d requests at 0.3: want both", cuts, drops, workers*each)
	}
	if h := svc.handled.Load(); h != answered.Load()+int64(cuts) || failed.Load() != int64(cuts+drops) {
		t.Fatalf("handled %d, answered %d, failed %d, cuts %d, drops %d: want handled = answered + cuts, failed = cuts + drops",
			h, answered.Load(), failed.Load(), cuts, drops)
	}
}

// TestHTTPExpectContinue sends POSTs with "Expect: 100-continue" from Go's client to a
// real net/http service, which answers 100 Continue when the handler reads the body:
// a request-drop keeps the head from the service (nothing handled, the body never
// sent), a response-cut lets the body follow the 100 and cuts the final 201.
func TestHTTPExpectContinue(t *testing.T) {
	for _, tt := range []struct {
		kind    toxics.Kind
		handled int64
	}{{toxics.CommitDrop, 0}, {toxics.CommitCut, 1}} {
		t.Run(tt.kind.String(), func(t *testing.T) {
			svc := startHTTPService(t)
			px, evs := startHTTPProxy(t, svc.addr, 1)
			if err := px.Faults().Listed.Add(toxics.Pin{Kind: tt.kind, Point: 1}); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, "http://"+px.Addr()+"/payments", strings.NewReader(`{"amount":5}`))
			req.Header.Set("Expect", "100-continue")
			if _, err := c.Do(req); err == nil {
				t.Fatalf("the faulted POST succeeded")
			}
			if n := svc.handled.Load(); n != tt.handled {
				t.Fatalf("handled %d, want %d", n, tt.handled)
			}
			if got := evs.all(); len(got) != 1 || got[0].Kind != tt.kind {
				t.Fatalf("events %+v, want one %v", got, tt.kind)
			}
		})
	}
}
