// Package serve is the plumbing between indoubttest and its store subpackages: the
// server a test binary launches once per store, the Target a store hands indoubttest,
// and how a Server is made from it. Nothing here is for tests to call.
package serve

import (
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Target is what a store's subpackage (pgtest, redistest, mongotest, cqltest) hands
// NewServer: a server reachable at DirectAddr, and how to address it through the
// proxy.
type Target struct {
	// Store names the store in histories and messages: postgres, redis, mongo.
	Store string
	// DirectAddr is the server's host:port.
	DirectAddr string
	// DirectDSN is the DSN a client uses to reach the server without the proxy.
	DirectDSN string
	// Database names the test's own database, database number or keyspace.
	Database string
	// ProxyDSN rewrites DirectDSN to reach the server through the proxy at addr; nil
	// replaces DirectDSN's host:port with addr (WithHost), which serves every URL DSN.
	ProxyDSN func(addr string) string
	// Protocol is the wire protocol the commit faults understand.
	Protocol toxics.Protocol
	// Options are the indoubttest.Options the test gave the store's constructor, as
	// []indoubttest.Option (this package cannot name the type).
	Options any
	// Classify maps a client error to the error contract of package workloads (the
	// store adapter's Classify); nil treats every error as unknown.
	Classify func(error) error
}

// NewServer makes the indoubttest.Server of a Target for tb (as an any: this package
// cannot name the type); indoubttest sets it when it is initialized, which is before any
// store subpackage, since they import it. Store subpackages call it.
var NewServer func(tb testing.TB, t Target) any
