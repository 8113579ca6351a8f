// Package mariadb launches a throwaway MariaDB server for tests and zero-config runs:
// Debian's mariadbd on a free loopback port, its data directory made by
// mariadb-install-db in a temporary directory, as an unprivileged user when the caller
// is root, in its own process group; it is stopped by pid.
//
// The server accepts TCP clients only as the user indoubt with a password made for the
// launch (in Server.DSN), which owns the database indoubt; the root account made by
// mariadb-install-db authenticates by unix socket only, and the socket lies in the
// server's private temporary directory. Readiness is read at the wire level (the
// server's handshake packet): the package links no MySQL client.
//
// What it shares with the other launchers (the owner marker of the temporary directory
// that `indoubt clean` reads, the process faults) is package servers' Instance.
package mariadb
