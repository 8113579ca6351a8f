package toxics

import (
	"reflect"
	"testing"
)

// mySplit splits at the semicolons a MySQL server would split at, and at no other.
func TestMySplit(t *testing.T) {
	for _, tt := range []struct {
		sql  string
		want []string
	}{
		{"BEGIN; UPDATE t SET v = 1 ;COMMIT", []string{"BEGIN", "UPDATE t SET v = 1", "COMMIT"}},
		{" ; ;SELECT 1;; ", []string{"SELECT 1"}},
		{`INSERT INTO t VALUES ('a;b', "c;d", 'it''s;', 'back\';slash')`, []string{`INSERT INTO t VALUES ('a;b', "c;d", 'it''s;', 'back\';slash')`}},
		{"SELECT `a;b` FROM t; SELECT 2", []string{"SELECT `a;b` FROM t", "SELECT 2"}},
		{"SELECT 1 # no; split\n; SELECT 2", []string{"SELECT 1 # no; split", "SELECT 2"}},
		{"SELECT 1 -- no; split\n; SELECT 2 --; x", []string{"SELECT 1 -- no; split", "SELECT 2 --", "x"}},
		{"SELECT /* a; b */ 1; SELECT 2", []string{"SELECT /* a; b */ 1", "SELECT 2"}},
		{"SELECT 'open; quote", []string{"SELECT 'open; quote"}},
		{"SELECT 1 /* open; comment", []string{"SELECT 1 /* open; comment"}},
	} {
		if got := mySplit(tt.sql); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("mySplit(%q) = %q, want %q", tt.sql, got, tt.want)
		}
	}
}
