package faults

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/indoubt/indoubt/faults/internal/faultstest"
	"github.com/indoubt/indoubt/faults/toxics"
)

// TestAPICommitToxics steers the commit faults through toxiproxy's own Go client: a
// commit toxic's attributes drive the knob, a second one of a kind is refused, and the
// list shows the commit toxics in place of the halves.
func TestAPICommitToxics(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	table := freshAccount(t, direct, 100)
	evs := &faultstest.Log{}
	px, err := Start(Options{Upstream: srv.Addr, Protocol: toxics.Postgres{}, Seed: 1, Events: evs.Add, API: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cl := toxiclient.NewClient(px.APIAddr())
	p, err := cl.Proxy("indoubt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("cut", "commit_cut", "", 1, toxiclient.Attributes{"probability": 1, "max": 1}); err != nil {
		t.Fatalf("add commit_cut: %v", err)
	}
	if f := px.Faults(); f.Cut.P() != 1 || f.Cut.Max() != 1 {
		t.Fatalf("after the API added commit_cut: p %v max %d, want 1 and 1", f.Cut.P(), f.Cut.Max())
	}
	_, err = p.AddToxic("cut2", "commit_cut", "downstream", 1, toxiclient.Attributes{"probability": 0.5})
	if err == nil || !strings.Contains(err.Error(), `already has a commit_cut toxic, "cut"`) {
		t.Errorf("second commit_cut: %v, want a refusal naming the first", err)
	}
	if _, err := p.AddToxic("half", "commit_drop", "upstream", 0.5, nil); err == nil || !strings.Contains(err.Error(), "probability") {
		t.Errorf("commit_drop with toxicity 0.5: %v, want a refusal pointing to probability", err)
	}
	if _, err := p.AddToxic("slow", "latency", "downstream", 1, toxiclient.Attributes{"latency": 1}); err != nil {
		t.Fatal(err)
	}
	list, err := p.Toxics()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tx := range list {
		got[tx.Name] = tx.Type
		if tx.Name == "cut" && (tx.Attributes["probability"] != 1.0 || tx.Attributes["max"] != 1.0) {
			t.Errorf("cut shows attributes %v", tx.Attributes)
		}
	}
	if len(got) != 2 || got["cut"] != "commit_cut" || got["slow"] != "latency" {
		t.Errorf("toxics %v, want cut (commit_cut) and slow (latency), the halves hidden", got)
	}

	c := connect(t, dsnVia(t, srv, px.Addr()))
	if _, err := c.Exec(context.Background(), "update "+table+" set balance = balance - 1 where id = 1"); !ambiguous(err) {
		t.Fatalf("update under commit_cut p=1: %v, want a cut", err)
	}
	if e := evs.All(); len(e) != 1 || e[0].Kind != toxics.CommitCut {
		t.Errorf("events %+v, want one cut", e)
	}

	if _, err := p.UpdateToxic("cut", -1, toxiclient.Attributes{"probability": 0.25}); err != nil {
		t.Fatal(err)
	}
	if f := px.Faults(); f.Cut.P() != 0.25 || f.Cut.Max() != 1 {
		t.Errorf("after the update: p %v max %d, want 0.25 and 1", f.Cut.P(), f.Cut.Max())
	}
	if err := p.RemoveToxic("cut"); err != nil {
		t.Fatal(err)
	}
	if px.Faults().Cut.P() != 0 {
		t.Errorf("commit_cut still armed after its removal")
	}
	if err := p.RemoveToxic(endNames[0]); err == nil {
		t.Errorf("the API removed a link end")
	}

	// Reset keeps the link ends: commit faults armed from Go still fire afterwards.
	if err := cl.ResetState(); err != nil {
		t.Fatal(err)
	}
	if list, _ := p.Toxics(); len(list) != 0 {
		t.Errorf("after reset: toxics %v", list)
	}
	px.Faults().Drop.Set(1, 0)
	c2 := connect(t, dsnVia(t, srv, px.Addr()))
	if _, err := c2.Exec(context.Background(), "update "+table+" set balance = balance - 1 where id = 1"); !ambiguous(err) {
		t.Fatalf("drop armed after reset: %v, want a dropped commit", err)
	}
	if b := balance(t, direct, table); b != 99 {
		t.Errorf("balance %d, want 99 (one cut applied, one drop not)", b)
	}
}

// startAPIOnly starts a proxy with its API on loopback in front of an upstream that only
// listens: enough for tests of the API itself. Both close when the test ends.
func startAPIOnly(t *testing.T) (net.Listener, *Proxy) {
	t.Helper()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	px, err := Start(Options{Upstream: up.Addr().String(), API: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return up, px
}

// TestAPIClientCreatesProxies: toxiproxy's client creates a loopback proxy; one on
// every interface is refused, and ":PORT" means loopback.
func TestAPIClientCreatesProxies(t *testing.T) {
	up, px := startAPIOnly(t)
	cl := toxiclient.NewClient(px.APIAddr())
	if _, err := cl.CreateProxy("open", "0.0.0.0:0", up.Addr().String()); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Errorf("proxy on 0.0.0.0: %v, want a refusal", err)
	}
	p, err := cl.CreateProxy("local", ":0", up.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(p.Listen); host != "127.0.0.1" {
		t.Errorf("proxy created on %q listens on %s, want loopback", ":0", p.Listen)
	}
	if _, err := p.AddToxic("", "commit_cut", "", 1, nil); err == nil || !strings.Contains(err.Error(), "no commit faults") {
		t.Errorf("commit_cut on a plain proxy: %v, want a refusal", err)
	}
	all, err := cl.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all["local"] == nil || all["indoubt"] == nil {
		t.Errorf("proxies %v, want indoubt and local", all)
	}
}

// TestAPIRefusesWebPages: what a browser lets any page send, and DNS rebinding, are
// refused before toxiproxy sees them.
func TestAPIRefusesWebPages(t *testing.T) {
	_, px := startAPIOnly(t)
	base := "http://" + px.APIAddr()
	create := `{"name":"ssh","listen":"127.0.0.1:0","upstream":"127.0.0.1:22"}`
	for _, tt := range []struct {
		name, method, host, ctype, body string
		want                            int
	}{
		{"rebound name", "GET", "evil.example:8474", "", "", http.StatusForbidden},
		{"rebound name posting", "POST", "evil.example", "application/json", create, http.StatusForbidden},
		{"text/plain", "POST", "", "text/plain", create, http.StatusUnsupportedMediaType},
		{"form", "POST", "", "application/x-www-form-urlencoded", create, http.StatusUnsupportedMediaType},
		{"no content type", "POST", "", "", create, http.StatusUnsupportedMediaType},
		{"reset as text/plain", "POST", "", "text/plain", "", http.StatusUnsupportedMediaType},
		{"listener off loopback", "POST", "", "application/json", `{"name":"x","listen":"0.0.0.0:0","upstream":"127.0.0.1:22"}`, http.StatusForbidden},
		{"populate off loopback", "POST", "", "application/json", `[{"name":"y","listen":"0.0.0.0:0","upstream":"127.0.0.1:22"}]`, http.StatusForbidden},
		{"moved off loopback", "PATCH", "", "application/json", `{"listen":"0.0.0.0:0"}`, http.StatusForbidden},
		{"upstream not an address", "POST", "", "application/json", `{"name":"z","listen":"127.0.0.1:0","upstream":"notanaddr","enabled":true}`, http.StatusBadRequest},
		{"upstream without a host", "POST", "", "application/json", `[{"name":"z2","listen":"127.0.0.1:0","upstream":":5432"}]`, http.StatusBadRequest},
		{"localhost", "GET", "localhost:8474", "", "", http.StatusOK},
		{"loopback v6", "GET", "[::1]:8474", "", "", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := "/proxies"
			switch {
			case tt.name == "populate off loopback":
				path = "/populate"
			case tt.name == "moved off loopback":
				path = "/proxies/indoubt"
			case strings.HasPrefix(tt.name, "reset"):
				path = "/reset"
			}
			req, _ := http.NewRequest(tt.method, base+path, strings.NewReader(tt.body))
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, b, tt.want)
			}
			if tt.want >= 400 {
				var e struct{ Error string }
				if json.Unmarshal(b, &e) != nil || e.Error == "" {
					t.Errorf("body %q: want toxiproxy's error shape", b)
				}
			}
		})
	}
	cl := toxiclient.NewClient(px.APIAddr())
	all, err := cl.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all["indoubt"].Listen != px.Addr() {
		t.Errorf("proxies after the refusals: %v", all)
	}
}

// TestBindPolicy: the proxy and its API stay on loopback unless remote binds are
// allowed; an empty host means loopback.
func TestBindPolicy(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	upstream := up.Addr().String()
	for _, o := range []Options{
		{Listen: "0.0.0.0:0"},
		{Listen: "[::]:0"},
		{API: "0.0.0.0:0"},
	} {
		o.Upstream = upstream
		if px, err := Start(o); err == nil {
			px.Close()
			t.Errorf("%+v: started, want a refusal", o)
		} else if !strings.Contains(err.Error(), "not loopback") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %q, want one line saying not loopback", o, err)
		}
	}
	px, err := Start(Options{Upstream: upstream, Listen: ":0", API: ":0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{px.Addr(), px.APIAddr()} {
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Errorf("%q bound %s, want loopback", ":0", a)
		}
	}
	px.Close()
	px, err = Start(Options{Upstream: upstream, Listen: "0.0.0.0:0", API: "0.0.0.0:0", AllowRemote: true})
	if err != nil {
		t.Fatalf("remote binds allowed: %v", err)
	}
	defer px.Close()
	_, port, _ := net.SplitHostPort(px.APIAddr())
	// Allowed to bind every interface, the API answers an address literal as Host.
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/version", nil)
	req.Host = "192.0.2.7:" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Host 192.0.2.7 with remote binds on 0.0.0.0: status %d", resp.StatusCode)
	}
}

// apiDo sends one JSON request to the API and returns the status and the body.
func apiDo(t *testing.T, px *Proxy, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+px.APIAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIListenersStayOnLoopback: whatever the spelling of the listen key (toxiproxy's
// decoder matches keys case-insensitively and by Unicode folding, and takes the last of
// duplicates), an empty or missing listen address, or an update of an existing proxy,
// the API opens no listener off loopback; what it does open is on loopback, and every
// answer is toxiproxy's JSON without its Logger field.
func TestAPIListenersStayOnLoopback(t *testing.T) {
	up, px := startAPIOnly(t)
	u := up.Addr().String()
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/proxies", `{"name":"b1","Listen":"0.0.0.0:0","upstream":"` + u + `"}`, http.StatusForbidden},
		{"POST", "/proxies", `{"name":"b2","lIsTeN":"0.0.0.0:0","upstream":"` + u + `"}`, http.StatusForbidden},
		{"POST", "/proxies", `{"name":"b3","liſten":"0.0.0.0:0","upstream":"` + u + `"}`, http.StatusForbidden},
		{"POST", "/proxies", `{"name":"b4","listen":"127.0.0.1:0","LISTEN":"[::]:0","upstream":"` + u + `"}`, http.StatusForbidden},
		{"POST", "/proxies", `{"name":"b5","listen":"127.0.0.1:0","upstream":"` + u + `"} {"listen":"0.0.0.0:0"}`, http.StatusCreated},
		{"POST", "/proxies", `{"name":"empty","listen":"","upstream":"` + u + `"}`, http.StatusCreated},
		{"POST", "/proxies", `{"name":"none","upstream":"` + u + `"}`, http.StatusCreated},
		{"POST", "/proxies", `{"name":"named","listen":"localhost:0","upstream":"` + u + `"}`, http.StatusCreated},
		{"PATCH", "/proxies/none", `{"Listen":"0.0.0.0:0"}`, http.StatusForbidden},
		{"POST", "/proxies/none", `{"lisTen":"[::]:0"}`, http.StatusForbidden},
		{"PATCH", "/proxies/none", `{"listen":""}`, http.StatusBadRequest},
		{"PATCH", "/proxies/none", `{"enabled":false}`, http.StatusOK},
		{"PATCH", "/proxies/none", `{"Enabled":true}`, http.StatusOK},
		{"POST", "/populate", `[{"name":"p1","LISTEN":"0.0.0.0:0","upstream":"` + u + `"}]`, http.StatusForbidden},
		{"POST", "/populate", `[{"name":"p2","upstream":"` + u + `"}]`, http.StatusCreated},
		{"POST", "/populate", `[{"name":"indoubt","upstream":"` + u + `"}]`, http.StatusConflict},
		{"PATCH", "/proxies/indoubt", `{"Listen":"0.0.0.0:0"}`, http.StatusForbidden},
		{"PATCH", "/proxies/indoubt", `{"listen":"127.0.0.1:0"}`, http.StatusConflict},
	} {
		status, body := apiDo(t, px, tt.method, tt.path, tt.body)
		if status != tt.want {
			t.Errorf("%s %s %s: %d %s, want %d", tt.method, tt.path, tt.body, status, body, tt.want)
		}
		if strings.Contains(body, "Logger") {
			t.Errorf("%s %s: answer %s shows toxiproxy's Logger", tt.method, tt.path, body)
		}
	}
	status, body := apiDo(t, px, "GET", "/proxies", "")
	if status != http.StatusOK || strings.Contains(body, "Logger") {
		t.Fatalf("GET /proxies: %d %s", status, body)
	}
	var all map[string]struct{ Listen string }
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatal(err)
	}
	want := []string{"indoubt", "b5", "empty", "none", "named", "p2"}
	if len(all) != len(want) {
		t.Errorf("proxies %v, want %v", all, want)
	}
	for _, name := range want {
		host, _, err := net.SplitHostPort(all[name].Listen)
		if err != nil || host != "127.0.0.1" {
			t.Errorf("proxy %s listens on %q, want loopback", name, all[name].Listen)
		}
	}
}

// TestAPIToxicValues: values toxiproxy would take and misapply (or crash on) are
// refused with 400 naming the attribute, on creation and on update, through the API and
// from Go; values in range are taken.
func TestAPIToxicValues(t *testing.T) {
	_, px := startAPIOnly(t)
	for _, tt := range []struct {
		method, path, body string
		want               int
		says               string
	}{
		{"POST", "/proxies/indoubt/toxics", `{"name":"t","type":"latency","toxicity":2,"attributes":{"latency":5}}`, 400, "toxicity 2"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"l","type":"latency","attributes":{"latency":-100000}}`, 400, "latency -100000"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"j","type":"latency","attributes":{"latency":5,"JITTER":4611686018427387904}}`, 400, "jitter"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"b","type":"bandwidth","attributes":{"rate":0}}`, 400, "rate 0"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"s","type":"slicer","attributes":{"average_size":10,"size_variation":10}}`, 400, "size_variation 10"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"o","type":"timeout","attributes":{"timeout":-1}}`, 400, "timeout -1"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"e","type":"indoubt_link_end"}`, 400, "invalid toxic type"},
		{"POST", "/proxies/indoubt/toxics", `{"name":"ok","type":"latency","toxicity":0.5,"attributes":{"latency":5,"jitter":1}}`, 200, ""},
		{"PATCH", "/proxies/indoubt/toxics/ok", `{"attributes":{"latency":-1}}`, 400, "latency -1"},
		{"PATCH", "/proxies/indoubt/toxics/ok", `{"toxicity":-0.5}`, 400, "toxicity -0.5"},
		{"PATCH", "/proxies/indoubt/toxics/ok", `{"attributes":{"latency":7}}`, 200, ""},
	} {
		status, body := apiDo(t, px, tt.method, tt.path, tt.body)
		if status != tt.want || !strings.Contains(body, tt.says) {
			t.Errorf("%s %s %s: %d %s, want %d saying %q", tt.method, tt.path, tt.body, status, body, tt.want, tt.says)
		}
	}
	cl := toxiclient.NewClient(px.APIAddr())
	p, err := cl.Proxy("indoubt")
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.Toxics()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "ok" || list[0].Attributes["latency"] != 7.0 || list[0].Toxicity != 0.5 {
		t.Errorf("toxics %+v, want ok alone, latency 7 toxicity 0.5", list)
	}
	for _, tx := range []Toxic{
		{Name: "g1", Type: "latency", Attributes: map[string]int64{"latency": -5}},
		{Name: "g2", Type: "bandwidth", Attributes: map[string]int64{"rate": 0}},
		{Name: "g3", Type: "slow_close", Attributes: map[string]int64{"delay": 100 * 24 * 3600 * 1000}},
	} {
		if err := px.AddToxic(tx); err == nil {
			t.Errorf("AddToxic %+v: no error", tx)
		}
	}
	if err := (Toxic{Type: "latency", Attributes: map[string]int64{"latency": 25 * 3600 * 1000}}).Check(); err == nil {
		t.Errorf("a latency of 25h checked")
	}
	if err := (Toxic{Type: "latency", Attributes: map[string]int64{"latency": 50}}).Check(); err != nil {
		t.Errorf("a latency of 50ms: %v", err)
	}
}
