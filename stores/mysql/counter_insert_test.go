package mysql_test

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/stores/mysql"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/insert"
)

// Every mechanism at every InnoDB level on the counter suite. A read-write increment
// below SERIALIZABLE reads its snapshot with no lock and writes over what another
// transaction committed meanwhile: InnoDB lets that lost update through (Hermitage's
// P4 at REPEATABLE READ), and the suite must see it.
func TestMySQLCounterConformance(t *testing.T) {
	for _, mech := range mysql.CounterMechanisms {
		for _, iso := range mysql.Isolations {
			t.Run(string(mech)+"/"+string(iso), func(t *testing.T) {
				var opts []storetest.Option
				if mech == mysql.ReadWrite && iso != mysql.Serializable {
					opts = append(opts, storetest.KnownViolation(storetest.ConcurrentIncrements,
						"InnoDB lets a read-write increment below SERIALIZABLE overwrite a concurrent one (lost update)"))
				}
				storetest.Counter(t, func(t *testing.T) counter.Store {
					k, err := mysql.NewCounter(open(t, ""), mysql.CounterConfig{Mechanism: mech, Isolation: iso})
					if err != nil {
						t.Fatal(err)
					}
					return k
				}, opts...)
			})
		}
	}
}

func TestMySQLCounterRefusesUnknown(t *testing.T) {
	c := open(t, "")
	if _, err := mysql.NewCounter(c, mysql.CounterConfig{Mechanism: "telepathy"}); err == nil {
		t.Error("an unknown mechanism was accepted")
	}
	if _, err := mysql.NewCounter(c, mysql.CounterConfig{Isolation: "snapshot"}); err == nil {
		t.Error("an unknown level was accepted")
	}
}

// Every key shape MariaDB 10.11 makes; uuidv4 on the server needs UUID_v4() (11.7),
// and is refused by name where the server has none.
func TestMySQLInsertConformance(t *testing.T) {
	var keys []insert.Key
	for _, k := range insert.Keys {
		if k != insert.UUIDv4 {
			keys = append(keys, k)
		}
	}
	storetest.Insert(t, func(t *testing.T) insert.Store { return open(t, "") }, keys)
	t.Run("uuidv4", func(t *testing.T) {
		c := open(t, "")
		_, err := c.PrepareInsert(t.Context(), insert.UUIDv4)
		if err != nil {
			if !strings.Contains(err.Error(), "UUID_v4()") || !strings.Contains(err.Error(), "client-uuidv4") {
				t.Errorf("refused with %v: want the missing UUID_v4() and client-uuidv4 named", err)
			}
			return
		}
		storetest.Insert(t, func(t *testing.T) insert.Store { return c }, []insert.Key{insert.UUIDv4})
	})
}
