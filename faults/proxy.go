package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Options configures a Proxy.
type Options struct {
	// Upstream is the server's address, host:port. Required; Start refuses an
	// address whose port is not a port or whose host does not resolve.
	Upstream string
	// Listen is the proxy's address; default "127.0.0.1:0" (a free loopback port).
	// A host left empty (":6432") means loopback. A host that is not loopback (an
	// interface's address, 0.0.0.0, a name that resolves elsewhere) is refused unless
	// AllowRemote is set.
	Listen string
	// Name is the proxy's name in toxiproxy's HTTP API; default "indoubt".
	Name string
	// Protocol enables the commit faults for that wire protocol (toxics.Postgres{}).
	// Nil: a plain TCP proxy, for the standard toxics and partitions only.
	Protocol toxics.Protocol
	// Seed seeds the commit decisions; see toxics.Config.
	Seed int64
	// Match restricts the commit points that count; see toxics.Config.
	Match func(text string) bool
	// Events receives each commit fault as it fires; see toxics.Config.
	Events func(toxics.Event)
	// API, when not empty, serves toxiproxy's HTTP API (the one its client package
	// speaks) on that address, under the same bind rule as Listen. Off by default.
	// The API has no authentication, so it guards against the web pages a browser on
	// this machine may run: it answers only requests whose Host header names a
	// loopback host or the address it was bound to, refuses POST and PATCH bodies
	// that are not application/json (415), and refuses to open a proxy listener off
	// loopback unless AllowRemote is set. See the package documentation for the
	// commit toxics it adds to toxiproxy's.
	API string
	// AllowRemote lets Listen, API and the listeners created through the API bind
	// addresses other than loopback. Whoever reaches them can proxy to Upstream (or,
	// through the API, to anywhere): set it only on a trusted network.
	AllowRemote bool
}

// Proxy is a TCP proxy between clients and one server, with indoubt's commit faults
// when a protocol is given. It accepts connections itself; the commit faults judge
// every byte of a connection from its first, and know its client's address from the
// accepted socket. While the proxy has no standard toxic a connection is relayed
// directly (spliced, without a protocol); a standard toxic moves every connection to
// toxiproxy v2.12.0's links, embedded in the process, where toxiproxy's toxics act on
// it (see direct.go for the rule). Its methods are safe for concurrent use.
type Proxy struct {
	upstream string
	addr     string // fixed at Start: Enable listens here again
	srv      *toxiproxy.ApiServer
	// px is the proxy as toxiproxy's HTTP API and links know it: it holds the toxics.
	// toxiproxy never starts it (its own accept loop names clients only in the log
	// line it writes), so its Enabled stays false; see relay.go.
	px      *toxiproxy.Proxy
	commits *toxics.Commits
	ctx     context.Context // ends at Close or deletion: pending dials give up
	cancel  context.CancelFunc

	// linkMu serialises the starts of toxiproxy links, so that the link end of each
	// takes the state in handoff (see startLinks).
	linkMu  sync.Mutex
	handoff *endState
	pumps   sync.WaitGroup // the goroutines of direct connections

	mu       sync.Mutex
	ln       net.Listener  // nil while disabled
	accepted chan struct{} // closed when the accept loop of ln has returned
	conns    map[*conn]struct{}
	linked   bool // a standard toxic is on the chain: connections take links (direct.go)
	closed   bool
	deleted  bool
	done     chan struct{}

	apiSrv *http.Server
	apiLn  net.Listener
	apiErr chan error
}

// Start starts a proxy and, if asked, its HTTP API. Close stops both. It fails, with
// one line naming the address, on an upstream that does not parse or resolve and on a
// listen or API address that breaks the bind rule of Options.
func Start(opt Options) (*Proxy, error) {
	if err := checkUpstream(opt.Upstream); err != nil {
		return nil, fmt.Errorf("start proxy: %w", err)
	}
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:0"
	}
	listen, err := bindAddr(opt.Listen, opt.AllowRemote)
	if err != nil {
		return nil, fmt.Errorf("start proxy: listen %w", err)
	}
	if opt.Name == "" {
		opt.Name = "indoubt"
	}
	p := &Proxy{upstream: opt.Upstream, conns: map[*conn]struct{}{}, done: make(chan struct{})}
	if opt.Protocol != nil {
		c, err := toxics.NewCommits(toxics.Config{Protocol: opt.Protocol, Seed: opt.Seed, Match: opt.Match, Events: opt.Events})
		if err != nil {
			return nil, fmt.Errorf("start proxy: %w", err)
		}
		p.commits = c
	}
	// A real metrics container: toxiproxy dereferences it on every link. Nothing of
	// indoubt's reads toxiproxy's log, so it goes nowhere.
	p.srv = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p.px = toxiproxy.NewProxy(p.srv, opt.Name, listen, opt.Upstream)
	if err := p.installEnds(); err != nil {
		return nil, fmt.Errorf("start proxy: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("start proxy on %s: %w", listen, err)
	}
	p.addr = ln.Addr().String()
	p.px.Listen = p.addr
	if err := p.srv.Collection.Add(p.px, false); err != nil {
		ln.Close()
		return nil, fmt.Errorf("start proxy on %s: %w", listen, err)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.Lock()
	p.serve(ln)
	p.mu.Unlock()
	if opt.API != "" {
		if err := p.serveAPI(opt.API, opt.AllowRemote); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

func (p *Proxy) serveAPI(addr string, allowRemote bool) error {
	bind, err := bindAddr(addr, allowRemote)
	if err != nil {
		return fmt.Errorf("proxy api %w", err)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("proxy api: %w", err)
	}
	host, _, _ := net.SplitHostPort(bind)
	p.apiLn = ln
	p.apiSrv = &http.Server{Handler: newAPI(p, host, allowRemote), ReadHeaderTimeout: 10 * time.Second}
	p.apiErr = make(chan error, 1)
	go func() {
		err := p.apiSrv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		p.apiErr <- err
	}()
	return nil
}

// Addr returns the address clients connect to, host:port.
func (p *Proxy) Addr() string { return p.addr }

// Upstream returns the server's address, as Options gave it.
func (p *Proxy) Upstream() string { return p.upstream }

// APIAddr returns the HTTP API's address, or "" when it is off.
func (p *Proxy) APIAddr() string {
	if p.apiLn == nil {
		return ""
	}
	return p.apiLn.Addr().String()
}

// Done is closed when the proxy stops serving for good: at Close, or when a client of
// its HTTP API deleted it (DELETE /proxies/NAME). The API then goes on serving the
// other proxies until Close.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Faults returns the knobs of the commit faults, or nil without a protocol. They start
// disarmed; Set and Disarm take effect on open connections. Go code, indoubt's fault
// schedules and the HTTP API's commit toxics drive the same knobs: the last change
// wins.
func (p *Proxy) Faults() *toxics.Faults {
	if p.commits == nil {
		return nil
	}
	return &p.commits.Faults
}

// Toxic is one of toxiproxy's standard toxics: latency (latency, jitter in ms),
// bandwidth (rate in KB/s), timeout (timeout in ms), reset_peer (timeout in ms),
// slow_close (delay in ms), limit_data (bytes).
type Toxic struct {
	// Name is unique on the proxy.
	Name string
	// Type is toxiproxy's type name: latency, bandwidth, timeout, reset_peer,
	// slow_close, limit_data.
	Type string
	// Upstream applies the toxic to client-to-server bytes; default server to client.
	Upstream bool
	// Attributes are the toxic's attributes as toxiproxy names them.
	Attributes map[string]int64
}

// AddToxic adds a standard toxic with toxicity 1. It takes effect on open connections.
// It fails when the name is taken, when toxiproxy does not know the type, and on an
// attribute out of its range (a negative duration, a rate of 0, a duration over a
// day), naming the attribute.
func (p *Proxy) AddToxic(t Toxic) error {
	body, err := t.check()
	if err != nil {
		return fmt.Errorf("add toxic %s: %w", t.Name, err)
	}
	if _, err := p.px.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("add toxic %s: %w", t.Name, err)
	}
	p.syncPaths()
	return nil
}

// check applies the rule of toxicrules.go to t and returns t as toxiproxy's JSON.
func (t Toxic) check() ([]byte, error) {
	stream := "downstream"
	if t.Upstream {
		stream = "upstream"
	}
	body, err := json.Marshal(map[string]any{"name": t.Name, "type": t.Type, "stream": stream, "toxicity": 1, "attributes": t.Attributes})
	if err != nil {
		return nil, err
	}
	w, err := decodeToxic(body)
	if err == nil {
		err = checkToxic(w)
	}
	return body, err
}

// Check reports why AddToxic would refuse t's type or attributes (an unknown type, a
// negative latency, a duration over a day, a rate beyond 1 TB/s), or nil when it
// would take them, without a proxy: a program that reads toxics from its user checks
// them all before it starts.
func (t Toxic) Check() error {
	_, err := t.check()
	return err
}

// RemoveToxic removes a toxic that AddToxic added. It fails on an unknown name.
func (p *Proxy) RemoveToxic(name string) error {
	if isEndName(name) {
		return fmt.Errorf("remove toxic %s: %w", name, toxiproxy.ErrToxicNotFound)
	}
	if err := p.px.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("remove toxic %s: %w", name, err)
	}
	p.syncPaths()
	return nil
}

// Disable stops accepting connections and closes every open one, both sides: a
// partition. Enable ends it, listening on the same address again.
func (p *Proxy) Disable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
}

// Enable listens again after Disable, on the same address. It fails after Close or a
// deletion through the HTTP API, or when another process took the address meanwhile.
func (p *Proxy) Enable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return errors.New("enable proxy: closed")
	case p.deleted:
		return errors.New("enable proxy: deleted through the HTTP API")
	case p.ln != nil:
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("enable proxy on %s: %w", p.addr, err)
	}
	p.serve(ln)
	return nil
}

// enabled reports whether the proxy accepts connections.
func (p *Proxy) enabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln != nil
}

// isDeleted reports whether the HTTP API deleted the proxy.
func (p *Proxy) isDeleted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deleted
}

// Close stops the proxy, closes every connection through it and stops the HTTP API.
// Link goroutines end shortly after, as their sockets close. Closing twice is a no-op.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if !p.deleted {
		p.end()
	}
	p.mu.Unlock()
	// The direct connections' goroutines end as their sockets close.
	p.pumps.Wait()
	var err error
	if p.apiSrv != nil {
		err = p.apiSrv.Close()
		if e := <-p.apiErr; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("close proxy api: %w", err)
	}
	return nil
}

// remove ends the proxy for a DELETE through the HTTP API, which then forgets it; false
// if it had ended already.
func (p *Proxy) remove() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.deleted {
		return false
	}
	p.deleted = true
	p.end()
	return true
}

// end stops serving for good. Call with p.mu held, once.
func (p *Proxy) end() {
	p.stop()
	p.cancel()
	close(p.done)
}

// resolveTimeout bounds the name lookups of Start: a name that does not resolve in that
// time is as good as one that does not resolve.
const resolveTimeout = 5 * time.Second

// errCredentials refuses an address that holds user information. The message never
// repeats the address, which would print the password.
var errCredentials = errors.New("holds user information (user:password@): give host:port alone; the proxy passes the client's credentials through and needs none")

// checkUpstream refuses an upstream address that could never be dialled, so that a
// typo fails at start instead of dropping every client later.
func checkUpstream(addr string) error {
	if addr == "" {
		return errors.New("no upstream address")
	}
	if strings.Contains(addr, "@") {
		return fmt.Errorf("upstream %w", errCredentials)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("upstream %q: want host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("upstream %q: no host (want e.g. 127.0.0.1%s)", addr, addr)
	}
	if n, err := net.LookupPort("tcp", port); err != nil || n == 0 {
		return fmt.Errorf("upstream %q: port %q is not a TCP port", addr, port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return fmt.Errorf("upstream %q: cannot resolve %s", addr, host)
	}
	return nil
}

// errNotLoopback is the refusal of a bind beyond loopback without AllowRemote.
var errNotLoopback = errors.New("is not loopback: binding it needs Options.AllowRemote (indoubt proxy --allow-remote)")

// bindAddr applies the bind rule to a listen address and returns the address to bind:
// an empty host means loopback, and a host that is not loopback needs allowRemote
// (errNotLoopback). A name is resolved here, as net.Listen would resolve it (an IPv4
// address first), and the address returned in its place, so that what is bound is
// what was checked.
func bindAddr(addr string, allowRemote bool) (string, error) {
	if strings.Contains(addr, "@") {
		return "", fmt.Errorf("address %w", errCredentials)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: want host:port", addr)
	}
	if n, err := net.LookupPort("tcp", port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("address %q: port %q is not a TCP port", addr, port)
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if allowRemote {
		return addr, nil
	}
	ip, ok := loopbackIP(host)
	if !ok {
		return "", fmt.Errorf("address %q %w", addr, errNotLoopback)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// loopbackIP returns the address to bind for host when every address of host is a
// loopback address: host itself when it is an address, else the first IPv4 address it
// resolves to (the one net.Listen would take), else its first. A name that does not
// resolve is not loopback (binding it fails anyway).
func loopbackIP(host string) (net.IP, bool) {
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip, ip.IsLoopback()
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return nil, false
	}
	pick := ips[0].IP
	for i := len(ips) - 1; i >= 0; i-- {
		if !ips[i].IP.IsLoopback() {
			return nil, false
		}
		if ips[i].IP.To4() != nil {
			pick = ips[i].IP
		}
	}
	return pick, true
}
