// Package blackbox holds an example of a black-box application: payments.sh, a
// payments client written in shell with psql, that records its own history while it
// runs, under `indoubt exec` (which starts the proxy, hands the script its addresses
// and checks what it recorded) or, by hand, through `indoubt proxy` with `indoubt check
// --faults` after. The package has no Go code of its own; its tests run the example
// both ways against a launched PostgreSQL.
package blackbox
