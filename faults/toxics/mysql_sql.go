package toxics

import "strings"

// myClass is what one MySQL statement does to the transaction, as far as commit faults
// care.
type myClass uint8

const (
	myOther           myClass = iota // reads and session commands
	myDML                            // INSERT, UPDATE, DELETE, REPLACE, LOAD DATA: affected rows count its change
	myWrite                          // CALL, EXECUTE, DO ...: may change data, its affected rows do not tell
	myDDL                            // commits on its own, and commits an open transaction first
	myBegin                          // BEGIN, START TRANSACTION
	myCommit                         // COMMIT
	myRollback                       // ROLLBACK (not ROLLBACK TO SAVEPOINT)
	mySetAutocommit                  // SET autocommit = 1
	mySetNoAutocommit                // SET autocommit = 0
)

// myClassify tells what one MySQL statement does to the transaction.
func myClassify(stmt string) myClass {
	first, second := pgLex.firstTwo(stmt)
	switch first {
	case "BEGIN":
		return myBegin
	case "START":
		if second == "TRANSACTION" {
			return myBegin
		}
		return myDDL // START SLAVE, START REPLICA ...: administrative, commit implicitly
	case "COMMIT":
		return myCommit
	case "ROLLBACK":
		if second == "TO" {
			return myOther
		}
		return myRollback
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD":
		return myDML
	case "CALL", "EXECUTE", "DO":
		return myWrite
	case "CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME", "GRANT", "REVOKE", "LOCK", "UNLOCK",
		"ANALYZE", "OPTIMIZE", "REPAIR", "FLUSH", "INSTALL", "UNINSTALL":
		if first == "CREATE" && second == "TEMPORARY" || first == "DROP" && second == "TEMPORARY" {
			// Temporary tables commit nothing.
			return myOther
		}
		return myDDL
	case "WITH":
		if hasWord(stmt, "INSERT", "UPDATE", "DELETE", "REPLACE") {
			return myDML
		}
	case "SET":
		return setAutocommit(stmt)
	}
	return myOther
}

// setAutocommit reads SET [SESSION|@@session.|@@]autocommit = value among the
// assignments of a SET statement; myOther when it sets something else.
func setAutocommit(stmt string) myClass {
	up := strings.ToUpper(stmt)
	i := strings.Index(up, "AUTOCOMMIT")
	if i < 0 {
		return myOther
	}
	rest := strings.TrimLeft(up[i+len("AUTOCOMMIT"):], " \t\r\n")
	rest, ok := strings.CutPrefix(rest, "=")
	if !ok {
		if rest, ok = strings.CutPrefix(rest, ":="); !ok {
			return myOther
		}
	}
	rest = strings.TrimLeft(rest, " \t\r\n'\"")
	switch {
	case strings.HasPrefix(rest, "1"), strings.HasPrefix(rest, "ON"), strings.HasPrefix(rest, "TRUE"):
		return mySetAutocommit
	case strings.HasPrefix(rest, "0"), strings.HasPrefix(rest, "OFF"), strings.HasPrefix(rest, "FALSE"):
		return mySetNoAutocommit
	}
	return myOther
}

// mySplit splits a MySQL query string into its statements at top-level semicolons,
// skipping quoted strings (with backslash escapes), backquoted and double-quoted
// identifiers and comments. It never fails: text that does not lex ends the last
// statement. (A DELIMITER is a client command, never sent to the server.)
func mySplit(sql string) []string { return splitAt(sql, mySkip) }

// mySkip returns the index just past the MySQL token at i: a quoted string or
// identifier, a comment, or a single byte.
func mySkip(sql string, i int) int {
	switch c := sql[i]; {
	case c == '\'' || c == '"' || c == '`':
		return myQuoted(sql, i)
	case c == '#' || c == '-' && strings.HasPrefix(sql[i:], "-- "):
		j := strings.IndexByte(sql[i:], '\n')
		if j < 0 {
			return len(sql)
		}
		return i + j + 1
	case c == '/' && strings.HasPrefix(sql[i:], "/*"):
		j := strings.Index(sql[i+2:], "*/")
		if j < 0 {
			return len(sql)
		}
		return i + 2 + j + 2
	}
	return i + 1
}

// myQuoted returns the index just past the quoted string or identifier at i: a doubled
// quote stands for itself, and in strings a backslash escapes the next byte.
func myQuoted(s string, i int) int {
	q := s[i]
	j := i + 1
	for j < len(s) {
		switch {
		case s[j] == '\\' && q != '`':
			j += 2
			continue
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j += 2
				continue
			}
			return j + 1
		}
		j++
	}
	return len(s)
}
