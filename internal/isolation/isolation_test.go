package isolation_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// One server of each version for the package.
var (
	pg15 = servertest.Postgres(postgres.Options{Version: "15"})
	pg18 = servertest.Postgres(postgres.Options{Version: "18"})
)

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg15, pg18)) }

var servers = []struct {
	name string
	h    interface {
		Get(testing.TB) *postgres.Server
	}
}{{"15", pg15}, {"18", pg18}}

// Hermitage's table measured on PostgreSQL 15 and 18: every cell either agrees with
// Hermitage's or is reported as a finding with the statements that show it; every
// observed anomaly comes with the checker's cycle; what each level prevents, it
// prevents by a means the steps show.
func TestHermitageTable(t *testing.T) {
	for _, srv := range servers {
		t.Run("PostgreSQL "+srv.name, func(t *testing.T) {
			s := srv.h.Get(t)
			tab, err := isolation.Measure(context.Background(), s.DSN, isolation.Levels)
			if err != nil {
				t.Fatal(err)
			}
			tab.Server = "PostgreSQL " + s.Version
			t.Logf("\n%s", tab.Text())
			if len(tab.Cells) != len(isolation.Anomalies())*len(isolation.Levels) {
				t.Fatalf("%d cells, want %d", len(tab.Cells), len(isolation.Anomalies())*len(isolation.Levels))
			}
			for _, c := range tab.Cells {
				if c.Agrees != (c.Observed == c.Hermitage) {
					t.Errorf("%s at %s: agrees %v though observed %v and Hermitage %v", c.Anomaly, c.Level, c.Agrees, c.Observed, c.Hermitage)
				}
				if !c.Agrees && (c.Finding == "" || !strings.Contains(c.Finding, c.Steps[0].SQL)) {
					t.Errorf("%s at %s differs from Hermitage without a finding that shows its statements: %q", c.Anomaly, c.Level, c.Finding)
				}
				if c.Observed && (c.Cycle == "" || c.How != "not prevented") {
					t.Errorf("%s at %s observed without its cycle: %+v", c.Anomaly, c.Level, c)
				}
				if !c.Observed && c.How == "not prevented" {
					t.Errorf("%s at %s prevented, said not prevented", c.Anomaly, c.Level)
				}
				if len(c.History) < 4 {
					t.Errorf("%s at %s: the history has %d events", c.Anomaly, c.Level, len(c.History))
				}
			}
		})
	}
}
