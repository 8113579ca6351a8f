package toxics

import (
	"reflect"
	"testing"
)

func TestSplitSQL(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		want []string
	}{
		{"one", "commit", []string{"commit"}},
		{"trailing semicolon", "UPDATE a SET x = 1;", []string{"UPDATE a SET x = 1"}},
		{"two", "begin; update a set x=1", []string{"begin", "update a set x=1"}},
		{"empty statements dropped", " ; ;select 1;; ", []string{"select 1"}},
		{"semicolon in string", "insert into t values ('a;b'); commit", []string{"insert into t values ('a;b')", "commit"}},
		{"doubled quote", "select 'it''s;'; end", []string{"select 'it''s;'", "end"}},
		{"escape string", `select E'\';x'; commit`, []string{`select E'\';x'`, "commit"}},
		{"quoted identifier", `select "a;b" from t; commit`, []string{`select "a;b" from t`, "commit"}},
		{"line comment", "select 1 -- ; not here\n; commit", []string{"select 1 -- ; not here", "commit"}},
		{"nested block comment", "select /* a /* ; */ ; */ 1; commit", []string{"select /* a /* ; */ ; */ 1", "commit"}},
		{"dollar quote", "do $$ begin; commit; end $$; commit", []string{"do $$ begin; commit; end $$", "commit"}},
		{"tagged dollar quote", "do $f$ x; $$ ; $f$; end", []string{"do $f$ x; $$ ; $f$", "end"}},
		{"parameter is not a quote", "update t set x=$1; commit", []string{"update t set x=$1", "commit"}},
		{"unterminated string", "select 'abc; commit", []string{"select 'abc; commit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := splitSQL(tt.sql); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitSQL(%q) = %q, want %q", tt.sql, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		sql  string
		want stmtClass
	}{
		{"begin", stmtBegin},
		{"BEGIN ISOLATION LEVEL SERIALIZABLE", stmtBegin},
		{"start transaction", stmtBegin},
		{"commit", stmtCommit},
		{"COMMIT WORK", stmtCommit},
		{"commit and chain", stmtCommit},
		{"end", stmtCommit},
		{"/* why */ commit", stmtCommit},
		{"-- note\ncommit", stmtCommit},
		{"commit prepared 'x'", stmtCommitPrepare},
		{"rollback", stmtRollback},
		{"abort", stmtRollback},
		{"rollback to savepoint a", stmtOther},
		{"ROLLBACK PREPARED 'x'", stmtOther},
		{"prepare transaction 'x'", stmtPrepareTxn},
		{"prepare q as select 1", stmtOther},
		{"UPDATE account SET balance = balance - 1 WHERE id = 1 AND balance > 0", stmtWrite},
		{"insert into t values (1)", stmtWrite},
		{"delete from t", stmtWrite},
		{"(select 1)", stmtOther},
		{"select * from t for update", stmtOther},
		{"with x as (update t set a = 1 returning *) select * from x", stmtWrite},
		{"with x as (select 'update') select * from x", stmtOther},
		{"copy t from stdin", stmtWrite},
		{"copy t to stdout", stmtOther},
		{"create table t (x int)", stmtWrite},
		{"set search_path = x", stmtOther},
		{"", stmtOther},
		{"'commit'", stmtOther},
	}
	for _, tt := range tests {
		if got := classify(tt.sql); got != tt.want {
			t.Errorf("classify(%q) = %d, want %d", tt.sql, got, tt.want)
		}
	}
}
