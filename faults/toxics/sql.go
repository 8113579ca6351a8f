package toxics

import (
	"strings"
)

// stmtClass is what a SQL statement does to the transaction state, as far as commit
// faults care.
type stmtClass uint8

const (
	stmtOther         stmtClass = iota // reads and session commands: no effect on commits
	stmtWrite                          // changes data: commits at once outside a block
	stmtBegin                          // BEGIN, START TRANSACTION: opens a block
	stmtCommit                         // COMMIT, END: commits an open block
	stmtRollback                       // ROLLBACK, ABORT: ends a block without commit
	stmtPrepareTxn                     // PREPARE TRANSACTION: ends a block without commit
	stmtCommitPrepare                  // COMMIT PREPARED: commits a prepared transaction
)

// lexer knows where the tokens of one dialect end. PostgreSQL and CQL share quotes,
// "--" line comments and block comments, but PostgreSQL's block comments nest and CQL's
// do not, and CQL also takes "//" as a line comment.
type lexer struct {
	cql bool
}

var (
	pgLex  = lexer{}
	cqlLex = lexer{cql: true}
)

// splitSQL splits a query string into its statements at top-level semicolons, skipping
// quoted strings, quoted identifiers, dollar quotes and comments, so that a semicolon
// inside any of them does not split. Empty statements are dropped. It never fails: text
// that does not lex (an unterminated quote) ends the last statement.
func splitSQL(sql string) []string { return splitAt(sql, pgLex.skipToken) }

// splitAt splits sql at the semicolons outside the tokens skip steps over (skip
// returns the index just past the token at i, a byte or more), trimmed, dropping empty
// statements.
func splitAt(sql string, skip func(sql string, i int) int) []string {
	var out []string
	start, i := 0, 0
	for i < len(sql) {
		if sql[i] != ';' {
			i = skip(sql, i)
			continue
		}
		if s := strings.TrimSpace(sql[start:i]); s != "" {
			out = append(out, s)
		}
		i++
		start = i
	}
	if s := strings.TrimSpace(sql[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// skipToken returns the index just past the lexical element starting at i: a quoted
// string, quoted identifier, dollar-quoted string, comment, or a single byte.
func (l lexer) skipToken(s string, i int) int {
	c := s[i]
	switch {
	case c == '\'':
		// E'...' strings allow backslash escapes; plain ones only ''. Treating a
		// backslash as an escape in both is safe enough for splitting: standard
		// strings rarely end in a backslash.
		escapes := i > 0 && (s[i-1] == 'E' || s[i-1] == 'e')
		j := i + 1
		for j < len(s) {
			switch {
			case escapes && s[j] == '\\':
				j += 2
				continue
			case s[j] == '\'':
				if j+1 < len(s) && s[j+1] == '\'' {
					j += 2
					continue
				}
				return j + 1
			}
			j++
		}
		return len(s)
	case c == '"':
		j := strings.IndexByte(s[i+1:], '"')
		if j < 0 {
			return len(s)
		}
		return i + 1 + j + 1
	case (c == '-' && i+1 < len(s) && s[i+1] == '-') || (l.cql && c == '/' && i+1 < len(s) && s[i+1] == '/'):
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s)
		}
		return i + j + 1
	case l.cql && c == '/' && i+1 < len(s) && s[i+1] == '*':
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return len(s)
		}
		return i + 2 + j + 2
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		depth := 0
		j := i
		for j+1 < len(s) {
			switch {
			case s[j] == '/' && s[j+1] == '*':
				depth++
				j += 2
			case s[j] == '*' && s[j+1] == '/':
				depth--
				j += 2
				if depth == 0 {
					return j
				}
			default:
				j++
			}
		}
		return len(s)
	case c == '$':
		// $tag$ ... $tag$, where tag is empty or an identifier not starting with a
		// digit ($1 is a parameter, not a quote).
		j := i + 1
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if j >= len(s) || s[j] != '$' || (j > i+1 && s[i+1] >= '0' && s[i+1] <= '9') {
			return i + 1
		}
		tag := s[i : j+1]
		k := strings.Index(s[j+1:], tag)
		if k < 0 {
			return len(s)
		}
		return j + 1 + k + len(tag)
	}
	return i + 1
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// firstTwo returns the first two words of stmt as words reads them, "" for each
// that is missing.
func (l lexer) firstTwo(stmt string) (first, second string) {
	w := l.words(stmt, 2)
	if len(w) > 0 {
		first = w[0]
	}
	if len(w) > 1 {
		second = w[1]
	}
	return first, second
}

// words returns the first n bare words of a statement, upper-cased, skipping
// whitespace, comments and opening parentheses.
func (l lexer) words(stmt string, n int) []string {
	var out []string
	i := 0
	for i < len(stmt) && len(out) < n {
		c := stmt[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(':
			i++
		case isIdent(c):
			j := i
			for j < len(stmt) && isIdent(stmt[j]) {
				j++
			}
			out = append(out, strings.ToUpper(stmt[i:j]))
			i = j
		default:
			j := l.skipToken(stmt, i)
			if j == i+1 {
				// Punctuation other than a comment or a quote ends the leading words.
				return out
			}
			if c != '-' && c != '/' {
				return out
			}
			i = j
		}
	}
	return out
}

// hasWord reports whether the statement contains one of the words outside quotes and
// comments (case-insensitive). ws must be upper case.
func hasWord(stmt string, ws ...string) bool {
	i := 0
	for i < len(stmt) {
		c := stmt[i]
		if isIdent(c) {
			j := i
			for j < len(stmt) && isIdent(stmt[j]) {
				j++
			}
			w := stmt[i:j]
			for _, x := range ws {
				if strings.EqualFold(w, x) {
					return true
				}
			}
			i = j
			continue
		}
		i = pgLex.skipToken(stmt, i)
	}
	return false
}

// classify tells what one statement does to the transaction. Unknown statements are
// stmtOther; DDL counts as a write because outside a block it commits at once.
func classify(stmt string) stmtClass {
	first, second := pgLex.firstTwo(stmt)
	switch first {
	case "BEGIN", "START":
		return stmtBegin
	case "COMMIT":
		if second == "PREPARED" {
			return stmtCommitPrepare
		}
		return stmtCommit
	case "END":
		return stmtCommit
	case "ROLLBACK":
		if second == "TO" || second == "PREPARED" {
			return stmtOther
		}
		return stmtRollback
	case "ABORT":
		return stmtRollback
	case "PREPARE":
		if second == "TRANSACTION" {
			return stmtPrepareTxn
		}
		return stmtOther
	case "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "TRUNCATE", "CREATE", "ALTER",
		"DROP", "GRANT", "REVOKE", "COMMENT", "CALL", "DO", "REFRESH", "EXECUTE", "IMPORT",
		"REINDEX", "CLUSTER", "SECURITY":
		return stmtWrite
	case "COPY":
		if hasWord(stmt, "FROM") {
			return stmtWrite
		}
		return stmtOther
	case "WITH":
		// A data-modifying CTE; a plain WITH ... SELECT is a read.
		if hasWord(stmt, "INSERT", "UPDATE", "DELETE", "MERGE") {
			return stmtWrite
		}
		return stmtOther
	}
	return stmtOther
}
