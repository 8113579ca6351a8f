// Package blackbox holds the README's example of a black-box application: payments.sh,
// a payments client written in shell with psql, that records its own history while it
// runs through `indoubt proxy`, so that `indoubt check --faults` can judge it. The
// package has no Go code of its own; its test runs the example against a launched
// PostgreSQL, as the README does by hand.
package blackbox
