package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestProxyHTTPResponseCut runs `indoubt proxy --protocol http` in front of a real
// net/http service with the second request's response listed to be cut: that request
// fails although the service handled it, stdout names it with its key, and the events
// file records its method, path, key and the 201 the service answered.
func TestProxyHTTPResponseCut(t *testing.T) {
	var handled atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		handled.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer svc.Close()
	events := filepath.Join(t.TempDir(), "faults.jsonl")
	rp := startProxyCommand(t, "--protocol", "http", "--upstream", svc.Listener.Addr().String(), "--listen", "127.0.0.1:0",
		"--fault", "response-cut@commit:2", "--events", events)
	c := &http.Client{Transport: &http.Transport{}}
	var failed []int
	for i := 1; i <= 3; i++ {
		// A new connection each time: the Transport's own retry of a keyed request on
		// a reused connection would hide the cut.
		req, _ := http.NewRequest(http.MethodPost, "http://"+rp.addr+"/payments", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", i))
		req.Close = true
		resp, err := c.Do(req)
		if err != nil {
			failed = append(failed, i)
			continue
		}
		resp.Body.Close()
	}
	if err := rp.stop(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(failed) != "[2]" || handled.Load() != 3 {
		t.Fatalf("failed %v, handled %d: want the second to fail after the service handled all three", failed, handled.Load())
	}
	if out := rp.out.String(); !strings.Contains(out, `response-cut applied`) || !strings.Contains(out, `"POST /payments" 201 Created Idempotency-Key "k-2"`) {
		t.Errorf("stdout %q, want the cut named with its key", out)
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var e toxics.Event
	if err := json.Unmarshal(b, &e); err != nil || e.Request == nil || *e.Request != (toxics.Request{Method: "POST", Path: "/payments", IdempotencyKey: "k-2", Status: 201}) || e.Protocol != "http" {
		t.Fatalf("events file %s (%v), want the cut of k-2's 201", b, err)
	}
}
