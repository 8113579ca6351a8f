package powerfs_test

import (
	"errors"
	"os"
	"testing"

	"github.com/indoubt/indoubt/internal/servers"
)

// serverOrSkip finds a server's binary with find and the account it runs as. A server
// that is not installed skips the test, or fails it under CI=true.
func serverOrSkip(t *testing.T, find func() (string, error)) (string, servers.Account) {
	t.Helper()
	bin, err := find()
	if errors.Is(err, servers.ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		t.Fatal(err)
	}
	return bin, acct
}
