package powerfs

// The tests on real servers (postgres_test.go, redis_test.go) are in package
// powerfs_test: package servers imports powerfs to put a launched server on it, so an
// in-package test that imports servers would be an import cycle.
var (
	MountT  = mountT
	SyncDir = syncDir
)
