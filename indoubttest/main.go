package indoubttest

import (
	"fmt"
	"os"
	"testing"

	"github.com/indoubt/indoubt/indoubttest/internal/serve"
)

// Main runs the tests and then stops every server the store subpackages launched. Call it
// from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if err := serve.StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "indoubttest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
