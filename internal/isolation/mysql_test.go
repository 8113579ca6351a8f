package isolation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// Hermitage's table for MySQL/InnoDB measured on MariaDB: every cell either agrees
// with Hermitage's or is reported as a finding with the statements that show it;
// every observed anomaly comes with the checker's cycle; what each level prevents, it
// prevents by a means the steps show.
func TestHermitageTableMySQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := mariadb.Start(ctx, mariadb.Options{Dir: servertest.ReachableDir(t)})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	dsn := m.User + ":" + m.Password + "@tcp(" + m.Addr + ")/" + m.Database
	tab, err := isolation.MeasureMySQL(ctx, dsn, isolation.MySQLLevels)
	if err != nil {
		t.Fatal(err)
	}
	tab.Server = "MariaDB " + m.Version
	t.Logf("\n%s", tab.Text())
	if len(tab.Cells) != len(isolation.Anomalies())*len(isolation.MySQLLevels) {
		t.Fatalf("%d cells, want %d", len(tab.Cells), len(isolation.Anomalies())*len(isolation.MySQLLevels))
	}
	for _, c := range tab.Cells {
		if c.Agrees != (c.Observed == c.Hermitage) {
			t.Errorf("%s at %s: agrees %v though observed %v and Hermitage %v", c.Anomaly, c.Level, c.Agrees, c.Observed, c.Hermitage)
		}
		if !c.Agrees && (c.Finding == "" || !strings.Contains(c.Finding, c.Steps[0].SQL) || !strings.Contains(c.Finding, "MySQL/InnoDB")) {
			t.Errorf("%s at %s differs from Hermitage without a finding that shows its statements: %q", c.Anomaly, c.Level, c.Finding)
		}
		if c.Observed && (c.Cycle == "" || c.How != "not prevented") {
			t.Errorf("%s at %s observed without its cycle: %+v", c.Anomaly, c.Level, c)
		}
		if !c.Observed && c.How == "not prevented" {
			t.Errorf("%s at %s prevented, said not prevented", c.Anomaly, c.Level)
		}
	}
	// Hermitage's own notes: SERIALIZABLE prevents the lost update with a deadlock
	// (1213, SQLSTATE 40001) after blocking, and READ UNCOMMITTED shows an aborted write.
	if c, ok := tab.Cell("P4", isolation.Serializable); !ok || c.Observed || !c.Blocked {
		t.Errorf("P4 at serializable: %+v, want prevented after blocking", c)
	}
	if c, ok := tab.Cell("G1a", isolation.ReadUncommitted); !ok || !c.Observed {
		t.Errorf("G1a at read-uncommitted: %+v, want observed", c)
	}
}
