// Package postgres launches throwaway PostgreSQL servers for tests and zero-config runs:
// one server (Start), several independent ones at once (StartMany, for transactions
// across servers), and a primary with a streaming standby (StartReplicated) that fails
// over and rejoins with pg_rewind.
//
// Each server is initdb'd (or, under ShareInitdb, copied from one cluster initdb'd
// once) into a temporary directory from the binaries installed on the machine (Debian's, or PostgreSQL 18 from scripts/prepare-postgres18: see Bin) and runs
// on a free loopback port, as an unprivileged user when the caller is root (PostgreSQL
// refuses to run as root), in its own process group; it is stopped by pid. Every client
// must log in with SCRAM-SHA-256 and a password made for the launch (in Server.DSN), so
// that another local user cannot become the superuser of a server that runs programs.
// Readiness is checked at the wire level: the package links no PostgreSQL client.
//
// What it shares with the other launchers (the temporary directory's owner marker that
// `indoubt clean` reads, the process faults, the DataFS mount for a power loss) is
// package servers' Instance.
package postgres
