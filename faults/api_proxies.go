package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// The proxies of the HTTP API: their listeners stay on loopback, and their JSON is
// toxiproxy's without the parts that are not the proxy's.
//
// toxiproxy decodes a proxy with encoding/json into its Proxy struct, which matches
// keys case-insensitively and by Unicode folding ("Listen", "lIsTeN" and "liſten" are
// all listen), takes the last of duplicate keys, and ignores what follows the first
// JSON value. A check of the raw keys would miss all of that. So each body is decoded
// here the same way, into fields of the same names, the listen address is checked (an
// empty or missing one becomes a free loopback port; toxiproxy would bind every
// interface), and toxiproxy receives a body written anew from the decoded values alone:
// what it binds is what was checked.

// proxyFields is a proxy as toxiproxy's API decodes a request's body.
type proxyFields struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

// populateItem is an entry of POST /populate as toxiproxy decodes it: enabled, when
// absent, means true.
type populateItem struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  *bool  `json:"enabled"`
}

// checkProxy applies the bind rule to listen (empty: a free loopback port) and the
// upstream check to upstream. It answers the refusal and returns false, or returns the
// address to bind.
func (a *api) checkProxy(w http.ResponseWriter, listen, upstream string) (string, bool) {
	if upstream != "" {
		// An upstream that could never be dialled is refused here, as at Start,
		// rather than dropping every client of the proxy later.
		if err := checkUpstream(upstream); err != nil {
			apiError(w, http.StatusBadRequest, "%v", err)
			return "", false
		}
	}
	if listen == "" {
		return "127.0.0.1:0", true
	}
	bind, err := bindAddr(listen, a.allowRemote)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errNotLoopback) {
			status = http.StatusForbidden
		}
		apiError(w, status, "listen %v", err)
		return "", false
	}
	return bind, true
}

// pass hands r to toxiproxy with body in place of its own, and rewrites the answer
// with edit.
func (a *api) pass(w http.ResponseWriter, r *http.Request, body any, edit func([]byte) ([]byte, error)) {
	b, _ := json.Marshal(body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	a.forward(w, r, edit)
}

// readProxy decodes a proxy's fields from body over the defaults in holds, and checks
// its address and upstream; when either is refused it has answered the request.
func (a *api) readProxy(w http.ResponseWriter, body []byte, in *proxyFields) (listen string, ok bool) {
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(in); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: %v", err)
		return "", false
	}
	return a.checkProxy(w, in.Listen, in.Upstream)
}

// createProxy serves POST /proxies.
func (a *api) createProxy(w http.ResponseWriter, r *http.Request, body []byte) {
	in := proxyFields{Enabled: true}
	listen, ok := a.readProxy(w, body, &in)
	if !ok {
		return
	}
	in.Listen = listen
	a.pass(w, r, in, showProxy)
}

// updateProxy serves POST and PATCH /proxies/NAME for a proxy created through the API,
// decoded over its current values as toxiproxy does.
func (a *api) updateProxy(w http.ResponseWriter, r *http.Request, name string, body []byte) {
	px, err := a.p.srv.Collection.Get(name)
	if err != nil {
		a.next.ServeHTTP(w, r)
		return
	}
	px.Lock()
	in := proxyFields{Listen: px.Listen, Upstream: px.Upstream, Enabled: px.Enabled}
	px.Unlock()
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: %v", err)
		return
	}
	if in.Listen == "" {
		apiError(w, http.StatusBadRequest, `listen "": want host:port (":0" for a free loopback port)`)
		return
	}
	listen, ok := a.checkProxy(w, in.Listen, in.Upstream)
	if !ok {
		return
	}
	in.Listen = listen
	a.pass(w, r, struct {
		Listen   string `json:"listen"`
		Upstream string `json:"upstream"`
		Enabled  bool   `json:"enabled"`
	}{in.Listen, in.Upstream, in.Enabled}, showProxy)
}

// populate serves POST /populate. An entry naming the proxy Start made is refused:
// toxiproxy would replace it by a proxy of its own.
func (a *api) populate(w http.ResponseWriter, r *http.Request, body []byte) {
	var in []populateItem
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: %v", err)
		return
	}
	for i, it := range in {
		if it.Name == a.p.px.Name && !a.p.isDeleted() {
			apiError(w, http.StatusConflict, "proxy %q is the one indoubt started: change it with PATCH /proxies/%s", it.Name, it.Name)
			return
		}
		listen, ok := a.checkProxy(w, it.Listen, it.Upstream)
		if !ok {
			return
		}
		in[i].Listen = listen
	}
	if in == nil {
		in = []populateItem{}
	}
	a.pass(w, r, in, func(b []byte) ([]byte, error) {
		var out map[string]json.RawMessage
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(out["proxies"], &list); err != nil {
			return nil, err
		}
		for _, obj := range list {
			delete(obj, "Logger")
		}
		out["proxies"], _ = json.Marshal(list)
		return json.Marshal(out)
	})
}

// showProxy rewrites toxiproxy's JSON of one proxy without its Logger field: toxiproxy
// marshals its Proxy struct whole, and the logger shows as "Logger":{}.
func showProxy(b []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	delete(obj, "Logger")
	return json.Marshal(obj)
}

// showProxies rewrites the answers of GET /proxies, /proxies/NAME and, for the proxy
// Start made, /proxies/NAME/toxics: without Logger fields, and with that proxy as
// ourView shows it.
func (a *api) showProxies(b []byte, path []string) ([]byte, error) {
	ours := func(name string) bool { return name == a.p.px.Name && !a.p.isDeleted() }
	switch len(path) {
	case 3:
		return json.Marshal(a.toxicList())
	case 2:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, err
		}
		delete(obj, "Logger")
		if ours(path[1]) {
			a.ourView(obj)
		}
		return json.Marshal(obj)
	}
	var all map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for name, obj := range all {
		delete(obj, "Logger")
		if ours(name) {
			a.ourView(obj)
		}
	}
	return json.Marshal(all)
}

// ourView fills toxiproxy's JSON of the proxy Start made with what toxiproxy does not
// know of it: whether it accepts connections (toxiproxy never started it, see relay.go)
// and its toxics as toxicList shows them.
func (a *api) ourView(obj map[string]json.RawMessage) {
	obj["enabled"], _ = json.Marshal(a.p.enabled())
	obj["toxics"], _ = json.Marshal(a.toxicList())
}

// updateOurs serves POST and PATCH /proxies/NAME for the proxy Start made: it can be
// disabled and enabled, but keeps its address and upstream, which its clients and the
// code that started it were given.
func (a *api) updateOurs(w http.ResponseWriter, body []byte) {
	in := proxyFields{Listen: a.p.addr, Upstream: a.p.upstream, Enabled: a.p.enabled()}
	listen, ok := a.readProxy(w, body, &in)
	if !ok {
		return
	}
	if in.Listen == "" || listen != a.p.addr || in.Upstream != a.p.upstream {
		apiError(w, http.StatusConflict, "proxy %q keeps listen %s and upstream %s, which its clients were given: create another proxy for another address", a.p.px.Name, a.p.addr, a.p.upstream)
		return
	}
	if in.Enabled {
		if err := a.p.Enable(); err != nil {
			apiError(w, http.StatusInternalServerError, "%v", err)
			return
		}
	} else {
		a.p.Disable()
	}
	obj := map[string]json.RawMessage{}
	for k, v := range map[string]string{"name": a.p.px.Name, "listen": a.p.addr, "upstream": a.p.upstream} {
		obj[k], _ = json.Marshal(v)
	}
	a.ourView(obj)
	writeJSON(w, obj)
}

// deleteOurs serves DELETE /proxies/NAME for the proxy Start made: it stops serving for
// good (Proxy.Done is closed) and the API forgets it.
func (a *api) deleteOurs(w http.ResponseWriter) {
	if !a.p.remove() {
		apiError(w, http.StatusNotFound, "proxy not found")
		return
	}
	a.p.srv.Collection.Remove(a.p.px.Name)
	w.WriteHeader(http.StatusNoContent)
}

// captured is a response held back to be rewritten.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}
func (c *captured) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

// forward serves r with toxiproxy's router and rewrites its JSON answer with edit (nil:
// as it is), an error's too (POST /populate lists the proxies it made before one
// failed). An answer edit cannot read goes out as toxiproxy wrote it.
func (a *api) forward(w http.ResponseWriter, r *http.Request, edit func([]byte) ([]byte, error)) {
	c := &captured{header: http.Header{}}
	a.next.ServeHTTP(c, r)
	out := c.body.Bytes()
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if edit != nil && len(bytes.TrimSpace(out)) > 0 {
		if b, err := edit(out); err == nil {
			out = b
		}
	}
	for k, v := range c.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(c.status)
	w.Write(out)
}
