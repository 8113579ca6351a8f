package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// payments is a payments API on a real net/http server, in memory: POST /payments pays
// once per request (naive), or once per Idempotency-Key with a retry answered from the
// key's stored response and Idempotent-Replayed: true (idempotent); GET /paid is the
// count per key.
type payments struct {
	idempotent bool
	mu         sync.Mutex
	paid       map[string]int64
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/paid":
		json.NewEncoder(w).Encode(p.paid)
	case r.Method == http.MethodPost && r.URL.Path == "/payments":
		k := r.Header.Get("Idempotency-Key")
		if p.idempotent && p.paid[k] > 0 {
			w.Header().Set("Idempotent-Replayed", "true")
		} else {
			p.paid[k]++
		}
		w.WriteHeader(http.StatusCreated)
	default:
		http.NotFound(w, r)
	}
}

// TestExecHTTPSaysWhatBecameOfTheCutRequest: a program (bash and curl, a new connection
// per request) pays p-1, p-2 and p-3 through indoubt exec --store http, retrying a lost
// response with the same key; the proxy cuts the second request's 201. Against the
// naive API exec exits 1 and results.json says p-2 was handled twice; against the
// idempotent one it exits 0 and says p-2's retry was a replay. The run directory judged
// again from its files alone, and indoubt check --json of it, say the same.
func TestExecHTTPSaysWhatBecameOfTheCutRequest(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl is missing (CI=true: missing fails the run)")
		}
		t.Skipf("curl is missing: install it")
	}
	prog := script(t, `for k in p-1 p-2 p-3; do
  ev invoke apply 0 "$k"
  for try in 1 2 3; do
    if h=$(curl -sf -o /dev/null -D - -X POST -H "Idempotency-Key: $k" -d '{}' "$INDOUBT_BASE_URL/payments"); then
      r=false; if printf '%s' "$h" | grep -qi '^Idempotent-Replayed: true'; then r=true; fi
      ev ok apply 0 "$k" ',"value":{"replayed":'$r'}'
      break
    fi
  done
done
`)
	for _, tt := range []struct {
		idempotent bool
		exit       int
		want       string
	}{
		{false, 1, "request p-2 was handled twice: its first response was cut after the service answered 201 (POST /payments)"},
		{true, 0, "request p-2: its first response was cut after the service answered 201; the retry was answered from the key's stored response (a replay)"},
	} {
		svc := httptest.NewServer(&payments{idempotent: tt.idempotent, paid: map[string]int64{}})
		defer svc.Close()
		out := t.TempDir()
		code, stdout, stderr := invoke(t, "exec", "--quiet", "--out", out, "--store", "http", "--upstream", svc.Listener.Addr().String(),
			"--fault", "response-cut@commit:2", "--model", "exactly-once", "--final-cmd", "curl -sf "+svc.URL+"/paid", "--", prog)
		if code != tt.exit {
			t.Fatalf("idempotent %v: exit %d, want %d\n%s%s", tt.idempotent, code, tt.exit, stdout, stderr)
		}
		runs := published(t, out)
		if len(runs) != 1 {
			t.Fatalf("run directories: %v", runs)
		}
		run, err := rundir.ReadResults(runs[0])
		if err != nil {
			t.Fatal(err)
		}
		if run.Evidence == nil || !slices.Equal(run.Evidence.Requests, []string{tt.want}) {
			t.Fatalf("idempotent %v: results.json's evidence %+v, want requests [%q]", tt.idempotent, run.Evidence, tt.want)
		}
		if !strings.Contains(stdout, tt.want) {
			t.Errorf("indoubt exec does not say %q:\n%s", tt.want, stdout)
		}
		// invoke judged the directory again from its files alone (judgetest.Recheck);
		// indoubt check --json and indoubt check of it say the same.
		code2, js, _ := invoke(t, "check", "--json", runs[0])
		var again results.Results
		if err := json.Unmarshal([]byte(js), &again); code2 != tt.exit || err != nil || again.Evidence == nil || !slices.Equal(again.Evidence.Requests, run.Evidence.Requests) {
			t.Errorf("indoubt check --json %s: exit %d (%v), evidence %+v; want exit %d and requests %q", runs[0], code2, err, again.Evidence, tt.exit, run.Evidence.Requests)
		}
		if _, text, _ := invoke(t, "check", runs[0]); !strings.Contains(text, tt.want) {
			t.Errorf("indoubt check %s does not say %q:\n%s", runs[0], tt.want, text)
		}
	}
}
