package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	tp "github.com/Shopify/toxiproxy/v2/toxics"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Type names of the commit toxics in the HTTP API, one per knob. They are views of the
// knobs, not toxics on toxiproxy's chain.
const (
	cutType   = "commit_cut"   // Faults.Cut
	dropType  = "commit_drop"  // Faults.Drop
	mixedType = "commit_mixed" // Faults.Mixed
)

var commitTypes = []string{cutType, dropType, mixedType}

// maxBody bounds a request body: a toxic or a proxy is a few hundred bytes, and
// /populate of a few thousand proxies still fits.
const maxBody = 1 << 20

// api is the front of toxiproxy's HTTP router. It guards the router against web pages
// (Host header, content type) and remote listeners, and serves the commit toxics
// itself: toxiproxy would decode their attributes into the live halves while their
// pipes run, so a commit toxic is a view of a knob, set through its atomics.
type api struct {
	p           *Proxy
	next        http.Handler
	bindHost    string
	allowRemote bool

	serial sync.Mutex // held for each request

	mu    sync.Mutex
	added map[string]apiToxic // by type: commit toxics added through the API
}

// apiToxic is what the API remembers of a commit toxic it added: the knob holds the rest.
type apiToxic struct{ name, stream string }

// toxicJSON is a toxic as toxiproxy's API shows it.
type toxicJSON struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

func newAPI(p *Proxy, bindHost string, allowRemote bool) *api {
	return &api{p: p, next: p.srv.Routes(), bindHost: bindHost, allowRemote: allowRemote, added: map[string]apiToxic{}}
}

func apiError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// toxiproxy's error shape, which its client decodes into the error it returns.
	json.NewEncoder(w).Encode(map[string]any{"error": fmt.Sprintf(format, args...), "status": status})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.hostAllowed(r.Host) {
		// A name other than loopback's reaching a loopback socket is DNS rebinding.
		apiError(w, http.StatusForbidden, "host %q not allowed: address the API by a loopback address or the one it listens on", r.Host)
		return
	}
	var body []byte
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		// A page can send text/plain and form bodies cross-origin without asking;
		// application/json needs a preflight, which this API never grants.
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			apiError(w, http.StatusUnsupportedMediaType, "Content-Type %q: want application/json", r.Header.Get("Content-Type"))
			return
		}
		body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			apiError(w, http.StatusBadRequest, "read body: %v", err)
			return
		}
		if len(body) > maxBody {
			apiError(w, http.StatusRequestEntityTooLarge, "body over %d bytes", maxBody)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// One request at a time: the checks below read proxies that the requests change.
	a.serial.Lock()
	defer a.serial.Unlock()
	path := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	ours := len(path) >= 2 && path[0] == "proxies" && path[1] == a.p.px.Name && !a.p.isDeleted()
	if (ours && len(path) >= 3 && path[2] == "toxics" && r.Method != http.MethodGet) || path[0] == "reset" {
		// The toxics may change: direct connections move to links (direct.go).
		defer a.p.syncPaths()
	}
	write := r.Method == http.MethodPost || r.Method == http.MethodPatch
	switch {
	case len(path) == 1 && path[0] == "reset" && r.Method == http.MethodPost:
		a.reset(r.Context(), w)
	case len(path) == 2 && ours && write:
		a.updateOurs(w, body)
	case len(path) == 2 && ours && r.Method == http.MethodDelete:
		a.deleteOurs(w)
	case len(path) == 1 && path[0] == "proxies" && r.Method == http.MethodPost:
		a.createProxy(w, r, body)
	case len(path) == 1 && path[0] == "populate" && r.Method == http.MethodPost:
		a.populate(w, r, body)
	case len(path) == 2 && path[0] == "proxies" && write:
		a.updateProxy(w, r, path[1], body)
	case len(path) == 3 && path[0] == "proxies" && path[2] == "toxics" && r.Method == http.MethodPost:
		a.createToxic(w, r, ours, body)
	case len(path) == 4 && ours && path[2] == "toxics" && a.commitToxic(w, r, path[3], body):
	case len(path) == 4 && path[0] == "proxies" && path[2] == "toxics" && write:
		a.updateToxic(w, r, path[1], path[3], body)
	case r.Method == http.MethodGet && path[0] == "proxies" && (len(path) <= 2 || ours && len(path) == 3 && path[2] == "toxics"):
		a.forward(w, r, func(b []byte) ([]byte, error) { return a.showProxies(b, path) })
	default:
		a.next.ServeHTTP(w, r)
	}
}

// hostAllowed accepts loopback names and addresses, and, when remote binds are
// allowed, the host the API listens on (any address literal when that is 0.0.0.0 or
// ::, since a literal cannot be rebound to another machine).
func (a *api) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return true
	}
	if !a.allowRemote || host == "" {
		return false
	}
	if strings.EqualFold(host, a.bindHost) {
		return true
	}
	bind := net.ParseIP(a.bindHost)
	return ip != nil && bind != nil && bind.IsUnspecified()
}

// knob returns the knob a commit toxic type drives, nil without commit faults.
func (a *api) knob(typ string) *toxics.Knob {
	f := a.p.Faults()
	if f == nil {
		return nil
	}
	switch typ {
	case cutType:
		return &f.Cut
	case dropType:
		return &f.Drop
	case mixedType:
		return &f.Mixed
	}
	return nil
}

// views returns the commit toxics as the API shows them: one per knob that the API
// added or that is armed (by Go code, a flag or a schedule window). Call with a.mu held.
func (a *api) views() []toxicJSON {
	var out []toxicJSON
	for _, typ := range commitTypes {
		k := a.knob(typ)
		if k == nil {
			continue
		}
		t, added := a.added[typ]
		if !added && k.P() == 0 {
			continue
		}
		if !added {
			t = apiToxic{name: typ, stream: "downstream"}
		}
		out = append(out, toxicJSON{Name: t.name, Type: typ, Stream: t.stream, Toxicity: 1,
			Attributes: map[string]any{"probability": k.P(), "max": k.Max()}})
	}
	return out
}

func (a *api) view(name string) (toxicJSON, bool) {
	for _, v := range a.views() {
		if v.Name == name {
			return v, true
		}
	}
	return toxicJSON{}, false
}

func isCommitType(typ string) bool {
	for _, t := range commitTypes {
		if t == typ {
			return true
		}
	}
	return false
}

// commitAttrs reads a commit toxic's attributes over the current values: probability
// from 0 to 1, max a whole number of fires (0: no cap). Toxicity must stay 1, because
// toxiproxy rolls it once per connection, not per commit point.
func commitAttrs(toxicity *float32, attrs map[string]json.RawMessage, p float64, max int64) (float64, int64, error) {
	if toxicity != nil && *toxicity != 1 {
		return 0, 0, fmt.Errorf("toxicity %v: a commit toxic rolls per commit point, set the attribute probability and leave toxicity at 1", *toxicity)
	}
	for k, v := range attrs {
		switch k {
		case "probability":
			if err := json.Unmarshal(v, &p); err != nil || math.IsNaN(p) || p < 0 || p > 1 {
				return 0, 0, fmt.Errorf("probability %s: want a number from 0 to 1", v)
			}
		case "max":
			var f float64
			if err := json.Unmarshal(v, &f); err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
				return 0, 0, fmt.Errorf("max %s: want a whole number of fires (0: no cap)", v)
			}
			max = int64(f)
		default:
			return 0, 0, fmt.Errorf("unknown attribute %q: a commit toxic takes probability and max", k)
		}
	}
	return p, max, nil
}

type toxicRequest struct {
	Name       string                     `json:"name"`
	Type       string                     `json:"type"`
	Stream     string                     `json:"stream"`
	Toxicity   *float32                   `json:"toxicity"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

func (a *api) createToxic(w http.ResponseWriter, r *http.Request, ours bool, body []byte) {
	var in toxicRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&in); err != nil {
		a.next.ServeHTTP(w, r)
		return
	}
	if in.Stream == "" {
		in.Stream = "downstream"
	}
	if in.Name == "" {
		in.Name = in.Type + "_" + in.Stream
	}
	commit := isCommitType(in.Type)
	if commit && (!ours || a.p.Faults() == nil) {
		apiError(w, http.StatusBadRequest, "toxic type %s: proxy %q has no commit faults (only the proxy started with a protocol has them)", in.Type, strings.Split(strings.Trim(r.URL.Path, "/"), "/")[1])
		return
	}
	if !commit {
		// A standard toxic: checked as toxiproxy will read it. A body toxiproxy
		// cannot read goes on for toxiproxy to word its own refusal.
		if t, err := decodeToxic(body); err == nil {
			if err := checkToxic(t); err != nil {
				apiError(w, http.StatusBadRequest, "toxic %q: %v", in.Name, err)
				return
			}
		}
	}
	if !ours {
		a.next.ServeHTTP(w, r)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, taken := a.view(in.Name); taken || isEndName(in.Name) || (commit && a.p.px.Toxics.GetToxic(in.Name) != nil) {
		apiError(w, http.StatusConflict, "toxic %q already exists", in.Name)
		return
	}
	if !commit {
		a.next.ServeHTTP(w, r)
		return
	}
	for _, v := range a.views() {
		if v.Type == in.Type {
			apiError(w, http.StatusConflict, "proxy %q already has a %s toxic, %q: update or remove it; a proxy has one toxic per commit fault", a.p.px.Name, in.Type, v.Name)
			return
		}
	}
	if in.Stream != "upstream" && in.Stream != "downstream" {
		apiError(w, http.StatusBadRequest, "stream %q: want upstream or downstream", in.Stream)
		return
	}
	p, max, err := commitAttrs(in.Toxicity, in.Attributes, 1, 0)
	if err != nil {
		apiError(w, http.StatusBadRequest, "toxic %q: %v", in.Name, err)
		return
	}
	a.added[in.Type] = apiToxic{name: in.Name, stream: in.Stream}
	a.knob(in.Type).Set(p, max)
	v, _ := a.view(in.Name)
	writeJSON(w, v)
}

// updateToxic checks the update of a standard toxic as toxiproxy will apply it, over
// the toxic's current values, before toxiproxy applies it.
func (a *api) updateToxic(w http.ResponseWriter, r *http.Request, proxy, name string, body []byte) {
	px, err := a.p.srv.Collection.Get(proxy)
	if err != nil {
		a.next.ServeHTTP(w, r)
		return
	}
	t := px.Toxics.GetToxic(name)
	if t == nil {
		a.next.ServeHTTP(w, r)
		return
	}
	if u, err := decodeUpdate(t, body); err == nil {
		if err := checkToxic(u); err != nil {
			apiError(w, http.StatusBadRequest, "toxic %q: %v", name, err)
			return
		}
	}
	a.next.ServeHTTP(w, r)
}

// commitToxic serves a request for one toxic by name when that name is a commit
// toxic's or a hidden half's, and reports whether it did.
func (a *api) commitToxic(w http.ResponseWriter, r *http.Request, name string, body []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.view(name)
	if !ok {
		if isEndName(name) {
			// The link ends stay, whatever is asked: the proxy's connections
			// live in them.
			apiError(w, http.StatusNotFound, "toxic not found")
			return true
		}
		return false
	}
	k := a.knob(v.Type)
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, v)
	case http.MethodPost, http.MethodPatch:
		var in toxicRequest
		if err := json.Unmarshal(body, &in); err != nil {
			apiError(w, http.StatusBadRequest, "bad request body: %v", err)
			return true
		}
		p, max, err := commitAttrs(in.Toxicity, in.Attributes, k.P(), k.Max())
		if err != nil {
			apiError(w, http.StatusBadRequest, "toxic %q: %v", name, err)
			return true
		}
		if _, added := a.added[v.Type]; !added {
			// Armed from Go or a schedule: from now on the API owns it.
			a.added[v.Type] = apiToxic{name: v.Name, stream: v.Stream}
		}
		k.Set(p, max)
		v, _ = a.view(name)
		writeJSON(w, v)
	case http.MethodDelete:
		delete(a.added, v.Type)
		k.Disarm()
		w.WriteHeader(http.StatusNoContent)
	default:
		apiError(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	}
	return true
}

// toxicList is the proxy's toxics as the API shows them: toxiproxy's, without the link
// ends, and the commit toxics.
func (a *api) toxicList() []any {
	list := []any{}
	for _, t := range a.p.px.Toxics.GetToxicArray() {
		if w, ok := t.(*tp.ToxicWrapper); ok && w.Type == endType {
			continue
		}
		list = append(list, t)
	}
	a.mu.Lock()
	for _, v := range a.views() {
		list = append(list, v)
	}
	a.mu.Unlock()
	return list
}

// reset is toxiproxy's POST /reset without removing the link ends: every proxy is
// enabled, every other toxic removed and the commit faults disarmed.
func (a *api) reset(ctx context.Context, w http.ResponseWriter) {
	for _, px := range a.p.srv.Collection.Proxies() {
		if px != a.p.px {
			if err := px.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
				apiError(w, http.StatusInternalServerError, "reset proxy %q: %v", px.Name, err)
				return
			}
			px.Toxics.ResetToxics(ctx)
			continue
		}
		if err := a.p.Enable(); err != nil {
			apiError(w, http.StatusInternalServerError, "reset proxy %q: %v", px.Name, err)
			return
		}
		for _, t := range px.Toxics.GetToxicArray() {
			if tw, ok := t.(*tp.ToxicWrapper); ok && tw.Type != endType {
				px.Toxics.RemoveToxic(ctx, tw.Name)
			}
		}
	}
	a.mu.Lock()
	for _, typ := range commitTypes {
		if k := a.knob(typ); k != nil {
			k.Disarm()
		}
	}
	clear(a.added)
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
