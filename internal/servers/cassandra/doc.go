// Package cassandra launches a throwaway single-node Apache Cassandra for tests and
// zero-config runs (Start), from the jars scripts/prepare-cassandra resolves from Maven
// Central (internal/servers/cassandra/pom.xml names them), with the commit log sync mode
// under test (periodic, batch or group).
//
// The node runs CassandraDaemon under java in the foreground, with its data in a
// temporary directory, on free loopback ports, in its own process group; it is stopped
// by pid. It accepts any local client (AllowAllAuthenticator, for start-up time), which
// can reach its throwaway data. Readiness is read at the wire level (Probe): the package
// links no CQL driver.
//
// What it shares with the other launchers (the temporary directory's owner marker that
// `indoubt clean` reads, the process faults, the DataFS mount for a power loss) is
// package servers' Instance.
package cassandra
