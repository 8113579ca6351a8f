package main

import "github.com/indoubt/indoubt/faults/toxics"

// apiProtocols are the --protocol names of the API layer: the proxy stands in front of
// a service, not a database, and its faults are response-cut (commit-cut) and
// request-drop (commit-drop). They name no store, so the store table does not hold them.
var apiProtocols = map[string]toxics.Protocol{
	"http":  toxics.HTTP{},
	"grpc":  toxics.HTTP2{},
	"h2c":   toxics.HTTP2{},
	"http2": toxics.HTTP2{},
}

// apiProtocolHelp is what proxy --help says of them.
const apiProtocolHelp = `Commit points (http, an API over HTTP/1.1): every request; by default those of
unsafe methods (POST, PUT, PATCH, DELETE); --match sees "METHOD /path". The cut
(--cut-after-commit, --fault response-cut) lets the request reach the service and cuts
the connection as its response starts (the handler ran; a 4xx or 5xx is never cut);
the drop (--drop-commit, --fault request-drop) closes it before the service sees the
request. (grpc, also h2c and http2: HTTP/2 with prior knowledge, as gRPC without TLS
speaks it): every call, by its :path ("POST /package.Service/Method"); the cut resets
that call's stream alone and the connection goes on. Each event names the method,
path, Idempotency-Key and the status the service answered.`

// apiEnv gives a program the proxy's base URL, in front of the service it calls: a
// client reads INDOUBT_BASE_URL where it would read its API's address, with no
// HTTP_PROXY in the way.
func apiEnv(_, addr string) ([]string, error) {
	return []string{"INDOUBT_BASE_URL=http://" + addr}, nil
}

// faultName is a fault's name as the proxy prints it: at the API layer (an event that
// names its request) a commit-cut is a response-cut and a commit-drop a request-drop.
func faultName(e toxics.Event) string {
	if e.Request != nil {
		switch e.Kind {
		case toxics.CommitCut:
			return "response-cut"
		case toxics.CommitDrop:
			return "request-drop"
		}
	}
	return e.Kind.String()
}
