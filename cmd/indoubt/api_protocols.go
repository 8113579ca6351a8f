package main

import "github.com/indoubt/indoubt/faults/toxics"

// apiProtocolHelp is what proxy --help says of the API layers' protocols (http, grpc;
// their rows are runner's, with the stores').
const apiProtocolHelp = `Commit points (http, an API over HTTP/1.1): every request; by default those of
unsafe methods (POST, PUT, PATCH, DELETE); --match sees "METHOD /path". The cut
(--cut-after-commit, --fault response-cut) lets the request reach the service and cuts
the connection as its response starts (the handler ran; a 4xx or 5xx is never cut);
the drop (--drop-commit, --fault request-drop) closes it before the service sees the
request. (grpc, also h2c and http2: HTTP/2 with prior knowledge, as gRPC without TLS
speaks it): every call, by its :path ("POST /package.Service/Method"); the cut resets
that call's stream alone and the connection goes on. Each event names the method,
path, Idempotency-Key and the status the service answered.`

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
