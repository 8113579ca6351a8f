// Package redis launches throwaway Redis servers for tests and zero-config runs: one
// redis-server (Start) with the persistence under test (none, or an AOF fsynced every
// second or at every write), and a replicated Redis (StartReplicated): a primary, a
// replica and three Sentinels that fail over on their own.
//
// Each server runs Debian's redis-server on a free loopback port with its working
// directory in a temporary directory, as an unprivileged user when the caller is root,
// in its own process group; it is stopped by pid. Every client must give a password made
// for the launch (in Server.DSN). Readiness and the Sentinels' view are read at the
// wire level: the package links no Redis client.
//
// What it shares with the other launchers (the temporary directory's owner marker that
// `indoubt clean` reads, the process faults, the DataFS mount for a power loss) is
// package servers' Instance.
package redis
