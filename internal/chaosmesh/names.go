package chaosmesh

import (
	"fmt"
	"regexp"
)

// dnsLabel is a Kubernetes namespace (RFC 1123 label): at most 63 lowercase letters,
// digits and hyphens, beginning and ending with a letter or digit.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// dnsSubdomain is a Kubernetes pod name (RFC 1123 subdomain): labels of the same
// characters joined by dots, at most 253 in all.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkNames refuses a namespace or a pod name Kubernetes would not accept: the objects
// would select nothing, or be refused by the API server only when --apply reaches it.
func checkNames(opt Options) error {
	if !dnsLabel.MatchString(opt.Namespace) {
		return fmt.Errorf("chaos mesh: namespace %q: not a Kubernetes namespace (lowercase letters, digits and '-', at most 63)", opt.Namespace)
	}
	for _, n := range opt.Nodes {
		if p := opt.Pods[n]; len(p) > 253 || !dnsSubdomain.MatchString(p) {
			return fmt.Errorf("chaos mesh: node %s: pod %q: not a Kubernetes pod name (lowercase letters, digits, '-' and '.', at most 253)", n, p)
		}
	}
	return nil
}
