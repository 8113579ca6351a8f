// Package cqle2e holds only tests: the CQL commit faults end to end, against a real
// Apache Cassandra launched once for the package, with clients through an embedded
// faults.Proxy and the server's own state as the judge of every fault's ground truth. It
// lives apart from package faults because a test binary has one TestMain, and that of
// faults launches PostgreSQL. Nothing here is for import.
package cqle2e
